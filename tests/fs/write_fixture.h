/*
 * write_fixture.h - the write layer's unit tests without a mount
 * (test_write.c, test_write_names.c): the replies the fixture does not
 * take, log lines kept, a writable dataset set up and torn down, and
 * helpers that open, write, close and create as the kernel would.
 */
#ifndef ZRFS_TEST_WRITE_FIXTURE_H
#define ZRFS_TEST_WRITE_FIXTURE_H

#include "fs_fixture.h"
#include "write_i.h"

#include <fcntl.h>

/* The replies this program's pieces send that the fixture does not take. */
static struct fuse_file_info t_opened;
static struct fuse_entry_param t_created;
static size_t t_written;

int fuse_reply_open(fuse_req_t req, const struct fuse_file_info *fi)
{
	(void)req;
	t_reply_reset();
	t_reply.kind = 'o';
	t_opened = *fi;
	return 0;
}

int fuse_reply_create(fuse_req_t req, const struct fuse_entry_param *e,
		      const struct fuse_file_info *fi)
{
	(void)req;
	t_reply_reset();
	t_reply.kind = 'c';
	t_created = *e;
	t_opened = *fi;
	return 0;
}

int fuse_reply_write(fuse_req_t req, size_t count)
{
	(void)req;
	t_reply_reset();
	t_reply.kind = 'w';
	t_written = count;
	return 0;
}

/* Log lines, kept. */
static char t_log[8192];

static inline void capture_log(enum fuse_log_level level, const char *fmt, va_list ap)
{
	size_t used = strlen(t_log);

	(void)level;
	vsnprintf(t_log + used, sizeof t_log - used, fmt, ap);
}

static inline void setup(void)
{
	t_fs_setup();
	t_fs.opts.commit_ms = 100;
	t_fs.opts.commit_bytes = 64 << 20;
	t_log[0] = 0;
	fuse_set_log_func(capture_log);
	cr_assert_eq(zrfs_writes_open(&t_fs, "/mnt/where"), 0);
}

static inline void teardown(void)
{
	zrfs_writes_close(&t_fs);
	t_fs_teardown();
}

/* Record @id of field @f as the dataset has it now (a reader of the
 * current commit): its length into *len, NULL when missing. */
static inline uint8_t *committed(unsigned f, uint64_t id, size_t *len)
{
	zr_dataset *ds;
	zr_record_stat rs;
	uint8_t *buf = NULL;

	cr_assert_eq(zr_open(&ds, t_ds, ZR_RDONLY), 0, "%s", zr_errmsg(NULL));
	if (id < zr_length(ds) && zr_stat(ds, f, id, &rs) == 0 && rs.present) {
		buf = malloc(rs.logical_len + 1);
		cr_assert_eq(zr_record_load(ds, f, id, buf, rs.logical_len + 1),
			     (int64_t)rs.logical_len);
		*len = rs.logical_len;
	}
	zr_close(ds);
	return buf;
}

static inline uint64_t length_now(void)
{
	zr_dataset *ds;
	cr_assert_eq(zr_open(&ds, t_ds, ZR_RDONLY), 0);
	uint64_t n = zr_length(ds);
	zr_close(ds);
	return n;
}

static inline uint64_t generation_now(void)
{
	zr_dataset *ds;
	cr_assert_eq(zr_open(&ds, t_ds, ZR_RDONLY), 0);
	uint64_t g = zr_generation(ds);
	zr_close(ds);
	return g;
}

static inline void expect_value(unsigned f, uint64_t id, const char *want)
{
	size_t len = 0;
	uint8_t *v = committed(f, id, &len);

	if (!want) {
		cr_assert_null(v, "record %llu should be missing", (unsigned long long)id);
		return;
	}
	cr_assert_not_null(v, "record %llu is missing", (unsigned long long)id);
	cr_assert_eq(len, strlen(want), "record %llu: %zu bytes, not %zu", (unsigned long long)id,
		     len, strlen(want));
	cr_assert_arr_eq(v, want, len);
	free(v);
}

/* Record (@f, @id) still holds @old (@len bytes), as before: @why. */
static inline void expect_unchanged(unsigned f, uint64_t id, const uint8_t *old, size_t len,
			     const char *why)
{
	size_t now_len = 0;
	uint8_t *now = committed(f, id, &now_len);

	cr_assert_not_null(now, "%s: the record lost its value", why);
	cr_assert_eq(now_len, len, "%s: %zu bytes, not %zu", why, now_len, len);
	cr_assert_arr_eq(now, old, len, "%s", why);
	free(now);
}

/* The lock owner of this program's descriptor table, and another's. */
#define ME 77
#define CHILD 99

static inline struct zrfs_handle *handle(struct fuse_file_info *fi)
{
	cr_assert_not_null(zrfs_handle_of(fi), "no handle");
	return zrfs_handle_of(fi);
}

/* Open inode @ino for writing with open(2) flags @flags. */
static inline struct fuse_file_info open_ino(fuse_ino_t ino, int flags)
{
	struct fuse_file_info fi = {.flags = flags};

	zrfs_write_open(NULL, &t_fs, ino, &fi);
	cr_assert_eq(t_reply.kind, 'o', "open: kind %c errno %d", t_reply.kind, t_reply.err);
	cr_assert(t_opened.direct_io, "a writer shares no pages with the readers");
	return t_opened;
}

/* Open record (@f, @id); O_TRUNC as the kernel sends it: the OPEN without
 * it, then a SETATTR of the size from the same process, without the handle. */
static inline struct fuse_file_info open_w(unsigned f, uint64_t id, int flags)
{
	fuse_ino_t ino = zrfs_rec_ino(f, id, 0);
	struct fuse_file_info fi = open_ino(ino, flags & ~O_TRUNC);

	if (flags & O_TRUNC) {
		struct stat now = {.st_mode = S_IFREG | 0644}, want = {.st_size = 0};
		zrfs_write_setattr(NULL, &t_fs, ino, &want, FUSE_SET_ATTR_SIZE, &now);
		cr_assert_eq(t_reply.kind, 'a', "O_TRUNC: kind %c errno %d", t_reply.kind,
			     t_reply.err);
	}
	return fi;
}

static inline void write_as(struct fuse_file_info *fi, uint64_t owner, const char *s, off_t off)
{
	fi->lock_owner = owner;
	handle(fi)->ops->write(NULL, &t_fs, handle(fi), s, strlen(s), off, fi);
	cr_assert_eq(t_reply.kind, 'w', "write: kind %c errno %d", t_reply.kind, t_reply.err);
	cr_assert_eq(t_written, strlen(s));
}

static inline void write_at(struct fuse_file_info *fi, const char *s, off_t off)
{
	write_as(fi, ME, s, off);
}

/* A close(2) of one descriptor by the process owning @owner: its errno. */
static inline int flush_as(struct fuse_file_info *fi, uint64_t owner)
{
	fi->lock_owner = owner;
	handle(fi)->ops->flush(NULL, &t_fs, handle(fi), fi);
	cr_assert_eq(t_reply.kind, 'e');
	return t_reply.err;
}

static inline void release(struct fuse_file_info *fi)
{
	handle(fi)->ops->release(NULL, &t_fs, handle(fi));
	cr_assert_eq(t_reply.kind, 'e');
}

/* Close @fi as the kernel does for the writer's last descriptor: FLUSH,
 * then RELEASE. The flush's errno. */
static inline int close_w(struct fuse_file_info *fi)
{
	int err = flush_as(fi, ME);
	release(fi);
	return err;
}

static inline void read_h(struct fuse_file_info *fi, size_t size, off_t off)
{
	handle(fi)->ops->read(NULL, &t_fs, handle(fi), 0, size, off);
}

/* Create @name in field @f's directory: its handle's fi, or 0-errno'd. */
static inline struct fuse_file_info create_open(unsigned f, const char *name, int want_errno)
{
	struct fuse_file_info fi = {.flags = O_WRONLY | O_CREAT};

	zrfs_write_create(NULL, &t_fs, ZRFS_INO_DIR + f, name, 0644, &fi);
	if (want_errno) {
		cr_assert_eq(t_reply.kind, 'e', "%s: kind %c", name, t_reply.kind);
		cr_assert_eq(t_reply.err, want_errno, "%s: errno %d", name, t_reply.err);
		return (struct fuse_file_info){0};
	}
	cr_assert_eq(t_reply.kind, 'c', "%s: kind %c errno %d", name, t_reply.kind, t_reply.err);
	return t_opened;
}

/* Create @name, write @s, close: the created inode. */
static inline fuse_ino_t create(unsigned f, const char *name, const char *s)
{
	struct fuse_file_info fi = create_open(f, name, 0);
	fuse_ino_t ino = t_created.ino;

	if (*s)
		write_at(&fi, s, 0);
	cr_assert_eq(close_w(&fi), 0);
	return ino;
}

/* Commit the new files ready, as the committing thread would. */
static inline void group(void)
{
	cr_assert_geq(zrfs_publish_group(&t_fs, NULL), 0);
}

static inline fuse_ino_t lookup(unsigned f, const char *name)
{
	t_refresh();
	return t_lookup(&zrfs_writing, ZRFS_INO_DIR + f, name, NULL);
}

/* The number the kernel's lookup of @name in field @f's directory is
 * answered with (counted as handed), 0 for none. */
static inline fuse_ino_t kernel_lookup(unsigned f, const char *name)
{
	t_refresh();
	zrfs_rw_ops.lookup(NULL, ZRFS_INO_DIR + f, name);
	return t_reply.kind == 'n' ? t_reply.entry.ino : 0;
}

#endif
