/*
 * Description: a writable mount's write layer without a mount (fs/write/):
 * the writer refuses a second one and says who holds the dataset; a file
 * opened for writing copies nothing until it changes, takes writes at any
 * offset (O_APPEND at its end) and is stored when the process that wrote
 * closes it, never by the close of a duplicate before a write or of a
 * descriptor another process inherited, and at its last close what is left
 * (one emptied by its open, at its opener's close where /proc says it was
 * the last);
 * refused values change nothing; fixed shapes take exactly their size;
 * truncation of open and closed files; the mount's own commits shown
 * without reading the dataset back. Names are test_write_names.c's. No
 * committing thread runs here, and a following one only where said: every
 * request is answered at once and groups are committed by hand.
 */
#include "write_fixture.h"

#include <dlfcn.h>

TestSuite(write);

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
	/* sh: cat x > f opens f (O_TRUNC), dup2s it onto 1 and closes it (on
	 * a mount /proc shows the duplicate; here it cannot say) */
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

	/* whether the closer keeps another descriptor, /proc cannot say here */
	cr_assert_eq(flush_as(&fi, ME), 0);
	expect_unchanged(2, 6, old, len, "emptied, it is not published at that close");
	release(&fi);
	expect_value(2, 6, "");
	free(old);
}

Test(write, a_file_emptied_and_closed_unwritten_by_its_last_descriptor_is_stored_at_once,
     .init = setup, .fini = teardown)
{
	uint64_t gen = generation_now();
	struct fuse_file_info fi;

	/* the closer is this process, which /proc shows holding nothing of
	 * the mount: : > f; cat f reads it empty */
	snprintf(t_fs.writes->mountpoint, sizeof t_fs.writes->mountpoint, "/mnt/where");
	t_ctx.pid = getpid();
	fi = open_w(2, 6, O_WRONLY | O_TRUNC);
	cr_assert_eq(flush_as(&fi, ME), 0);
	expect_value(2, 6, "");
	release(&fi);
	expect_value(2, 6, "");
	cr_assert_eq(generation_now(), gen + 1, "one commit");
	t_ctx.pid = 4242;
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

/* The dataset opened again, counted: this program's definition stands in
 * for the library's (which it calls). */
static atomic_uint reopens;

int zr_reopen(zr_dataset *prev, zr_dataset **out)
{
	static int (*real)(zr_dataset *, zr_dataset **);

	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "zr_reopen");
	atomic_fetch_add(&reopens, 1);
	return real(prev, out);
}

/* The mount's own commits are shown from what the writer knows: the state
 * it committed (a snapshot) and the records it changed, with no reopen of
 * the dataset and no change log read back; the changed record gets a new
 * number and its old one, which the kernel holds, the old view. */
Test(write, own_commits_are_shown_without_reading_the_dataset_back, .init = setup,
     .fini = teardown)
{
	struct zrfs_writes *w = t_fs.writes;
	fuse_ino_t held = zrfs_rec_ino(2, 1, 0);
	struct zrfs_view *v;
	int64_t gen;

	cr_assert_eq(zrfs_follow_start(&t_fs), 0);
	cr_assert_eq(zrfs_inode_hand(&t_fs, held, &zrfs_fields), 0); /* the kernel looked it up */
	unsigned before = atomic_load(&reopens);
	pthread_mutex_lock(&w->lock);
	gen = zrfs_publish_remove(&t_fs, 2, 1, false); /* record 1's v: missing */
	pthread_mutex_unlock(&w->lock);
	cr_assert_gt(gen, 0, "%s", t_log);
	v = zrfs_view_current(&t_fs);
	cr_assert_eq(v->gen, (uint64_t)gen, "the mount shows the commit when it returns");
	cr_assert_eq(zr_present(v->ds, 2, 1), 0);
	zrfs_view_put(v);
	zrfs_names_begin(&t_fs);
	cr_assert_eq(zrfs_rec_version(&t_fs, 2, 1), 1, "the record told changed has a new number");
	cr_assert_eq(zrfs_rec_version(&t_fs, 2, 2), 0);
	zrfs_names_end(&t_fs);
	cr_assert(zrfs_inode_pinned(&t_fs, held), "its old number keeps the old view");
	/* new files, committed in a group */
	create(2, "new.bin", "fresh");
	group();
	v = zrfs_view_current(&t_fs);
	cr_assert_eq(v->gen, generation_now());
	cr_assert_eq(v->n, T_N + 1);
	zrfs_view_put(v);
	cr_assert_eq(atomic_load(&reopens), before, "own commits were read back %u times",
		     atomic_load(&reopens) - before);
	zrfs_follow_free(&t_fs);
	zrfs_inode_forget(&t_fs, held, 1);
}
