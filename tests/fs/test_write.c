/*
 * Description: a writable mount's write layer without a mount (fs/write/):
 * the writer refuses a second one and says who holds the dataset; a file
 * opened for writing copies nothing until it changes, takes writes at any
 * offset (O_APPEND at its end) and is stored when the process that wrote
 * closes it, never by the close of a duplicate before a write or of a
 * descriptor another process inherited, and at its last close what is left;
 * refused values change nothing; new files are listed under their names,
 * stored in groups at the next id (never taking another's), named after
 * themselves; renamed or removed before their group, they never were; a
 * temporary file renamed onto a record after fsync leaves no record
 * behind; a rename takes the open file with it; names in log lines are
 * escaped. No following or committing thread runs here: every request is
 * answered at once and groups are committed by hand.
 */
#include "fs_fixture.h"
#include "write_i.h"

#include <fcntl.h>

TestSuite(write);

/* The replies this program's pieces send that the fixture does not take. */
static struct fuse_file_info t_opened;
static struct fuse_entry_param t_created;
static size_t t_written;
static struct fuse_ctx t_ctx = {.pid = 4242};

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

const struct fuse_ctx *fuse_req_ctx(fuse_req_t req)
{
	(void)req;
	return &t_ctx;
}

/* Log lines, kept. */
static char t_log[8192];

static void capture_log(enum fuse_log_level level, const char *fmt, va_list ap)
{
	size_t used = strlen(t_log);

	(void)level;
	vsnprintf(t_log + used, sizeof t_log - used, fmt, ap);
}

static void setup(void)
{
	t_fs_setup();
	t_fs.opts.commit_ms = 100;
	t_fs.opts.commit_bytes = 64 << 20;
	t_log[0] = 0;
	fuse_set_log_func(capture_log);
	cr_assert_eq(zrfs_writes_open(&t_fs, "/mnt/where"), 0);
}

static void teardown(void)
{
	zrfs_writes_close(&t_fs);
	t_fs_teardown();
}

/* Record @id of field @f as the dataset has it now (a reader of the
 * current commit): its length into *len, NULL when missing. */
static uint8_t *committed(unsigned f, uint64_t id, size_t *len)
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

static uint64_t length_now(void)
{
	zr_dataset *ds;
	cr_assert_eq(zr_open(&ds, t_ds, ZR_RDONLY), 0);
	uint64_t n = zr_length(ds);
	zr_close(ds);
	return n;
}

static uint64_t generation_now(void)
{
	zr_dataset *ds;
	cr_assert_eq(zr_open(&ds, t_ds, ZR_RDONLY), 0);
	uint64_t g = zr_generation(ds);
	zr_close(ds);
	return g;
}

static void expect_value(unsigned f, uint64_t id, const char *want)
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
static void expect_unchanged(unsigned f, uint64_t id, const uint8_t *old, size_t len,
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

static struct zrfs_handle *handle(struct fuse_file_info *fi)
{
	cr_assert_not_null(zrfs_handle_of(fi), "no handle");
	return zrfs_handle_of(fi);
}

/* Open inode @ino for writing with open(2) flags @flags. */
static struct fuse_file_info open_ino(fuse_ino_t ino, int flags)
{
	struct fuse_file_info fi = {.flags = flags};

	zrfs_write_open(NULL, &t_fs, ino, &fi);
	cr_assert_eq(t_reply.kind, 'o', "open: kind %c errno %d", t_reply.kind, t_reply.err);
	cr_assert(t_opened.direct_io, "a writer shares no pages with the readers");
	return t_opened;
}

/* Open record (@f, @id); O_TRUNC as the kernel sends it: the OPEN without
 * it, then a SETATTR of the size from the same process, without the handle. */
static struct fuse_file_info open_w(unsigned f, uint64_t id, int flags)
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

static void write_as(struct fuse_file_info *fi, uint64_t owner, const char *s, off_t off)
{
	fi->lock_owner = owner;
	handle(fi)->ops->write(NULL, &t_fs, handle(fi), s, strlen(s), off, fi);
	cr_assert_eq(t_reply.kind, 'w', "write: kind %c errno %d", t_reply.kind, t_reply.err);
	cr_assert_eq(t_written, strlen(s));
}

static void write_at(struct fuse_file_info *fi, const char *s, off_t off)
{
	write_as(fi, ME, s, off);
}

/* A close(2) of one descriptor by the process owning @owner: its errno. */
static int flush_as(struct fuse_file_info *fi, uint64_t owner)
{
	fi->lock_owner = owner;
	handle(fi)->ops->flush(NULL, &t_fs, handle(fi), fi);
	cr_assert_eq(t_reply.kind, 'e');
	return t_reply.err;
}

static void release(struct fuse_file_info *fi)
{
	handle(fi)->ops->release(NULL, &t_fs, handle(fi));
	cr_assert_eq(t_reply.kind, 'e');
}

/* Close @fi as the kernel does for the writer's last descriptor: FLUSH,
 * then RELEASE. The flush's errno. */
static int close_w(struct fuse_file_info *fi)
{
	int err = flush_as(fi, ME);
	release(fi);
	return err;
}

static void read_h(struct fuse_file_info *fi, size_t size, off_t off)
{
	handle(fi)->ops->read(NULL, &t_fs, handle(fi), 0, size, off);
}

Test(write, a_second_writer_is_refused_naming_the_mount, .init = setup, .fini = teardown)
{
	zr_dataset *ds;
	cr_assert_eq(zr_open(&ds, t_ds, ZR_RDWR), -EBUSY);
	cr_assert_not_null(strstr(zr_errmsg(NULL), "zrfs mount on /mnt/where"), "%s",
			   zr_errmsg(NULL));
}

Test(write, a_value_written_in_pieces_is_stored_at_the_writers_close, .init = setup,
     .fini = teardown)
{
	size_t len;
	uint8_t *old = committed(2, 7, &len);
	struct fuse_file_info fi = open_w(2, 7, O_WRONLY | O_TRUNC);

	write_at(&fi, "world", 6);
	write_at(&fi, "hello ", 0);
	expect_unchanged(2, 7, old, len, "the record keeps its value until the writer closes");
	read_h(&fi, 64, 0);
	cr_assert_eq(t_reply.len, 11, "the writer reads what it wrote");
	cr_assert_arr_eq(t_reply.data, "hello world", 11);
	cr_assert_eq(close_w(&fi), 0);
	expect_value(2, 7, "hello world");
	free(old);
}

Test(write, a_close_by_another_process_stores_nothing_the_last_close_stores_the_rest,
     .init = setup, .fini = teardown)
{
	size_t len;
	uint8_t *old = committed(2, 8, &len);
	struct fuse_file_info fi = open_w(2, 8, O_WRONLY | O_TRUNC);

	write_at(&fi, "line1\n", 0);
	/* a forked child exits: its copy of the descriptor is closed */
	cr_assert_eq(flush_as(&fi, CHILD), 0);
	expect_unchanged(2, 8, old, len, "another process's close published a value being written");
	write_at(&fi, "line2\n", 6);
	/* the writer's descriptor goes with the file's last close (no FLUSH of
	 * its own: the RELEASE of an exec'd program's descriptors) */
	release(&fi);
	expect_value(2, 8, "line1\nline2\n");
	free(old);
}

Test(write, a_redirections_first_close_before_any_write_stores_nothing, .init = setup,
     .fini = teardown)
{
	size_t len;
	uint8_t *old = committed(2, 9, &len);
	uint64_t gen = generation_now();
	/* sh: cat x > f opens f (O_TRUNC), dup2s it onto 1 and closes it */
	struct fuse_file_info fi = open_w(2, 9, O_WRONLY | O_TRUNC);

	cr_assert_eq(flush_as(&fi, ME), 0);
	expect_unchanged(2, 9, old, len, "the record was emptied before its writer wrote");
	write_at(&fi, "new value", 0);
	cr_assert_eq(close_w(&fi), 0);
	expect_value(2, 9, "new value");
	cr_assert_eq(generation_now(), gen + 1, "one commit, as cp makes");
	free(old);
}

Test(write, a_file_emptied_and_closed_unwritten_is_stored_at_its_last_close, .init = setup,
     .fini = teardown)
{
	size_t len;
	uint8_t *old = committed(2, 6, &len);
	struct fuse_file_info fi = open_w(2, 6, O_WRONLY | O_TRUNC); /* sh: : > f */

	cr_assert_eq(flush_as(&fi, ME), 0);
	expect_unchanged(2, 6, old, len, "emptied, it is not published at that close");
	release(&fi);
	expect_value(2, 6, "");
	free(old);
}

Test(write, without_truncation_the_old_value_is_kept_around_a_write, .init = setup,
     .fini = teardown)
{
	size_t len;
	uint8_t *old = committed(2, 9, &len);
	struct fuse_file_info fi = open_w(2, 9, O_WRONLY);

	write_at(&fi, "XY", 3);
	cr_assert_eq(close_w(&fi), 0);
	uint8_t *now = committed(2, 9, &len);
	cr_assert_eq(len, 27);
	cr_assert_arr_eq(now, old, 3);
	cr_assert_arr_eq(now + 3, "XY", 2);
	cr_assert_arr_eq(now + 5, old + 5, 22);
	free(old);
	free(now);
}

Test(write, o_append_writes_at_the_end_of_the_value_being_written, .init = setup,
     .fini = teardown)
{
	struct fuse_file_info fi = open_w(2, 1, O_WRONLY | O_APPEND);

	/* the kernel asks at the size it keeps for the inode, which any stat
	 * sets back to the stored value's: the value's own end counts */
	write_at(&fi, "A\n", 0);
	write_at(&fi, "B\n", 0);
	write_at(&fi, "C\n", 3);
	cr_assert_eq(close_w(&fi), 0);
	expect_value(2, 1, "bcdA\nB\nC\n");
}

Test(write, opening_for_writing_copies_nothing_until_a_change_and_big_values_go_to_files,
     .init = setup, .fini = teardown)
{
	size_t big = (size_t)3 << 20, len;
	char *b = malloc(big + 1);
	for (size_t i = 0; i < big; i++)
		b[i] = (char)('a' + i % 23);
	b[big] = 0;
	struct fuse_file_info fi = open_w(2, 5, O_WRONLY | O_TRUNC);
	write_at(&fi, b, 0);
	cr_assert_eq(close_w(&fi), 0);

	fi = open_w(2, 5, O_RDWR);
	struct whandle *h = (struct whandle *)handle(&fi);
	cr_assert_not(h->node->loaded, "opening copied the stored value");
	write_at(&fi, "!", 1);
	cr_assert(h->node->loaded);
	cr_assert_geq(h->node->val.fd, 0, "a value past 1 MiB is in a private file");
	cr_assert_null(h->node->val.mem, "and not in memory");
	cr_assert_eq(close_w(&fi), 0);
	uint8_t *now = committed(2, 5, &len);
	b[1] = '!';
	cr_assert_eq(len, big);
	cr_assert_arr_eq(now, b, big);
	free(now);
	free(b);
}

/* Values are written in memory up to 1 MiB (values.c), in a private file
 * beyond: a value that grows past it moves there whole, holes included. */
Test(write, holes_read_as_zeros_in_memory_and_after_moving_to_a_file, .init = setup,
     .fini = teardown)
{
	size_t len, far = (size_t)3 << 20;
	struct fuse_file_info fi = open_w(2, 7, O_WRONLY | O_TRUNC);

	write_at(&fi, "head", 100); /* a hole of 100 bytes, in memory */
	read_h(&fi, 200, 0);
	cr_assert_eq(t_reply.len, 104);
	for (size_t i = 0; i < 100; i++)
		cr_assert_eq(t_reply.data[i], 0, "byte %zu of the hole", i);
	write_at(&fi, "tail", (off_t)far); /* past memory's limit: to a file */
	write_at(&fi, "HE", 100);          /* and written there */
	cr_assert_eq(close_w(&fi), 0);
	uint8_t *now = committed(2, 7, &len);
	cr_assert_eq(len, far + 4);
	cr_assert_arr_eq(now + 100, "HEad", 4);
	cr_assert_arr_eq(now + far, "tail", 4);
	for (size_t i = 0; i < far; i++)
		if (i < 100 || i >= 104)
			cr_assert_eq(now[i], 0, "byte %zu of the holes", i);
	free(now);
}

Test(write, a_close_without_a_write_commits_nothing, .init = setup, .fini = teardown)
{
	uint64_t gen = generation_now();
	struct fuse_file_info fi = open_w(0, 1, O_WRONLY);

	cr_assert_eq(close_w(&fi), 0);
	cr_assert_eq(generation_now(), gen);
}

Test(write, fixed_shapes_take_exactly_their_size, .init = setup, .fini = teardown)
{
	size_t len;
	struct fuse_file_info fi = open_w(1, 2, O_WRONLY | O_TRUNC);

	fi.lock_owner = ME;
	handle(&fi)->ops->write(NULL, &t_fs, handle(&fi), "123456789", 9, 0, &fi);
	cr_assert_eq(t_reply.kind, 'e');
	cr_assert_eq(t_reply.err, EFBIG);
	write_at(&fi, "1234", 0);
	cr_assert_eq(close_w(&fi), EINVAL, "4 bytes of an i64");
	uint8_t *v = committed(1, 2, &len);
	cr_assert_eq(len, 8);
	int64_t x;
	memcpy(&x, v, 8);
	cr_assert_eq(x, 1002, "the refused value changed nothing");
	free(v);
	cr_assert_not_null(strstr(t_log, "y/2: 4 bytes written, the field's shape takes 8"), "%s",
			   t_log);
}

Test(write, truncate_of_an_open_file_and_of_a_closed_one, .init = setup, .fini = teardown)
{
	size_t len;
	struct stat now = {.st_mode = S_IFREG | 0644}, want = {.st_size = 2};
	struct fuse_file_info fi = open_w(2, 8, O_WRONLY);

	/* ftruncate: the SETATTR comes with the handle; the close stores it */
	handle(&fi)->ops->setattr(NULL, &t_fs, handle(&fi), zrfs_rec_ino(2, 8, 0), &want,
				  FUSE_SET_ATTR_SIZE, &now);
	cr_assert_eq(t_reply.kind, 'a', "kind %c errno %d", t_reply.kind, t_reply.err);
	cr_assert_eq(close_w(&fi), 0);
	expect_value(2, 8, "ij");
	/* truncate(2) of a file nobody has open: a commit of its own */
	want.st_size = 1;
	zrfs_write_setattr(NULL, &t_fs, zrfs_rec_ino(2, 6, 0), &want, FUSE_SET_ATTR_SIZE, &now);
	cr_assert_eq(t_reply.kind, 'a');
	uint8_t *v = committed(2, 6, &len);
	cr_assert_eq(len, 1);
	free(v);
	/* a mode of a file at rest cannot change; times are accepted */
	struct stat mode = {.st_mode = 0600};
	zrfs_write_setattr(NULL, &t_fs, zrfs_rec_ino(2, 6, 0), &mode, FUSE_SET_ATTR_MODE, &now);
	cr_assert_eq(t_reply.err, EPERM);
	zrfs_write_setattr(NULL, &t_fs, zrfs_rec_ino(2, 6, 0), &mode, FUSE_SET_ATTR_MTIME, &now);
	cr_assert_eq(t_reply.kind, 'a');
}

/* Create @name in field @f's directory: its handle's fi, or 0-errno'd. */
static struct fuse_file_info create_open(unsigned f, const char *name, int want_errno)
{
	struct fuse_file_info fi = {.flags = O_WRONLY | O_CREAT};

	zrfs_write_create(NULL, &t_fs, ZRFS_INO_DIR + f, name, &fi);
	if (want_errno) {
		cr_assert_eq(t_reply.kind, 'e', "%s: kind %c", name, t_reply.kind);
		cr_assert_eq(t_reply.err, want_errno, "%s: errno %d", name, t_reply.err);
		return (struct fuse_file_info){0};
	}
	cr_assert_eq(t_reply.kind, 'c', "%s: kind %c errno %d", name, t_reply.kind, t_reply.err);
	return t_opened;
}

/* Create @name, write @s, close: the created inode. */
static fuse_ino_t create(unsigned f, const char *name, const char *s)
{
	struct fuse_file_info fi = create_open(f, name, 0);
	fuse_ino_t ino = t_created.ino;

	if (*s)
		write_at(&fi, s, 0);
	cr_assert_eq(close_w(&fi), 0);
	return ino;
}

/* Commit the new files ready, as the committing thread would. */
static void group(void)
{
	cr_assert_geq(zrfs_publish_group(&t_fs, NULL), 0);
}

/* Make the newest commit the mount's view, as the following thread would
 * (but for the inode versions and the kernel's notes). */
static void refresh(void)
{
	struct zrfs_view *cur = zrfs_view_hold(&t_fs), *next, *old;
	zr_dataset *ds;

	cr_assert_eq(zr_reopen(cur->ds, &ds), 0);
	cr_assert_eq(zrfs_view_make(&t_fs, ds, &next), 0);
	zrfs_state_lock(&t_fs);
	old = zrfs_view_publish(&t_fs, next);
	zrfs_state_unlock(&t_fs);
	zrfs_view_put(old);
	zrfs_view_put(cur);
}

static fuse_ino_t lookup(unsigned f, const char *name)
{
	refresh();
	return t_lookup(&zrfs_writing, ZRFS_INO_DIR + f, name, NULL);
}

Test(write, new_files_are_listed_under_their_names_until_their_group_commits, .init = setup,
     .fini = teardown)
{
	struct zrfs_dirent d;
	fuse_ino_t ino = create(2, "photo.bin", "cat");

	cr_assert_eq(length_now(), T_N, "not committed at close");
	cr_assert_eq(lookup(2, "photo.bin"), ino);
	cr_assert_eq(t_entry(&zrfs_writing, ZRFS_INO_DIR + 2, 2, &d), 1, "a new file is listed");
	cr_assert_str_eq(d.name, "photo.bin");
	cr_assert_eq(d.ino, ino);
	cr_assert_eq(t_entry(&zrfs_writing, ZRFS_INO_DIR + 2, d.pos + 1, &d), 0);
	cr_assert_eq(t_entry(&zrfs_writing, ZRFS_INO_DIR + 1, 2, &d), 0, "in its own directory");
	struct stat st;
	cr_assert_eq(t_attr(&zrfs_writing, ino, &st), 0);
	cr_assert_eq(st.st_size, 3);
	t_read(&zrfs_writing, ino, 64, 0);
	cr_assert_eq(t_reply.len, 3);
	group();
	expect_value(2, T_N, "cat");
	cr_assert_eq(t_entry(&zrfs_writing, ZRFS_INO_DIR + 2, 2, &d), 0,
		     "listed as its record once committed");
	cr_assert_not_null(strstr(t_log, "v/photo.bin is now v/10.bin"), "%s", t_log);
	refresh();
	t_read(&zrfs_writing, ino, 64, 0); /* its number shows the record */
	cr_assert_eq(t_reply.len, 3);
	cr_assert_arr_eq(t_reply.data, "cat", 3);
}

Test(write, creating_names_fills_in_appends_and_refuses, .init = setup, .fini = teardown)
{
	create_open(2, "3.bin", EEXIST);               /* has a value */
	create(2, "4.bin", "filled");                  /* missing: filled in */
	create(2, "10.bin", "next");                   /* the next id's */
	create(2, "x.bin", "");                        /* an empty one is a value too */
	group();
	expect_value(2, 4, "filled");
	expect_value(2, 10, "next");
	expect_value(2, 11, "");
	cr_assert_eq(length_now(), T_N + 2);
	expect_value(0, 10, NULL);                     /* its other fields missing */
	char longname[300];
	memset(longname, 'a', 299);
	longname[299] = 0;
	create_open(2, longname, ENAMETOOLONG);
	struct fuse_file_info fi = {.flags = O_WRONLY | O_CREAT};
	zrfs_write_create(NULL, &t_fs, ZRFS_INO_ROOT, "new", &fi);
	cr_assert_eq(t_reply.err, EPERM, "not a field directory");
}

Test(write, a_new_file_under_the_next_ids_name_never_takes_another_files_place,
     .init = setup, .fini = teardown)
{
	struct fuse_file_info a = create_open(2, "10.bin", 0);
	write_at(&a, "ten", 0);
	struct fuse_file_info b = create_open(2, "other.bin", 0);
	write_at(&b, "other", 0);
	handle(&b)->ops->fsync(NULL, &t_fs, handle(&b)); /* committed now, at the next id */
	cr_assert_eq(t_reply.err, 0);
	expect_value(2, 10, "other");
	cr_assert_eq(close_w(&b), 0);
	cr_assert_eq(close_w(&a), 0);
	group();
	expect_value(2, 10, "other");
	expect_value(2, 11, "ten");
	cr_assert_not_null(strstr(t_log, "v/10.bin is now v/11.bin"), "%s", t_log);
}

Test(write, a_temporary_file_renamed_onto_a_record_replaces_it_and_adds_no_record,
     .init = setup, .fini = teardown)
{
	/* sed -i: a file of its own in the same directory, renamed over */
	fuse_ino_t ino = create(2, "sedAb12Cd", "edited");
	uint64_t gen = generation_now();

	zrfs_write_rename(NULL, &t_fs, ZRFS_INO_DIR + 2, "sedAb12Cd", ZRFS_INO_DIR + 2, "0.bin", 0);
	cr_assert_eq(t_reply.err, 0);
	cr_assert_eq(generation_now(), gen, "a new file's rename is committed with its group");
	cr_assert_eq(lookup(2, "0.bin"), ino, "it stands in for the record's file");
	cr_assert_eq(lookup(2, "sedAb12Cd"), 0);
	struct zrfs_dirent d = {.pos = 2, .ino = zrfs_rec_ino(2, 0, 0), .type = S_IFREG};
	struct zrfs_view *v = zrfs_names_begin(&t_fs);
	cr_assert(zrfs_writing.shadow(&t_fs, v, ZRFS_INO_DIR + 2, &d), "and in the listing");
	zrfs_names_end(&t_fs);
	cr_assert_eq(d.ino, ino);
	group();
	expect_value(2, 0, "edited");
	cr_assert_eq(length_now(), T_N, "no record of its own");
}

Test(write, an_fsyncd_temporary_file_renamed_onto_a_record_leaves_no_record, .init = setup,
     .fini = teardown)
{
	/* Python's atomic save: mkstemp, write, fsync, close, os.replace */
	struct fuse_file_info fi = create_open(2, "tmpq8x_1", 0);

	write_at(&fi, "saved", 0);
	handle(&fi)->ops->fsync(NULL, &t_fs, handle(&fi));
	cr_assert_eq(t_reply.err, 0);
	cr_assert_eq(length_now(), T_N + 1, "fsync made it a record");
	cr_assert_eq(close_w(&fi), 0);
	zrfs_write_rename(NULL, &t_fs, ZRFS_INO_DIR + 2, "tmpq8x_1", ZRFS_INO_DIR + 2, "1.bin", 0);
	cr_assert_eq(t_reply.err, 0, "the name still names what it became");
	expect_value(2, 1, "saved");
	cr_assert_eq(length_now(), T_N, "the record it was, with no value left, is gone");
	/* the same, removed instead of renamed */
	fi = create_open(2, "tmp2", 0);
	write_at(&fi, "gone", 0);
	handle(&fi)->ops->fsync(NULL, &t_fs, handle(&fi));
	cr_assert_eq(close_w(&fi), 0);
	zrfs_write_unlink(NULL, &t_fs, ZRFS_INO_DIR + 2, "tmp2");
	cr_assert_eq(t_reply.err, 0);
	cr_assert_eq(length_now(), T_N);
}

Test(write, renamed_or_removed_before_its_group_a_new_file_never_was, .init = setup,
     .fini = teardown)
{
	create(2, "a.bin", "a");
	zrfs_write_rename(NULL, &t_fs, ZRFS_INO_DIR + 2, "a.bin", ZRFS_INO_DIR + 2, "b.bin", 0);
	cr_assert_eq(t_reply.err, 0);
	create(2, "c.bin", "c");
	zrfs_write_unlink(NULL, &t_fs, ZRFS_INO_DIR + 2, "c.bin");
	cr_assert_eq(t_reply.err, 0);
	cr_assert_eq(lookup(2, "c.bin"), 0);
	group();
	cr_assert_eq(length_now(), T_N + 1);
	expect_value(2, T_N, "a");
	cr_assert_not_null(strstr(t_log, "v/b.bin is now v/10.bin"), "the name it ended with: %s",
			   t_log);
}

Test(write, dot_files_wait_for_a_rename, .init = setup, .fini = teardown)
{
	struct fuse_file_info fi = create_open(2, ".0.bin.XyZ123", 0);

	write_at(&fi, "rsync", 0);
	handle(&fi)->ops->fsync(NULL, &t_fs, handle(&fi));
	cr_assert_eq(t_reply.err, 0);
	cr_assert_eq(close_w(&fi), 0);
	group();
	cr_assert_eq(length_now(), T_N, "a dot file is not stored by itself");
	zrfs_write_rename(NULL, &t_fs, ZRFS_INO_DIR + 2, ".0.bin.XyZ123", ZRFS_INO_DIR + 2,
			  "0.bin", 0);
	cr_assert_eq(t_reply.err, 0);
	group();
	expect_value(2, 0, "rsync");
	cr_assert_eq(lookup(2, ".0.bin.XyZ123"), 0);
	/* another dot file, removed: never stored */
	create(2, ".swp", "junk");
	zrfs_write_unlink(NULL, &t_fs, ZRFS_INO_DIR + 2, ".swp");
	cr_assert_eq(t_reply.err, 0);
	group();
	cr_assert_eq(length_now(), T_N);
	cr_assert_eq(lookup(2, ".swp"), 0);
}

Test(write, unlink_and_rename_of_records, .init = setup, .fini = teardown)
{
	uint8_t one[64], two[64];
	int n1 = t_value(2, 1, one), n2 = t_value(2, 2, two);

	zrfs_write_unlink(NULL, &t_fs, ZRFS_INO_DIR + 2, "0.bin");
	cr_assert_eq(t_reply.err, 0);
	expect_value(2, 0, NULL);
	cr_assert_eq(length_now(), T_N, "ids of records not made here never move");
	zrfs_write_unlink(NULL, &t_fs, ZRFS_INO_DIR + 2, "0.bin");
	cr_assert_eq(t_reply.err, ENOENT);
	zrfs_write_unlink(NULL, &t_fs, ZRFS_INO_DIR + 2, "zzz");
	cr_assert_eq(t_reply.err, ENOENT);

	zrfs_write_rename(NULL, &t_fs, ZRFS_INO_DIR + 2, "1.bin", ZRFS_INO_DIR + 2, "3.bin", 0);
	cr_assert_eq(t_reply.err, 0);
	one[n1] = 0;
	expect_value(2, 3, (const char *)one);
	expect_value(2, 1, NULL);
	zrfs_write_rename(NULL, &t_fs, ZRFS_INO_DIR + 2, "3.bin", ZRFS_INO_DIR + 2, "6.bin",
			  RENAME_NOREPLACE);
	cr_assert_eq(t_reply.err, EEXIST);
	zrfs_write_rename(NULL, &t_fs, ZRFS_INO_DIR + 2, "3.bin", ZRFS_INO_DIR + 0, "3", 0);
	cr_assert_eq(t_reply.err, EXDEV, "between field directories: mv copies");
	zrfs_write_rename(NULL, &t_fs, ZRFS_INO_ROOT, "meta.json", ZRFS_INO_ROOT, "m.json", 0);
	cr_assert_eq(t_reply.err, EPERM);
	/* to a name no record has: the value moves to a new record, as cp and
	 * rm would (the record's other fields stay), which the name reaches */
	zrfs_write_rename(NULL, &t_fs, ZRFS_INO_DIR + 2, "2.bin", ZRFS_INO_DIR + 2, "two.bin", 0);
	cr_assert_eq(t_reply.err, 0);
	two[n2] = 0;
	expect_value(2, T_N, (const char *)two);
	expect_value(2, 2, NULL);
	cr_assert_eq(length_now(), T_N + 1);
	uint8_t x2[64];
	t_value(0, 2, x2);
	x2[6] = 0;
	expect_value(0, 2, (const char *)x2);
	cr_assert_eq(lookup(2, "two.bin"), zrfs_rec_ino(2, T_N, 0));
}

Test(write, a_rename_takes_the_open_file_with_it, .init = setup, .fini = teardown)
{
	/* mv 1.bin 2.bin, then a write through the inode the kernel now has
	 * at 2.bin (record 1's) reaches record 2 */
	fuse_ino_t one = zrfs_rec_ino(2, 1, 0);
	struct fuse_file_info held = open_ino(one, O_WRONLY); /* open across the rename */

	zrfs_write_rename(NULL, &t_fs, ZRFS_INO_DIR + 2, "1.bin", ZRFS_INO_DIR + 2, "2.bin", 0);
	cr_assert_eq(t_reply.err, 0);
	struct fuse_file_info fi = open_ino(one, O_WRONLY);
	write_at(&fi, "XY", 0);
	cr_assert_eq(close_w(&fi), 0);
	expect_value(2, 2, "XYd");
	expect_value(2, 1, NULL);
	write_at(&held, "Z", 2);
	cr_assert_eq(close_w(&held), 0);
	expect_value(2, 2, "XYZ");
	expect_value(2, 1, NULL);
}

Test(write, a_file_opened_twice_and_truncated_by_path_keeps_the_lists_sound, .init = setup,
     .fini = teardown, .timeout = 10)
{
	struct stat now = {.st_mode = S_IFREG | 0644}, want = {.st_size = 0};
	struct fuse_file_info a = create_open(2, "twice.bin", 0);
	fuse_ino_t ino = t_created.ino;

	write_at(&a, "abc", 0);
	struct fuse_file_info b = open_ino(ino, O_WRONLY);
	struct fuse_file_info c = open_ino(ino, O_WRONLY);
	for (int i = 0; i < 4; i++) { /* O_TRUNCs, then truncate(2)s */
		want.st_size = i;
		zrfs_write_setattr(NULL, &t_fs, ino, &want, FUSE_SET_ATTR_SIZE, &now);
		cr_assert_eq(t_reply.kind, 'a', "kind %c errno %d", t_reply.kind, t_reply.err);
	}
	cr_assert_eq(close_w(&b), 0);
	cr_assert_eq(close_w(&a), 0);
	cr_assert_eq(close_w(&c), 0);
	group();
	size_t len;
	uint8_t *v = committed(2, T_N, &len);
	cr_assert_eq(len, 3);
	free(v);
}

Test(write, names_in_log_lines_are_escaped, .init = setup, .fini = teardown)
{
	struct fuse_file_info fi = create_open(2, "bad\nname", 0);

	write_at(&fi, "x", 0);
	zrfs_writes_close(&t_fs); /* unmounted while it is written: said */
	cr_assert_not_null(strstr(t_log, "v/bad\\x0aname: still being written at unmount"), "%s",
			   t_log);
	cr_assert_null(strstr(t_log, "bad\nname"));
	cr_assert_eq(zrfs_writes_open(&t_fs, "/mnt/where"), 0); /* for the teardown */
}

Test(write, a_record_made_here_left_empty_goes_and_the_last_takes_its_id, .init = setup,
     .fini = teardown)
{
	create(2, "a.bin", "a");
	create(2, "b.bin", "b");
	group();
	expect_value(2, T_N, "a");
	expect_value(2, T_N + 1, "b");
	zrfs_write_unlink(NULL, &t_fs, ZRFS_INO_DIR + 2, "a.bin");
	cr_assert_eq(t_reply.err, 0);
	cr_assert_eq(length_now(), T_N + 1);
	expect_value(2, T_N, "b");
	cr_assert_not_null(strstr(t_log, "record 11 is now record 10"), "%s", t_log);
	cr_assert_eq(lookup(2, "b.bin"), zrfs_rec_ino(2, T_N, 0), "its name follows it");
}

Test(write, new_files_not_stored_are_bounded, .init = setup, .fini = teardown)
{
	static struct fuse_file_info fi[DRAFTS_MAX];
	char name[32];

	for (int i = 0; i < DRAFTS_MAX; i++) {
		snprintf(name, sizeof name, "n%d.bin", i);
		fi[i] = create_open(2, name, 0);
	}
	create_open(2, "one-more.bin", ENOSPC);
	cr_assert_not_null(strstr(t_log, "1024 new files are not stored yet"), "%s", t_log);
	release(&fi[0]);
	zrfs_write_unlink(NULL, &t_fs, ZRFS_INO_DIR + 2, "n0.bin");
	fi[0] = create_open(2, "one-more.bin", 0);
	for (int i = 0; i < DRAFTS_MAX; i++)
		release(&fi[i]);
}

/* A dataset that keeps records' names, as zr import makes it. */
static void setup_names(void)
{
	static const zr_field_spec f[2] = {
		{.name = "v", .dtype = ZR_BYTES, .ext = "bin"},
		{.name = "name", .dtype = ZR_BYTES, .ext = "txt"},
	};
	zr_dataset *ds;
	t_setup();
	cr_assert_eq(zr_create(t_ds, f, 2, &(zr_create_opts){
		.attrs = "{\"names\": {\"field\": \"name\", \"kind\": \"path\"}}"}), 0);
	cr_assert_eq(zr_open(&ds, t_ds, ZR_RDWR), 0);
	zr_value v[2] = {{"zero", 4}, {"zero.bin", 8}};
	cr_assert_eq(zr_append(ds, v, NULL), 0);
	cr_assert_eq(zr_commit(ds), 0);
	zr_close(ds);
	t_fs_open(t_ds, NULL);
	t_log[0] = 0;
	fuse_set_log_func(capture_log);
	cr_assert_eq(zrfs_writes_open(&t_fs, "/mnt/where"), 0);
}

Test(write, records_added_or_renamed_through_the_mount_keep_their_names, .init = setup_names,
     .fini = teardown)
{
	create(0, "cat.bin", "meow");
	group();
	expect_value(0, 1, "meow");
	expect_value(1, 1, "cat.bin");
	/* a new file's record renamed: only its name changes */
	zrfs_write_rename(NULL, &t_fs, ZRFS_INO_DIR, "cat.bin", ZRFS_INO_DIR, "kitten.bin", 0);
	cr_assert_eq(t_reply.err, 0);
	expect_value(0, 1, "meow");
	expect_value(1, 1, "kitten.bin");
	cr_assert_eq(lookup(0, "kitten.bin"), zrfs_rec_ino(0, 1, 0));
	cr_assert_eq(lookup(0, "cat.bin"), 0);
	/* another record's file renamed: its value moves to a record so named */
	zrfs_write_rename(NULL, &t_fs, ZRFS_INO_DIR, "0.bin", ZRFS_INO_DIR, "dog.bin", 0);
	cr_assert_eq(t_reply.err, 0);
	expect_value(0, 0, NULL);
	expect_value(1, 0, "zero.bin");
	expect_value(0, 2, "zero");
	expect_value(1, 2, "dog.bin");
	/* and in a directory made for it, the name is the path */
	struct fuse_entry_param *e = &t_reply.entry;
	zrfs_write_mkdir(NULL, &t_fs, ZRFS_INO_DIR, "sub");
	cr_assert_eq(t_reply.kind, 'n', "mkdir: kind %c errno %d", t_reply.kind, t_reply.err);
	fuse_ino_t sub = e->ino;
	struct fuse_file_info fi = {.flags = O_WRONLY | O_CREAT};
	zrfs_write_create(NULL, &t_fs, sub, "in.bin", &fi);
	cr_assert_eq(t_reply.kind, 'c');
	fi = t_opened;
	write_at(&fi, "deep", 0);
	cr_assert_eq(close_w(&fi), 0);
	group();
	expect_value(0, 3, "deep");
	expect_value(1, 3, "sub/in.bin");
	refresh();
	cr_assert_eq(t_lookup(&zrfs_writing, sub, "in.bin", NULL), zrfs_rec_ino(0, 3, 0));
	zrfs_write_rmdir(NULL, &t_fs, ZRFS_INO_DIR, "sub");
	cr_assert_eq(t_reply.err, 0);
}

Test(write, a_temporary_directory_holds_files_until_they_are_renamed_out, .init = setup,
     .fini = teardown)
{
	/* rsync --delay-updates: .~tmp~/NAME, renamed into place at the end */
	struct fuse_entry_param *e = &t_reply.entry;
	zrfs_write_mkdir(NULL, &t_fs, ZRFS_INO_DIR + 2, ".~tmp~");
	cr_assert_eq(t_reply.kind, 'n');
	fuse_ino_t tmp = e->ino;
	struct fuse_file_info fi = {.flags = O_WRONLY | O_CREAT};
	zrfs_write_create(NULL, &t_fs, tmp, "0.bin", &fi);
	cr_assert_eq(t_reply.kind, 'c');
	fi = t_opened;
	write_at(&fi, "delayed", 0);
	cr_assert_eq(close_w(&fi), 0);
	group();
	cr_assert_eq(length_now(), T_N, "a file in a dot directory is temporary");
	struct zrfs_dirent d;
	cr_assert_eq(t_entry(&zrfs_writing, tmp, 2, &d), 1);
	cr_assert_str_eq(d.name, "0.bin");
	zrfs_write_rmdir(NULL, &t_fs, ZRFS_INO_DIR + 2, ".~tmp~");
	cr_assert_eq(t_reply.err, ENOTEMPTY);
	zrfs_write_rename(NULL, &t_fs, tmp, "0.bin", ZRFS_INO_DIR + 2, "0.bin", 0);
	cr_assert_eq(t_reply.err, 0);
	zrfs_write_rmdir(NULL, &t_fs, ZRFS_INO_DIR + 2, ".~tmp~");
	cr_assert_eq(t_reply.err, 0);
	group();
	expect_value(2, 0, "delayed");
	cr_assert_eq(length_now(), T_N);
	zrfs_write_rename(NULL, &t_fs, ZRFS_INO_DIR + 2, "1.bin", ZRFS_INO_DIR + 1, "1", 0);
	cr_assert_eq(t_reply.err, EXDEV, "between fields");
	zrfs_write_mkdir(NULL, &t_fs, ZRFS_INO_ROOT, "newfield");
	cr_assert_eq(t_reply.err, EPERM);
	zrfs_write_rmdir(NULL, &t_fs, ZRFS_INO_ROOT, "v");
	cr_assert_eq(t_reply.err, EPERM);
}
