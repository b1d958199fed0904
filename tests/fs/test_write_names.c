/*
 * Description: a writable mount's names without a mount (fs/write/
 * names.c, rename.c, publish.c): new files are listed under their names,
 * stored in groups at the next id (never taking another's), named after
 * themselves; renamed or removed before their group, they never were; a
 * temporary file renamed onto a record after fsync leaves no record
 * behind; dot files wait for a rename; unlink and rename of records; a
 * rename takes the open file with it; names in log lines are escaped; new
 * files not stored are bounded; records added or renamed keep their names.
 */
#include "write_fixture.h"

TestSuite(write_names);

Test(write_names, new_files_are_listed_under_their_names_until_their_group_commits, .init = setup,
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
	t_refresh();
	t_read(&zrfs_writing, ino, 64, 0); /* its number shows the record */
	cr_assert_eq(t_reply.len, 3);
	cr_assert_arr_eq(t_reply.data, "cat", 3);
}

Test(write_names, creating_names_fills_in_appends_and_refuses, .init = setup, .fini = teardown)
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
	zrfs_write_create(NULL, &t_fs, ZRFS_INO_ROOT, "new", 0644, &fi);
	cr_assert_eq(t_reply.err, EPERM, "not a field directory");
}

Test(write_names, a_new_file_under_the_next_ids_name_never_takes_another_files_place,
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

Test(write_names, a_temporary_file_renamed_onto_a_record_replaces_it_and_adds_no_record,
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

Test(write_names, an_fsyncd_temporary_file_renamed_onto_a_record_leaves_no_record, .init = setup,
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
	cr_assert_eq(length_now(), T_N + 1, "the removal waits for its group");
	zrfs_write_fsyncdir(NULL, &t_fs);
	cr_assert_eq(t_reply.err, 0);
	cr_assert_eq(length_now(), T_N);
}

Test(write_names, renamed_or_removed_before_its_group_a_new_file_never_was, .init = setup,
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

Test(write_names, dot_files_wait_for_a_rename, .init = setup, .fini = teardown)
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

Test(write_names, unlink_and_rename_of_records, .init = setup, .fini = teardown)
{
	uint8_t one[64], two[64];
	int n1 = t_value(2, 1, one), n2 = t_value(2, 2, two);

	uint64_t gen = generation_now();
	size_t len;
	uint8_t *was;
	zrfs_write_unlink(NULL, &t_fs, ZRFS_INO_DIR + 2, "0.bin");
	cr_assert_eq(t_reply.err, 0);
	/* gone from its name at once, committed with the next group (here a
	 * sync of its directory), as a new file is */
	zrfs_write_unlink(NULL, &t_fs, ZRFS_INO_DIR + 2, "0.bin");
	cr_assert_eq(t_reply.err, ENOENT);
	cr_assert_eq(generation_now(), gen, "a removal waits for its group");
	cr_assert_not_null(was = committed(2, 0, &len));
	free(was);
	zrfs_write_fsyncdir(NULL, &t_fs);
	cr_assert_eq(t_reply.err, 0);
	cr_assert_eq(generation_now(), gen + 1);
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

Test(write_names, a_rename_takes_the_open_file_with_it, .init = setup, .fini = teardown)
{
	/* mv 1.bin 2.bin, then a write through the inode the kernel now has
	 * at 2.bin (record 1's) reaches record 2 */
	fuse_ino_t one = zrfs_rec_ino(2, 1, 0);
	cr_assert_eq(zrfs_inode_hand(&t_fs, one, &zrfs_fields), 0); /* the kernel looked it up */
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

Test(write_names, a_file_opened_twice_and_truncated_by_path_keeps_the_lists_sound, .init = setup,
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

Test(write_names, names_in_log_lines_are_escaped, .init = setup, .fini = teardown)
{
	struct fuse_file_info fi = create_open(2, "bad\nname", 0);

	write_at(&fi, "x", 0);
	zrfs_writes_close(&t_fs); /* unmounted while it is written: said */
	cr_assert_not_null(strstr(t_log, "v/bad\\x0aname: still being written at unmount"), "%s",
			   t_log);
	cr_assert_null(strstr(t_log, "bad\nname"));
	cr_assert_eq(zrfs_writes_open(&t_fs, "/mnt/where"), 0); /* for the teardown */
}

/* The number the kernel knows record file @ino by, in the view now. */
static fuse_ino_t identity_now(fuse_ino_t ino)
{
	struct zrfs_view *v = zrfs_names_begin(&t_fs);
	fuse_ino_t id = zrfs_writing.identity(&t_fs, v, ino, false);

	zrfs_names_end(&t_fs);
	return id;
}

Test(write_names, a_record_made_here_left_empty_goes_and_the_last_takes_its_id, .init = setup,
     .fini = teardown)
{
	fuse_ino_t a = create(2, "a.bin", "a"), b = create(2, "b.bin", "b");

	group();
	expect_value(2, T_N, "a");
	expect_value(2, T_N + 1, "b");
	struct zrfs_view *before = zrfs_view_ref(zrfs_names_begin(&t_fs));
	zrfs_names_end(&t_fs);
	uint64_t gen = generation_now();
	zrfs_write_unlink(NULL, &t_fs, ZRFS_INO_DIR + 2, "a.bin");
	cr_assert_eq(t_reply.err, 0);
	/* a new file's name removed waits for its group, as its own does:
	 * gone from the name at once */
	cr_assert_eq(generation_now(), gen, "a removal by a new file's name waits for its group");
	zrfs_write_unlink(NULL, &t_fs, ZRFS_INO_DIR + 2, "a.bin");
	cr_assert_eq(t_reply.err, ENOENT);
	zrfs_write_fsyncdir(NULL, &t_fs);
	cr_assert_eq(t_reply.err, 0);
	cr_assert_eq(length_now(), T_N + 1);
	expect_value(2, T_N, "b");
	cr_assert_not_null(strstr(t_log, "record 11 is now record 10"), "%s", t_log);
	cr_assert_eq(kernel_lookup(2, "b.bin"), b, "its name and number follow it");
	cr_assert_eq(identity_now(zrfs_rec_ino(2, T_N, 0)), b, "b's number went with its record");
	/* a request holding the view before the removal: id T_N is a's there,
	 * removed, and its file is not b's (a lookup of a's name read b) */
	cr_assert_neq(zrfs_writing.identity(&t_fs, before, zrfs_rec_ino(2, T_N, 0), false), b);
	zrfs_view_put(before);
	zrfs_inode_forget(&t_fs, a, 1);
	cr_assert(zrfs_inode_forget(&t_fs, b, 2)); /* its create's and that lookup's */
	cr_assert_eq(kernel_lookup(2, "b.bin"), b, "forgotten: the file's number still");
}

/* A record's own number kept by a writer (a file not made through the
 * mount, opened for writing) is the file's while the record is at the id
 * the number names, the kernel holding it or not; once the record is at
 * another id (here renamed) and the kernel holds the number no more, it
 * is the write layer's no longer: the record at that id may be another
 * file later, whose lookups give that number again (a tree/ reader read
 * another file's bytes through it). */
Test(write_names, a_kept_record_number_goes_once_forgotten_elsewhere, .init = setup,
     .fini = teardown)
{
	fuse_ino_t ino = kernel_lookup(2, "7.bin");

	cr_assert_eq(ino, zrfs_rec_ino(2, 7, 0));
	struct fuse_file_info fi = open_ino(ino, O_WRONLY);
	write_at(&fi, "new", 0);
	cr_assert_eq(close_w(&fi), 0);
	cr_assert(zrfs_writing.owns(&t_fs, ino), "kept as the file's while the kernel holds it");
	cr_assert(zrfs_inode_forget(&t_fs, ino, 1));
	cr_assert(zrfs_writing.owns(&t_fs, ino), "forgotten, at its own id: the file's still");
	cr_assert_eq(kernel_lookup(2, "7.bin"), ino);
	zrfs_write_rename(NULL, &t_fs, ZRFS_INO_DIR + 2, "7.bin", ZRFS_INO_DIR + 2, "seven.bin", 0);
	cr_assert_eq(t_reply.err, 0);
	cr_assert(zrfs_writing.owns(&t_fs, ino), "moved while the kernel holds it: the file's");
	cr_assert(zrfs_inode_forget(&t_fs, ino, 1));
	cr_assert_not(zrfs_writing.owns(&t_fs, ino), "forgotten elsewhere: id 7's number, as any");
	cr_assert_eq(identity_now(ino), 0);
}

/* More new files open at once than a group takes: none is refused (a split
 * into 3,000 shards); past DRAFTS_MAX closed and waiting for their group, a
 * create commits them first, on its own thread (here no committer runs). */
#define MANY (3 * DRAFTS_MAX)
Test(write_names, new_files_open_at_once_are_not_bounded, .init = setup, .fini = teardown,
     .timeout = 60)
{
	static struct fuse_file_info fi[MANY];
	char name[32];

	for (int i = 0; i < MANY; i++) {
		snprintf(name, sizeof name, "n%d.bin", i);
		fi[i] = create_open(2, name, 0);
		write_at(&fi[i], "x", 0);
	}
	for (int i = 0; i < MANY; i++)
		cr_assert_eq(close_w(&fi[i]), 0);
	cr_assert_eq(length_now(), T_N, "no group has run yet");
	create(2, "one-more.bin", "y");
	cr_assert_eq(length_now(), T_N + MANY, "the create committed the files waiting");
	expect_value(2, T_N + MANY - 1, "x");
	cr_assert_null(strstr(t_log, "not stored"), "%s", t_log);
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

Test(write_names, records_added_or_renamed_through_the_mount_keep_their_names, .init = setup_names,
     .fini = teardown)
{
	fuse_ino_t cat = create(0, "cat.bin", "meow");

	group();
	expect_value(0, 1, "meow");
	expect_value(1, 1, "cat.bin");
	/* a new file's record renamed: only its name changes */
	zrfs_write_rename(NULL, &t_fs, ZRFS_INO_DIR, "cat.bin", ZRFS_INO_DIR, "kitten.bin", 0);
	cr_assert_eq(t_reply.err, 0);
	expect_value(0, 1, "meow");
	expect_value(1, 1, "kitten.bin");
	cr_assert_eq(kernel_lookup(0, "kitten.bin"), cat, "the file keeps its number");
	cr_assert(zrfs_inode_forget(&t_fs, cat, 2));
	cr_assert_eq(kernel_lookup(0, "kitten.bin"), cat, "forgotten, the number is the file's");
	cr_assert(zrfs_inode_forget(&t_fs, cat, 1));
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
	zrfs_write_mkdir(NULL, &t_fs, ZRFS_INO_DIR, "sub", 0755);
	cr_assert_eq(t_reply.kind, 'n', "mkdir: kind %c errno %d", t_reply.kind, t_reply.err);
	fuse_ino_t sub = e->ino;
	struct fuse_file_info fi = {.flags = O_WRONLY | O_CREAT};
	zrfs_write_create(NULL, &t_fs, sub, "in.bin", 0644, &fi);
	cr_assert_eq(t_reply.kind, 'c');
	fi = t_opened;
	write_at(&fi, "deep", 0);
	cr_assert_eq(close_w(&fi), 0);
	group();
	expect_value(0, 3, "deep");
	expect_value(1, 3, "sub/in.bin");
	t_refresh();
	cr_assert_eq(t_lookup(&zrfs_writing, sub, "in.bin", NULL), zrfs_rec_ino(0, 3, 0));
	zrfs_write_rmdir(NULL, &t_fs, ZRFS_INO_DIR, "sub");
	cr_assert_eq(t_reply.err, 0);
}

Test(write_names, a_temporary_directory_holds_files_until_they_are_renamed_out, .init = setup,
     .fini = teardown)
{
	/* rsync --delay-updates: .~tmp~/NAME, renamed into place at the end */
	struct fuse_entry_param *e = &t_reply.entry;
	zrfs_write_mkdir(NULL, &t_fs, ZRFS_INO_DIR + 2, ".~tmp~", 0755);
	cr_assert_eq(t_reply.kind, 'n');
	fuse_ino_t tmp = e->ino;
	struct fuse_file_info fi = {.flags = O_WRONLY | O_CREAT};
	zrfs_write_create(NULL, &t_fs, tmp, "0.bin", 0644, &fi);
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
	zrfs_write_mkdir(NULL, &t_fs, ZRFS_INO_ROOT, "newfield", 0755);
	cr_assert_eq(t_reply.err, EPERM);
	zrfs_write_rmdir(NULL, &t_fs, ZRFS_INO_ROOT, "v");
	cr_assert_eq(t_reply.err, EPERM);
}

/* A new file keeps its number once its group makes it a record (tar's
 * placeholders and sqlite compare inode numbers): a lookup of its name and
 * an entry of its directory give it, not the record's file number, also
 * after the kernel forgot it; removed, the number goes with it. */
Test(write_names, a_new_file_keeps_its_number_once_committed, .init = setup, .fini = teardown)
{
	fuse_ino_t ino = create(2, "kept.bin", "kept bytes"); /* counted: the kernel holds it */
	struct zrfs_dirent d;
	uint64_t id = T_N;

	group();
	t_refresh();
	expect_value(2, id, "kept bytes");
	zrfs_rw_ops.lookup(NULL, ZRFS_INO_DIR + 2, "kept.bin");
	cr_assert_eq(t_reply.kind, 'n', "kind %c errno %d", t_reply.kind, t_reply.err);
	cr_assert_eq(t_reply.entry.ino, ino, "the name gave %llx, not the file's %llx",
		     (unsigned long long)t_reply.entry.ino, (unsigned long long)ino);
	cr_assert_eq(t_reply.entry.attr.st_ino, ino);
	cr_assert_eq(t_reply.entry.attr.st_size, 10);
	cr_assert_eq(t_reply.entry.attr_timeout, 0, "its attributes are not cached");
	zrfs_inode_forget(&t_fs, ino, 1); /* that lookup's */
	/* by the record's own name too */
	char own[64];
	zrfs_record_name_format(&t_fs, 2, id, own, sizeof own);
	zrfs_rw_ops.lookup(NULL, ZRFS_INO_DIR + 2, own);
	cr_assert_eq(t_reply.entry.ino, ino);
	zrfs_inode_forget(&t_fs, ino, 1);
	/* its directory's listing */
	bool listed = false;
	for (uint64_t pos = 2; t_entry(&zrfs_fields, ZRFS_INO_DIR + 2, pos, &d) == 1; pos = d.pos + 1)
		if (d.pos == 2 + id) {
			cr_assert_eq(identity_now(d.ino), ino);
			listed = true;
		}
	cr_assert(listed);
	/* read through it: the record's bytes */
	zrfs_rw_ops.read(NULL, ino, 64, 0, &(struct fuse_file_info){0});
	cr_assert_eq(t_reply.len, 10);
	cr_assert_arr_eq(t_reply.data, "kept bytes", 10);
	/* forgotten (sqlite's second run finds the file the first made):
	 * the file's number still, handed again */
	cr_assert(zrfs_inode_forget(&t_fs, ino, 1));
	cr_assert_eq(identity_now(zrfs_rec_ino(2, id, 0)), ino);
	cr_assert_eq(kernel_lookup(2, "kept.bin"), ino);
	cr_assert(zrfs_inode_held(&t_fs, ino));
	/* removed: nothing keeps the number once the kernel forgets it */
	zrfs_write_unlink(NULL, &t_fs, ZRFS_INO_DIR + 2, "kept.bin");
	cr_assert_eq(t_reply.err, 0);
	zrfs_write_fsyncdir(NULL, &t_fs); /* the removal's group */
	cr_assert_eq(t_reply.err, 0);
	cr_assert(zrfs_inode_forget(&t_fs, ino, 1));
	pthread_mutex_lock(&t_fs.writes->names_lock);
	bool kept = zrfs_winode_find(t_fs.writes, ino) != NULL;
	pthread_mutex_unlock(&t_fs.writes->names_lock);
	cr_assert(!kept, "the number of a file removed and forgotten is kept");
}
