/*
 * Description: a writable mount's pieces without a mount (fs/write.c,
 * fs/write_names.c, fs/writer.c): the writer refuses a second one and says
 * who holds the dataset; a file opened for writing starts from the record's
 * value (or empty, truncated), takes writes at any offset and becomes the
 * value in one commit when flushed, or is refused (EFBIG past the field's
 * size, EINVAL for a fixed shape's wrong length, nothing stored); creating
 * the next id appends, another name appends when stored, a dot name stays
 * until renamed onto a record's name; new files wait for a group commit;
 * unlinking makes a value missing; the generation moves with each commit.
 * No following or committing thread runs here, so every request is
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

static void setup(void)
{
	t_fs_setup();
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

/* Open record (@f, @id) for writing with open(2) flags @flags. */
static struct fuse_file_info open_w(unsigned f, uint64_t id, int flags)
{
	struct fuse_file_info fi = {.flags = flags};

	zrfs_write_open(NULL, &t_fs, zrfs_rec_ino(f, id, 0), &fi);
	cr_assert_eq(t_reply.kind, 'o', "open: kind %c errno %d", t_reply.kind, t_reply.err);
	cr_assert(t_opened.direct_io, "a writer shares no pages with the readers");
	return t_opened;
}

static void write_at(struct fuse_file_info *fi, const char *s, off_t off)
{
	zrfs_write_write(NULL, &t_fs, s, strlen(s), off, fi);
	cr_assert_eq(t_reply.kind, 'w', "write: kind %c errno %d", t_reply.kind, t_reply.err);
	cr_assert_eq(t_written, strlen(s));
}

/* Close @fi as the kernel does: FLUSH, then RELEASE. The flush's errno. */
static int close_w(struct fuse_file_info *fi)
{
	zrfs_write_flush(NULL, &t_fs, fi);
	cr_assert_eq(t_reply.kind, 'e');
	int err = t_reply.err;
	zrfs_write_release(NULL, &t_fs, fi);
	return err;
}

Test(write, a_second_writer_is_refused_naming_the_mount, .init = setup, .fini = teardown)
{
	zr_dataset *ds;
	cr_assert_eq(zr_open(&ds, t_ds, ZR_RDWR), -EBUSY);
	cr_assert_not_null(strstr(zr_errmsg(NULL), "zrfs mount on /mnt/where"), "%s",
			   zr_errmsg(NULL));
}

Test(write, a_value_written_in_pieces_is_stored_at_close, .init = setup, .fini = teardown)
{
	size_t len;
	struct fuse_file_info fi = open_w(2, 7, O_WRONLY | O_TRUNC);
	uint8_t *old = committed(2, 7, &len);

	write_at(&fi, "world", 6);
	write_at(&fi, "hello ", 0);
	/* not yet: the record keeps its value until the file is flushed */
	uint8_t *still = committed(2, 7, &len);
	cr_assert_eq(len, 21);
	cr_assert_arr_eq(still, old, 21);
	zrfs_write_read(NULL, &t_fs, NULL, 0, 64, 0, &fi);
	cr_assert_eq(t_reply.len, 11, "the writer reads what it wrote");
	cr_assert_arr_eq(t_reply.data, "hello world", 11);
	cr_assert_eq(close_w(&fi), 0);
	uint8_t *now = committed(2, 7, &len);
	cr_assert_eq(len, 11);
	cr_assert_arr_eq(now, "hello world", 11);
	free(old);
	free(still);
	free(now);
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

/* Values are written in memory up to 1 MiB (writer.c), in a private file
 * beyond: a value that grows past it moves there whole, holes included. */
Test(write, holes_read_as_zeros_in_memory_and_after_moving_to_a_file, .init = setup,
     .fini = teardown)
{
	size_t len, far = (size_t)3 << 20;
	struct fuse_file_info fi = open_w(2, 7, O_WRONLY | O_TRUNC);

	write_at(&fi, "head", 100); /* a hole of 100 bytes, in memory */
	zrfs_write_read(NULL, &t_fs, NULL, 0, 200, 0, &fi);
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
	zr_dataset *ds;
	cr_assert_eq(zr_open(&ds, t_ds, ZR_RDONLY), 0);
	uint64_t gen = zr_generation(ds);
	zr_close(ds);
	struct fuse_file_info fi = open_w(0, 1, O_WRONLY);
	cr_assert_eq(close_w(&fi), 0);
	cr_assert_eq(zr_open(&ds, t_ds, ZR_RDONLY), 0);
	cr_assert_eq(zr_generation(ds), gen);
	zr_close(ds);
}

Test(write, fixed_shapes_take_exactly_their_size, .init = setup, .fini = teardown)
{
	size_t len;
	struct fuse_file_info fi = open_w(1, 2, O_WRONLY | O_TRUNC);

	zrfs_write_write(NULL, &t_fs, "123456789", 9, 0, &fi);
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
}

Test(write, truncating_an_open_file_and_truncate_of_a_closed_one, .init = setup,
     .fini = teardown)
{
	size_t len;
	struct stat now = {0}, want = {.st_size = 2};
	struct fuse_file_info fi = open_w(2, 8, O_WRONLY);

	/* open(O_TRUNC): the kernel sends OPEN, then SETATTR without the handle */
	zrfs_write_setattr(NULL, &t_fs, zrfs_rec_ino(2, 8, 0), &want, FUSE_SET_ATTR_SIZE, NULL,
			   &now);
	cr_assert_eq(t_reply.kind, 'a', "kind %c errno %d", t_reply.kind, t_reply.err);
	cr_assert_eq(close_w(&fi), 0);
	uint8_t *v = committed(2, 8, &len);
	cr_assert_eq(len, 2);
	free(v);
	/* truncate(2) of a file nobody has open: a commit of its own */
	want.st_size = 1;
	zrfs_write_setattr(NULL, &t_fs, zrfs_rec_ino(2, 6, 0), &want, FUSE_SET_ATTR_SIZE, NULL,
			   &now);
	cr_assert_eq(t_reply.kind, 'a');
	v = committed(2, 6, &len);
	cr_assert_eq(len, 1);
	free(v);
	/* a mode of a file at rest cannot change; times are accepted */
	struct stat mode = {.st_mode = 0600};
	now.st_mode = S_IFREG | 0644;
	zrfs_write_setattr(NULL, &t_fs, zrfs_rec_ino(2, 6, 0), &mode, FUSE_SET_ATTR_MODE, NULL,
			   &now);
	cr_assert_eq(t_reply.err, EPERM);
	zrfs_write_setattr(NULL, &t_fs, zrfs_rec_ino(2, 6, 0), &mode, FUSE_SET_ATTR_MTIME, NULL,
			   &now);
	cr_assert_eq(t_reply.kind, 'a');
}

/* Create @name in field @f's directory, write @s, close: the created inode. */
static fuse_ino_t create(unsigned f, const char *name, const char *s, int want_errno)
{
	struct fuse_file_info fi = {.flags = O_WRONLY | O_CREAT};

	zrfs_write_create(NULL, &t_fs, ZRFS_INO_DIR + f, name, 0644, &fi);
	if (want_errno) {
		cr_assert_eq(t_reply.kind, 'e', "%s: kind %c", name, t_reply.kind);
		cr_assert_eq(t_reply.err, want_errno, "%s: errno %d", name, t_reply.err);
		return 0;
	}
	cr_assert_eq(t_reply.kind, 'c', "%s: kind %c errno %d", name, t_reply.kind, t_reply.err);
	fi = t_opened;
	fuse_ino_t ino = t_created.ino;
	write_at(&fi, s, 0);
	cr_assert_eq(close_w(&fi), 0);
	/* new files are committed in groups (no committing thread here): now */
	cr_assert_geq(zrfs_staged_sync(&t_fs), 0);
	return ino;
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
	cr_assert_eq(len, strlen(want), "record %llu: %zu bytes", (unsigned long long)id, len);
	cr_assert_arr_eq(v, want, len);
	free(v);
}

Test(write, creating_names_appends_fills_in_and_stages, .init = setup, .fini = teardown)
{
	fuse_ino_t ino;

	create(2, "3.bin", "", EEXIST);                 /* has a value */
	create(2, "4.bin", "filled", 0);                /* missing: filled in */
	expect_value(2, 4, "filled");
	ino = create(2, "10.bin", "next", 0);           /* N: appended there */
	cr_assert(zrfs_is_rec_ino(ino), "a record's name is the record's inode");
	expect_value(2, 10, "next");
	cr_assert_eq(length_now(), T_N + 1);
	expect_value(0, 10, NULL);                      /* its other fields missing */
	/* any name: the next id, once stored; committed with the next group */
	struct fuse_file_info fi = {.flags = O_WRONLY | O_CREAT};
	zrfs_write_create(NULL, &t_fs, ZRFS_INO_DIR + 2, "photo.bin", 0644, &fi);
	fi = t_opened;
	ino = t_created.ino;
	cr_assert(ino & ZRFS_INO_STAGED);
	write_at(&fi, "cat", 0);
	cr_assert_eq(close_w(&fi), 0);
	cr_assert_eq(length_now(), T_N + 1, "not committed at close");
	cr_assert_eq(zrfs_write_lookup(&t_fs, ZRFS_INO_DIR + 2, "photo.bin", &ino), 0,
		     "until it is, the name stays");
	cr_assert_gt(zrfs_staged_sync(&t_fs), 0);
	expect_value(2, 11, "cat");
	cr_assert_eq(zrfs_write_lookup(&t_fs, ZRFS_INO_DIR + 2, "photo.bin", &ino), -ENOENT,
		     "the name goes away once stored");
	create(2, "x.bin", "", 0);                      /* and an empty one is a value too */
	expect_value(2, 12, "");
	char longname[300];
	memset(longname, 'a', 299);
	longname[299] = 0;
	create(2, longname, "", ENAMETOOLONG);
	fi = (struct fuse_file_info){.flags = O_WRONLY | O_CREAT};
	zrfs_write_create(NULL, &t_fs, ZRFS_INO_ROOT, "new", 0644, &fi);
	cr_assert_eq(t_reply.err, EPERM, "not a field directory");
}

Test(write, dot_files_wait_for_a_rename, .init = setup, .fini = teardown)
{
	fuse_ino_t ino;

	create(2, ".0.bin.XyZ123", "rsync", 0);
	cr_assert_eq(length_now(), T_N, "a dot file is not stored by itself");
	cr_assert_eq(zrfs_write_lookup(&t_fs, ZRFS_INO_DIR + 2, ".0.bin.XyZ123", &ino), 0);
	cr_assert(ino & ZRFS_INO_STAGED);
	zrfs_write_rename(NULL, &t_fs, ZRFS_INO_DIR + 2, ".0.bin.XyZ123", ZRFS_INO_DIR + 2,
			  "0.bin", 0);
	cr_assert_eq(t_reply.kind, 'e');
	cr_assert_eq(t_reply.err, 0);
	expect_value(2, 0, "rsync");
	cr_assert_eq(zrfs_write_lookup(&t_fs, ZRFS_INO_DIR + 2, ".0.bin.XyZ123", &ino), -ENOENT);
	/* another dot file, removed: never stored */
	create(2, ".swp", "junk", 0);
	zrfs_write_unlink(NULL, &t_fs, ZRFS_INO_DIR + 2, ".swp");
	cr_assert_eq(t_reply.err, 0);
	cr_assert_eq(length_now(), T_N);
	cr_assert_eq(zrfs_write_lookup(&t_fs, ZRFS_INO_DIR + 2, ".swp", &ino), -ENOENT);
}

Test(write, unlink_and_rename_of_records, .init = setup, .fini = teardown)
{
	uint8_t one[64];
	int n1 = t_value(2, 1, one);

	zrfs_write_unlink(NULL, &t_fs, ZRFS_INO_DIR + 2, "0.bin");
	cr_assert_eq(t_reply.err, 0);
	expect_value(2, 0, NULL);
	cr_assert_eq(length_now(), T_N, "ids never move under a mount");
	zrfs_write_unlink(NULL, &t_fs, ZRFS_INO_DIR + 2, "0.bin");
	cr_assert_eq(t_reply.err, ENOENT);
	zrfs_write_unlink(NULL, &t_fs, ZRFS_INO_DIR + 2, "zzz");
	cr_assert_eq(t_reply.err, ENOENT);

	zrfs_write_rename(NULL, &t_fs, ZRFS_INO_DIR + 2, "1.bin", ZRFS_INO_DIR + 2, "2.bin", 0);
	cr_assert_eq(t_reply.err, 0);
	one[n1] = 0;
	expect_value(2, 2, (const char *)one);
	expect_value(2, 1, NULL);
	zrfs_write_rename(NULL, &t_fs, ZRFS_INO_DIR + 2, "2.bin", ZRFS_INO_DIR + 2, "6.bin",
			  RENAME_NOREPLACE);
	cr_assert_eq(t_reply.err, EEXIST);
	zrfs_write_rename(NULL, &t_fs, ZRFS_INO_DIR + 2, "2.bin", ZRFS_INO_DIR + 0, "2", 0);
	cr_assert_eq(t_reply.err, EXDEV, "between field directories: mv copies");
	zrfs_write_rename(NULL, &t_fs, ZRFS_INO_DIR + 2, "2.bin", ZRFS_INO_DIR + 2, "two.bin", 0);
	cr_assert_eq(t_reply.err, EPERM, "a record's file takes records' names only");
	zrfs_write_rename(NULL, &t_fs, ZRFS_INO_ROOT, "meta.json", ZRFS_INO_ROOT, "m.json", 0);
	cr_assert_eq(t_reply.err, EPERM);
}
