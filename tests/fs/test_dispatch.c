/*
 * Description: the FUSE callbacks without a mount (fs/dispatch.c), called
 * as libfuse calls them: the root is every subtree's names (fields, and
 * with -o list_views .batches and by when there are class names; these
 * are always reachable by name), a listing given any buffer
 * size resumes where it stopped and shows every entry once, the attributes
 * come from the node's owner, and wrong kinds of node get the errno a user
 * expects.
 */
#include "fs_fixture.h"


TestSuite(dispatch, .init = t_fs_setup, .fini = t_fs_teardown);

static void lookup(fuse_ino_t parent, const char *name, fuse_ino_t *ino)
{
	zrfs_ops.lookup(NULL, parent, name);
	cr_assert_eq(t_reply.kind, 'n', "%s: errno %d", name, t_reply.err);
	*ino = t_reply.entry.ino;
}

/* Every name of @dir, read with readdir (or readdirplus) in buffers of
 * @size bytes, joined by ' '. */
static void list(fuse_ino_t dir, size_t size, bool plus, char *out, size_t cap)
{
	off_t off = 0;
	size_t at = 0;

	out[0] = 0;
	for (int calls = 0; calls < 1000; calls++) {
		size_t len, used = 0;
		if (plus)
			zrfs_ops.readdirplus(NULL, dir, size, off, NULL);
		else
			zrfs_ops.readdir(NULL, dir, size, off, NULL);
		const uint8_t *b = t_bytes(&len);
		if (len == 0)
			return;
		while (used < len) {
			const struct fuse_dirent *d;
			if (plus) {
				const struct fuse_direntplus *dp = (const void *)(b + used);
				/* the attributes are those getattr gives */
				struct fuse_attr a = dp->entry_out.attr;
				d = &dp->dirent;
				used += FUSE_DIRENTPLUS_SIZE(dp);
				cr_assert_eq(a.ino, d->ino);
			} else {
				d = (const void *)(b + used);
				used += FUSE_DIRENT_SIZE(d);
			}
			at += (size_t)snprintf(out + at, cap - at, "%s%.*s", at ? " " : "",
					       (int)d->namelen, d->name);
			off = (off_t)d->off;
		}
	}
	cr_assert_fail("the listing does not end");
}

/* The root lists @names; with -o list_views also @views after them (the
 * views are reachable by name either way). Leaves list_views on. */
static void root_lists(const char *names, const char *views)
{
	char got[512], want[512];

	t_fs.opts.list_views = 0;
	list(ZRFS_INO_ROOT, 4096, false, got, sizeof got);
	cr_assert_str_eq(got, names);
	t_fs.opts.list_views = 1;
	list(ZRFS_INO_ROOT, 4096, false, got, sizeof got);
	snprintf(want, sizeof want, "%s%s", names, views);
	cr_assert_str_eq(got, want);
}

Test(dispatch, the_root_is_every_subtrees_names)
{
	char all[512], small[512];
	root_lists(". .. meta.json x x.npy x.present.npy y y.npy y.present.npy v v.present.npy",
		   " .batches");
	list(ZRFS_INO_ROOT, 4096, false, all, sizeof all);
	/* buffers that hold one or two entries: resumed, nothing twice */
	for (size_t size = 40; size <= 200; size += 40) {
		list(ZRFS_INO_ROOT, size, false, small, sizeof small);
		cr_assert_str_eq(small, all, "buffers of %zu bytes", size);
		list(ZRFS_INO_ROOT, size + 200, true, small, sizeof small);
		cr_assert_str_eq(small, all, "readdirplus, buffers of %zu bytes", size + 200);
	}
	fuse_ino_t ino;
	lookup(ZRFS_INO_ROOT, ".batches", &ino);
	cr_assert_eq(ino, ZRFS_INO_BATCHES);
	lookup(ZRFS_INO_ROOT, "y", &ino);
	cr_assert_eq(ino, ZRFS_INO_DIR + 1);
	cr_assert(S_ISDIR(t_reply.entry.attr.st_mode));
	lookup(ZRFS_INO_ROOT, "by", &ino);
	cr_assert_eq(ino, 0, "no class names: no /by (a negative entry)");
}

Test(dispatch, by_appears_with_class_names)
{
	/* a dataset whose i64 field has class names */
	char dir[400];
	zr_field_spec f[2] = {{.name = "img", .dtype = ZR_BYTES, .ext = "png"},
			      {.name = "label", .dtype = ZR_I64, .fixed = 1}};
	zr_dataset *ds;
	snprintf(dir, sizeof dir, "%s/labelled", t_dir);
	cr_assert_eq(zr_create(dir, f, 2,
			       &(zr_create_opts){.attrs = "{\"classes\": {\"label\": [\"cat\", \"dog\"]}}"}),
		     0);
	cr_assert_eq(zr_open(&ds, dir, ZR_RDWR), 0);
	for (int64_t i = 0; i < 5; i++)
		cr_assert_eq(zr_append(ds, (zr_value[]){{"png", 3}, {&(int64_t){i % 2}, 8}}, NULL), 0);
	cr_assert_eq(zr_commit(ds), 0);
	zr_close(ds);
	t_fs_close();
	t_fs_open(dir, NULL);

	char names[512];
	fuse_ino_t by, label, dog, rec;
	root_lists(". .. meta.json img img.present.npy label label.npy label.present.npy",
		   " .batches by");
	lookup(ZRFS_INO_ROOT, "by", &by);
	lookup(by, "label", &label);
	list(label, 4096, true, names, sizeof names);
	cr_assert_str_eq(names, ". .. cat dog");
	lookup(label, "dog", &dog);
	list(dog, 4096, true, names, sizeof names);
	cr_assert_str_eq(names, ". .. 1.png 3.png");
	/* a file of a class is the record file itself */
	lookup(dog, "3.png", &rec);
	fuse_ino_t direct, img;
	lookup(ZRFS_INO_ROOT, "img", &img);
	lookup(img, "3.png", &direct);
	cr_assert_eq(rec, direct);
	lookup(dog, "2.png", &rec);
	cr_assert_eq(rec, 0, "record 2 is a cat");
}

Test(dispatch, wrong_kinds_of_node)
{
	fuse_ino_t x, rec;
	lookup(ZRFS_INO_ROOT, "x", &x);
	lookup(x, "1", &rec);
	cr_assert_neq(rec, 0);
	zrfs_ops.lookup(NULL, rec, "a");
	cr_assert_eq(t_reply.err, ENOTDIR);
	zrfs_ops.readdir(NULL, rec, 4096, 0, NULL);
	cr_assert_eq(t_reply.err, ENOTDIR);
	zrfs_ops.read(NULL, ZRFS_INO_ROOT, 4096, 0, NULL);
	cr_assert_eq(t_reply.err, EISDIR);
	zrfs_ops.read(NULL, x, 4096, 0, NULL);
	cr_assert_eq(t_reply.err, EISDIR);
	zrfs_ops.getattr(NULL, UINT64_C(0x999999), NULL);
	cr_assert_eq(t_reply.err, ENOENT, "a number no subtree owns");
	zrfs_ops.lookup(NULL, UINT64_C(0x999999), "a");
	cr_assert_eq(t_reply.err, ENOENT);
	zrfs_ops.getattr(NULL, rec, NULL);
	cr_assert_eq(t_reply.kind, 'a');
	cr_assert_eq(t_reply.attr.st_size, 6);
	zrfs_ops.getattr(NULL, ZRFS_INO_ROOT, NULL);
	cr_assert_eq(t_reply.attr.st_nlink, 2 + 3);
}

/* access(2): what the mode bits let the caller do. Root reads and writes
 * anything and runs a file only where an x bit is set; another caller gets
 * the bits of the owner, of a group of its own, or of the others (the
 * last two alike here: 0644 and 0755). */
static int access_as(fuse_ino_t ino, uid_t uid, gid_t gid, int mask)
{
	t_ctx.uid = uid;
	t_ctx.gid = gid;
	zrfs_ops.access(NULL, ino, mask);
	cr_assert_eq(t_reply.kind, 'e');
	return t_reply.err;
}

Test(dispatch, access_follows_the_mode_bits)
{
	fuse_ino_t x, rec;
	uid_t me = t_fs.uid, them = t_fs.uid + 1;
	gid_t ours = t_fs.gid, theirs = t_fs.gid + 1;

	lookup(ZRFS_INO_ROOT, "x", &x);
	lookup(x, "1", &rec); /* 0644, a directory 0755 */
	cr_assert_eq(access_as(rec, 0, 0, R_OK | W_OK), 0);
	cr_assert_eq(access_as(rec, 0, 0, X_OK), EACCES, "root runs a file no x bit lets run");
	cr_assert_eq(access_as(x, 0, 0, X_OK | W_OK), 0);
	cr_assert_eq(access_as(rec, me, theirs, R_OK | W_OK), 0);
	cr_assert_eq(access_as(rec, me, theirs, X_OK), EACCES);
	cr_assert_eq(access_as(rec, them, ours, R_OK), 0);
	cr_assert_eq(access_as(rec, them, ours, W_OK), EACCES, "the group's bits are r--");
	cr_assert_eq(access_as(x, them, theirs, R_OK | X_OK), 0);
	cr_assert_eq(access_as(x, them, theirs, W_OK), EACCES, "the others' bits are r-x");
	cr_assert_eq(access_as(rec, them, theirs, F_OK), 0);
	cr_assert_eq(access_as(UINT64_C(0x999999), 0, 0, F_OK), ENOENT);
}
