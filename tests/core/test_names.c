/*
 * Description: records' original names and the tree they make
 * (core/names.c): what the attrs say, which file each field of a named
 * record is (paths and WebDataset keys), the way back from a file's path,
 * unsafe names refused, classes as text, names loaded, the extension a
 * name gives its file by id.
 */
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

TestSuite(names, .init = t_setup, .fini = t_cleanup);

/* A dataset of fields image (bytes), label (i64), name (bytes) with @attrs,
 * and the names in record 0.. of field name. */
static zr_dataset *make(const char *attrs, const char *const *names, size_t n)
{
	zr_field_spec f[] = {{.name = "jpg", .dtype = ZR_BYTES, .ext = "jpg"},
			     {.name = "cls", .dtype = ZR_I64, .fixed = 1},
			     {.name = "name", .dtype = ZR_BYTES, .ext = "txt"}};
	zr_create_opts o = {.attrs = attrs};
	zr_dataset *ds;

	cr_assert_eq(zr_create(t_ds, f, 3, &o), 0, "%s", zr_errmsg(NULL));
	cr_assert_eq(zr_open(&ds, t_ds, ZR_RDWR), 0, "%s", zr_errmsg(NULL));
	for (size_t i = 0; i < n; i++) {
		int64_t cls = (int64_t)i - 1;
		zr_value row[3] = {{"x", 1}, {&cls, 8}, {names[i], names[i] ? strlen(names[i]) : 0}};
		cr_assert_eq(zr_append(ds, row, NULL), 0, "%s", zr_errmsg(ds));
	}
	cr_assert_eq(zr_commit(ds), 0);
	return ds;
}

Test(names, none_kept_without_attrs_or_with_a_field_that_cannot_hold_them)
{
	zr_dataset *ds = make(NULL, NULL, 0);
	zr_names n;

	cr_assert_eq(zr_names_get(ds, &n), 0);
	cr_assert_eq(n.field, -1);
	zr_close(ds);
	t_rmrf(t_ds);
	/* a fixed-shape field holds no names */
	ds = make("{\"names\": {\"field\": \"cls\", \"kind\": \"path\"}}", NULL, 0);
	cr_assert_eq(zr_names_get(ds, &n), 0);
	cr_assert_eq(n.field, -1);
	zr_close(ds);
}

Test(names, paths_make_one_file_of_the_files_field)
{
	static const char *const names[] = {"cats/1.jpg", NULL, "a/b/c d.jpg"};
	zr_dataset *ds = make("{\"names\": {\"field\": \"name\", \"kind\": \"path\", \"files\": "
			      "\"jpg\"}, \"classes\": {\"cls\": [\"a\"]}}",
			      names, 3);
	char buf[64];
	zr_names n;
	unsigned f;
	size_t len;

	cr_assert_eq(zr_names_get(ds, &n), 0);
	cr_assert_eq(n.field, 2);
	cr_assert_eq(n.files, 0);
	cr_assert_eq(n.key, 0);
	cr_assert_eq(zr_names_file(ds, &n, 0, "cats/1.jpg", 10, buf, sizeof buf), 10);
	cr_assert_str_eq(buf, "cats/1.jpg");
	cr_assert_eq(zr_names_file(ds, &n, 1, "cats/1.jpg", 10, buf, sizeof buf), 0);
	cr_assert_eq(zr_names_file(ds, &n, 2, "cats/1.jpg", 10, buf, sizeof buf), 0);
	cr_assert_eq(zr_names_file(ds, &n, 0, "cats/1.jpg", 10, buf, 10), -ENAMETOOLONG);
	cr_assert_eq(zr_names_field_of(ds, &n, "a/b/c d.jpg", 11, &f, &len), 0);
	cr_assert_eq(f, 0);
	cr_assert_eq(len, 11);
	cr_assert_eq(zr_names_text(ds, &n, 1), 0);
	/* names loaded: present, missing, too long for the buffer */
	cr_assert_eq(zr_name_load(ds, &n, 0, buf, sizeof buf), 10);
	cr_assert_str_eq(buf, "cats/1.jpg");
	cr_assert_eq(zr_name_load(ds, &n, 1, buf, sizeof buf), 0);
	cr_assert_eq(zr_name_load(ds, &n, 2, buf, 5), -ENAMETOOLONG);
	cr_assert_eq(zr_name_load(ds, &n, 3, buf, sizeof buf), -ENOENT);
	zr_close(ds);
}

/* zr_names_ext on @name: @want the extension, or NULL where the name does
 * not decide it (-1). */
static void ext_is(const zr_names *n, unsigned field, const char *name, const char *want)
{
	const char *ext = NULL;
	int len = zr_names_ext(n, field, name, strlen(name), &ext);

	if (!want) {
		cr_assert_eq(len, -1, "'%s': %d", name, len);
		return;
	}
	cr_assert_eq(len, (int)strlen(want), "'%s': %d", name, len);
	cr_assert(memcmp(ext, want, (size_t)len) == 0, "'%s': '%.*s'", name, len, ext);
}

Test(names, a_path_gives_its_files_field_its_own_extension)
{
	zr_names paths = {.field = 2, .files = 0, .key = 0, .mtime = -1, .mode = -1,
			  .atime = -1, .ctime = -1};
	zr_names keys = {.field = 2, .files = -1, .key = 1, .mtime = -1, .mode = -1,
			  .atime = -1, .ctime = -1};
	zr_names none = {.field = -1, .files = -1, .key = 0, .mtime = -1, .mode = -1,
			  .atime = -1, .ctime = -1};

	ext_is(&paths, 0, "cats/4.png", "png");
	ext_is(&paths, 0, "4.tar.gz", "gz");
	ext_is(&paths, 0, "zone/Europe/Paris", "");   /* none: served as "ID" */
	ext_is(&paths, 0, "a.b/Makefile", "");        /* a dot of a directory is not its */
	ext_is(&paths, 0, "cats/.hidden", "");        /* a leading dot is no extension */
	ext_is(&paths, 0, "x.", NULL);                /* empty: the field's */
	ext_is(&paths, 0, "x.j peg", NULL);           /* not portable: the field's */
	ext_is(&paths, 0, "x.abcdefghijklmnopq", NULL); /* over ZR_EXT_MAX */
	ext_is(&paths, 0, "x.abcdefghijklmnop", "abcdefghijklmnop");
	ext_is(&paths, 1, "cats/4.png", NULL);        /* not the files' field */
	ext_is(&keys, 0, "s0", NULL);                 /* keys: each field's own */
	ext_is(&none, 0, "cats/4.png", NULL);
	ext_is(&paths, 0, "", NULL);
}

Test(names, paths_without_files_in_attrs_take_the_first_field_that_is_no_label)
{
	zr_field_spec f[] = {{.name = "label", .dtype = ZR_I64, .fixed = 1},
			     {.name = "image", .dtype = ZR_BYTES},
			     {.name = "name", .dtype = ZR_BYTES}};
	zr_create_opts o = {.attrs = "{\"names\": {\"field\": \"name\", \"kind\": \"path\"}, "
				     "\"classes\": {\"label\": [\"a\", \"b\"]}}"};
	zr_dataset *ds;
	zr_names n;

	cr_assert_eq(zr_create(t_ds, f, 3, &o), 0);
	cr_assert_eq(zr_open(&ds, t_ds, ZR_RDONLY), 0);
	cr_assert_eq(zr_names_get(ds, &n), 0);
	cr_assert_eq(n.files, 1);
	zr_close(ds);
}

Test(names, keys_make_a_file_per_field_and_classes_are_text)
{
	zr_dataset *ds = make("{\"names\": {\"field\": \"name\", \"kind\": \"key\"}}", NULL, 0);
	char buf[300], text[24];
	zr_names n;
	unsigned f;
	size_t len;

	cr_assert_eq(zr_names_get(ds, &n), 0);
	cr_assert_eq(n.key, 1);
	cr_assert_eq(n.files, -1);
	cr_assert_eq(zr_names_file(ds, &n, 0, "train/s0", 8, buf, sizeof buf), 12);
	cr_assert_str_eq(buf, "train/s0.jpg");
	cr_assert_eq(zr_names_file(ds, &n, 1, "train/s0", 8, buf, sizeof buf), 12);
	cr_assert_str_eq(buf, "train/s0.cls");
	cr_assert_eq(zr_names_file(ds, &n, 2, "train/s0", 8, buf, sizeof buf), 0);
	/* a dot in a key's last part would split elsewhere on the way back */
	cr_assert_eq(zr_names_file(ds, &n, 0, "a.b/s.0", 7, buf, sizeof buf), -EINVAL);
	cr_assert_eq(zr_names_field_of(ds, &n, "a.b/s0.cls", 10, &f, &len), 0);
	cr_assert_eq(f, 1);
	cr_assert_eq(len, 6);
	cr_assert_eq(zr_names_field_of(ds, &n, "s0.name", 7, &f, &len), -ENOENT);
	cr_assert_eq(zr_names_field_of(ds, &n, "s0.png", 6, &f, &len), -ENOENT);
	cr_assert_eq(zr_names_field_of(ds, &n, "s0", 2, &f, &len), -ENOENT);
	cr_assert_eq(zr_names_field_of(ds, &n, ".jpg", 4, &f, &len), -ENOENT);
	cr_assert_eq(zr_names_text(ds, &n, 1), 1);
	cr_assert_eq(zr_names_text(ds, &n, 0), 0);
	int64_t v = -42;
	cr_assert_eq(zr_names_text_of(&v, 8, text, sizeof text), 3);
	cr_assert_str_eq(text, "-42");
	cr_assert_eq(zr_names_text_of(&v, 4, text, sizeof text), -EINVAL);
	zr_close(ds);
}

Test(names, unsafe_names_make_no_file)
{
	static const char *const bad[] = {"", "/etc/passwd", "../x", "a/../b", "a//b", "a/./b",
					  "a/", "./a"};
	zr_dataset *ds = make("{\"names\": {\"field\": \"name\", \"kind\": \"path\"}}", NULL, 0);
	char buf[600], big[300];
	zr_names n;
	unsigned f;
	size_t len;

	cr_assert_eq(zr_names_get(ds, &n), 0);
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		cr_assert_eq(zr_name_safe(bad[i], strlen(bad[i])), 0, "%s", bad[i]);
		cr_assert_eq(zr_names_file(ds, &n, 0, bad[i], strlen(bad[i]), buf, sizeof buf),
			     -EINVAL, "%s", bad[i]);
		cr_assert_eq(zr_names_field_of(ds, &n, bad[i], strlen(bad[i]), &f, &len), -ENOENT);
	}
	cr_assert_eq(zr_name_safe("a\0b", 3), 0);
	cr_assert_eq(zr_name_safe(".hidden/..x/y..", 15), 1);
	memset(big, 'x', sizeof big);
	cr_assert_eq(zr_name_safe(big, ZR_NAME_FILE_MAX), 1);
	cr_assert_eq(zr_name_safe(big, ZR_NAME_FILE_MAX + 1), 0);
	zr_close(ds);
}

Test(names, times_and_modes_kept_per_record_make_no_file)
{
	zr_field_spec f[] = {{.name = "data", .dtype = ZR_BYTES},
			     {.name = "name", .dtype = ZR_BYTES},
			     {.name = "mtime", .dtype = ZR_I64, .fixed = 1},
			     {.name = "mode", .dtype = ZR_U32, .fixed = 1}};
	zr_create_opts o = {.attrs = "{\"names\": {\"field\": \"name\", \"kind\": \"path\", "
				     "\"files\": \"data\", \"mtime\": \"mtime\", \"mode\": \"mode\"}}"};
	int64_t ns = 1234567890123456789LL, got_ns;
	uint32_t mode = 0100755, none = ZR_MODE_NONE, other = 0100600, got;
	zr_dataset *ds;
	zr_names n;
	char buf[64];

	cr_assert_eq(zr_create(t_ds, f, 4, &o), 0, "%s", zr_errmsg(NULL));
	cr_assert_eq(zr_open(&ds, t_ds, ZR_RDWR), 0, "%s", zr_errmsg(NULL));
	zr_value rows[3][4] = {{{"x", 1}, {"a.sh", 4}, {&ns, 8}, {&mode, 4}},
			       {{"y", 1}, {"b", 1}, {NULL, 0}, {&none, 4}},
			       {{"z", 1}, {"c", 1}, {NULL, 0}, {&other, 4}}};
	for (int i = 0; i < 3; i++)
		cr_assert_eq(zr_append(ds, rows[i], NULL), 0, "%s", zr_errmsg(ds));
	cr_assert_eq(zr_commit(ds), 0);
	cr_assert_eq(zr_names_get(ds, &n), 0);
	cr_assert_eq(n.field, 1);
	cr_assert_eq(n.files, 0);
	cr_assert_eq(n.mtime, 2);
	cr_assert_eq(n.mode, 3);
	for (unsigned i = 1; i < 4; i++) {
		cr_assert(zr_names_own(&n, i), "field %u", i);
		cr_assert_eq(zr_names_file(ds, &n, i, "a.sh", 4, buf, sizeof buf), 0);
	}
	cr_assert_not(zr_names_own(&n, 0));
	cr_assert_eq(zr_name_mode(ds, &n, 0, 0, &got), 1);
	cr_assert_eq(got, 0100755);
	cr_assert_eq(zr_name_mtime(ds, &n, 0, 0, &got_ns), 1);
	cr_assert_eq(got_ns, ns);
	/* none kept for record 1 (ZR_MODE_NONE, a missing time); record 2 has
	 * a mode and no time; record 3 is not there */
	cr_assert_eq(zr_name_mode(ds, &n, 1, 0, &got), 0);
	cr_assert_eq(zr_name_mtime(ds, &n, 1, 0, &got_ns), 0);
	cr_assert_eq(zr_name_mode(ds, &n, 2, 0, &got), 1);
	cr_assert_eq(got, 0100600);
	cr_assert_eq(zr_name_mtime(ds, &n, 2, 0, &got_ns), 0);
	cr_assert_eq(zr_name_mode(ds, &n, 3, 0, &got), -ENOENT);
	zr_close(ds);
}

/* Owners and groups: a u32 each, one a record or one a field, either
 * alone; ZR_OWNER_NONE where a file has none. */
Test(names, owners_kept_per_field_make_no_file)
{
	zr_field_spec f[] = {{.name = "jpg", .dtype = ZR_BYTES},
			     {.name = "name", .dtype = ZR_BYTES},
			     {.name = "uid", .dtype = ZR_U32, .fixed = 1, .ndim = 1, .shape = {4}},
			     {.name = "gid", .dtype = ZR_U32, .fixed = 1}};
	zr_create_opts o = {.attrs = "{\"names\": {\"field\": \"name\", \"kind\": \"key\", "
				     "\"uid\": \"uid\", \"gid\": \"gid\"}}"};
	uint32_t uids[4] = {1000, ZR_OWNER_NONE, 0, 0}, gid = 50, uid, got_gid;
	zr_dataset *ds;
	zr_names n;

	cr_assert_eq(zr_create(t_ds, f, 4, &o), 0, "%s", zr_errmsg(NULL));
	cr_assert_eq(zr_open(&ds, t_ds, ZR_RDWR), 0, "%s", zr_errmsg(NULL));
	zr_value rows[2][4] = {{{"x", 1}, {"s0", 2}, {uids, 16}, {&gid, 4}},
			       {{"y", 1}, {"s1", 2}, {NULL, 0}, {NULL, 0}}};
	for (int i = 0; i < 2; i++)
		cr_assert_eq(zr_append(ds, rows[i], NULL), 0, "%s", zr_errmsg(ds));
	cr_assert_eq(zr_commit(ds), 0);
	cr_assert_eq(zr_names_get(ds, &n), 0);
	cr_assert_eq(n.uid, 2);
	cr_assert_eq(n.gid, 3);
	cr_assert(zr_names_own(&n, 2) && zr_names_own(&n, 3));
	cr_assert_eq(zr_name_owner(ds, &n, 0, 0, &uid, &got_gid), 1);
	cr_assert_eq(uid, 1000);
	cr_assert_eq(got_gid, 50);
	cr_assert_eq(zr_name_owner(ds, &n, 0, 1, &uid, &got_gid), 1, "the group alone");
	cr_assert_eq(uid, ZR_OWNER_NONE);
	cr_assert_eq(got_gid, 50);
	cr_assert_eq(zr_name_owner(ds, &n, 1, 0, &uid, &got_gid), 0, "none kept");
	cr_assert_eq(zr_name_owner(ds, &n, 2, 0, &uid, &got_gid), -ENOENT);
	zr_close(ds);
	/* without names, or as another type: none */
	o.attrs = "{\"names\": {\"field\": \"name\", \"kind\": \"key\", \"uid\": \"jpg\"}}";
	char other[sizeof t_ds + 4];
	snprintf(other, sizeof other, "%s.b", t_ds);
	cr_assert_eq(zr_create(other, f, 4, &o), 0, "%s", zr_errmsg(NULL));
	cr_assert_eq(zr_open(&ds, other, 0), 0);
	cr_assert_eq(zr_names_get(ds, &n), 0);
	cr_assert_eq(n.uid, -1);
	cr_assert_eq(n.gid, -1);
	zr_close(ds);
}

Test(names, access_and_change_times_kept_beside_the_modification_times)
{
	zr_field_spec f[] = {{.name = "data", .dtype = ZR_BYTES},
			     {.name = "name", .dtype = ZR_BYTES},
			     {.name = "mtime", .dtype = ZR_I64, .fixed = 1},
			     {.name = "atime", .dtype = ZR_I64, .fixed = 1},
			     {.name = "ctime", .dtype = ZR_I64, .fixed = 1}};
	zr_create_opts o = {.attrs = "{\"names\": {\"field\": \"name\", \"kind\": \"path\", "
				     "\"mtime\": \"mtime\", \"atime\": \"atime\", "
				     "\"ctime\": \"ctime\"}}"};
	int64_t m = 1950000000000000000LL, a = 1900000000000000000LL, c = 1960000000000000001LL;
	int64_t none = ZR_MTIME_NONE, got;
	zr_dataset *ds;
	zr_names n;

	cr_assert_eq(zr_create(t_ds, f, 5, &o), 0, "%s", zr_errmsg(NULL));
	cr_assert_eq(zr_open(&ds, t_ds, ZR_RDWR), 0, "%s", zr_errmsg(NULL));
	zr_value rows[2][5] = {{{"x", 1}, {"a", 1}, {&m, 8}, {&a, 8}, {&c, 8}},
			       {{"y", 1}, {"b", 1}, {&m, 8}, {&none, 8}, {NULL, 0}}};
	for (int i = 0; i < 2; i++)
		cr_assert_eq(zr_append(ds, rows[i], NULL), 0, "%s", zr_errmsg(ds));
	cr_assert_eq(zr_commit(ds), 0);
	cr_assert_eq(zr_names_get(ds, &n), 0);
	cr_assert_eq(n.atime, 3);
	cr_assert_eq(n.ctime, 4);
	for (unsigned i = 1; i < 5; i++)
		cr_assert(zr_names_own(&n, i), "field %u", i);
	cr_assert_eq(zr_name_atime(ds, &n, 0, 0, &got), 1);
	cr_assert_eq(got, a);
	cr_assert_eq(zr_name_ctime(ds, &n, 0, 0, &got), 1);
	cr_assert_eq(got, c);
	cr_assert_eq(zr_name_mtime(ds, &n, 0, 0, &got), 1);
	cr_assert_eq(got, m);
	/* none kept for record 1: INT64_MIN, a missing value */
	cr_assert_eq(zr_name_atime(ds, &n, 1, 0, &got), 0);
	cr_assert_eq(zr_name_ctime(ds, &n, 1, 0, &got), 0);
	cr_assert_eq(zr_name_ctime(ds, &n, 2, 0, &got), -ENOENT);
	zr_close(ds);
}

/* zr_name_meta() of every file of every record: what each zr_name_*() finds
 * alone, for values stored together, moved apart by a change, missing, or
 * damaged (where the reader checks). */
static void meta_as_each(zr_dataset *ds, const zr_names *n, uint64_t records)
{
	for (uint64_t id = 0; id <= records; id++)
		for (unsigned f = 0; f < 2; f++) {
			zr_file_meta m;
			uint32_t mode, uid, gid;
			int64_t mt, at, ct;
			int rc = zr_name_meta(ds, n, id, f, &m);
			int rm = zr_name_mode(ds, n, id, f, &mode);
			int ro = zr_name_owner(ds, n, id, f, &uid, &gid);
			int rt = zr_name_mtime(ds, n, id, f, &mt);
			int ra = zr_name_atime(ds, n, id, f, &at);
			int rcx = zr_name_ctime(ds, n, id, f, &ct);
			int first = rm < 0 ? rm : ro < 0 ? ro : rt < 0 ? rt : ra < 0 ? ra : rcx;
			cr_assert_eq(rc < 0, first < 0, "record %lu file %u: %d, %d", (unsigned long)id,
				     f, rc, first);
			cr_assert_eq(!!(m.have & ZR_META_MODE), rm == 1, "record %lu", (unsigned long)id);
			cr_assert(!(m.have & ZR_META_MODE) || m.mode == mode);
			cr_assert_eq(!!(m.have & ZR_META_OWNER), ro == 1);
			cr_assert(!(m.have & ZR_META_OWNER) || (m.uid == uid && m.gid == gid));
			cr_assert_eq(!!(m.have & ZR_META_MTIME), rt == 1);
			cr_assert(!(m.have & ZR_META_MTIME) || m.mtime == mt);
			cr_assert_eq(!!(m.have & ZR_META_ATIME), ra == 1);
			cr_assert(!(m.have & ZR_META_ATIME) || m.atime == at);
			cr_assert_eq(!!(m.have & ZR_META_CTIME), rcx == 1);
			cr_assert(!(m.have & ZR_META_CTIME) || m.ctime == ct);
		}
}

Test(names, a_files_meta_at_once_is_what_each_finds_alone)
{
	zr_field_spec f[] = {{.name = "data", .dtype = ZR_BYTES},
			     {.name = "name", .dtype = ZR_BYTES},
			     {.name = "mode", .dtype = ZR_U32, .fixed = 1},
			     {.name = "uid", .dtype = ZR_U32, .fixed = 1, .ndim = 1, .shape = {8}},
			     {.name = "gid", .dtype = ZR_U32, .fixed = 1},
			     {.name = "mtime", .dtype = ZR_I64, .fixed = 1},
			     {.name = "atime", .dtype = ZR_I64, .fixed = 1},
			     {.name = "ctime", .dtype = ZR_I64, .fixed = 1}};
	zr_create_opts o = {.attrs = "{\"names\": {\"field\": \"name\", \"kind\": \"path\", "
				     "\"files\": \"data\", \"mode\": \"mode\", \"uid\": \"uid\", "
				     "\"gid\": \"gid\", \"mtime\": \"mtime\", \"atime\": \"atime\", "
				     "\"ctime\": \"ctime\"}}"};
	uint32_t mode = 0100640, none = ZR_MODE_NONE, gid = 100;
	uint32_t uids[8] = {1000, 1001, 0, 0, 0, 0, 0, 0};
	int64_t m = 1950000000000000000LL, a = 1900000000000000000LL, c = 1960000000000000001LL;
	int64_t tnone = ZR_MTIME_NONE;
	static char big[8192];
	zr_dataset *ds;
	zr_names n;

	cr_assert_eq(zr_create(t_ds, f, 8, &o), 0, "%s", zr_errmsg(NULL));
	cr_assert_eq(zr_open(&ds, t_ds, ZR_RDWR), 0, "%s", zr_errmsg(NULL));
	zr_value rows[4][8] = {
		{{"x", 1}, {"a", 1}, {&mode, 4}, {uids, 32}, {&gid, 4}, {&m, 8}, {&a, 8}, {&c, 8}},
		{{big, sizeof big}, {"b", 1}, {&none, 4}, {NULL, 0}, {&gid, 4}, {&tnone, 8},
		 {NULL, 0}, {&c, 8}},
		{{"z", 1}, {"c", 1}, {NULL, 0}, {NULL, 0}, {NULL, 0}, {NULL, 0}, {NULL, 0},
		 {NULL, 0}},
		{{"w", 1}, {"d", 1}, {&mode, 4}, {uids, 32}, {NULL, 0}, {&m, 8}, {&m, 8}, {&m, 8}}};
	for (int i = 0; i < 4; i++)
		cr_assert_eq(zr_append(ds, rows[i], NULL), 0, "%s", zr_errmsg(ds));
	cr_assert_eq(zr_commit(ds), 0);
	cr_assert_eq(zr_names_get(ds, &n), 0);
	meta_as_each(ds, &n, 4);
	/* record 0's ctime changed: stored after 8 KiB of data, apart */
	zr_value filler[8] = {{big, sizeof big}, {"e", 1}};
	cr_assert_eq(zr_append(ds, filler, NULL), 0, "%s", zr_errmsg(ds));
	cr_assert_eq(zr_modify(ds, 7, 0, (zr_value){&a, 8}), 0, "%s", zr_errmsg(ds));
	cr_assert_eq(zr_commit(ds), 0);
	meta_as_each(ds, &n, 5);
	zr_close(ds);
	/* record 3's mode damaged: a reader that checks is told, and gets the rest */
	cr_assert_eq(zr_open(&ds, t_ds, ZR_RDONLY | ZR_CHECK), 0, "%s", zr_errmsg(NULL));
	zr_record_stat st;
	cr_assert_eq(zr_stat(ds, 2, 3, &st), 0);
	char chunk[PATH_MAX];
	snprintf(chunk, sizeof chunk, "%s/chunk/%u.zr", t_ds, st.chunk_id);
	int fd = open(chunk, O_RDWR);
	uint32_t bad = 0100777;
	cr_assert_eq(pwrite(fd, &bad, 4, (off_t)st.offset), 4);
	close(fd);
	zr_file_meta fm;
	cr_assert_eq(zr_name_meta(ds, &n, 3, 0, &fm), ZR_ECORRUPT);
	cr_assert_eq(fm.have, ZR_META_OWNER | ZR_META_MTIME | ZR_META_ATIME | ZR_META_CTIME, "%u",
		     fm.have);
	meta_as_each(ds, &n, 5);
	zr_close(ds);
}

Test(names, access_times_without_modification_times_or_as_them_are_none)
{
	zr_field_spec f[] = {{.name = "data", .dtype = ZR_BYTES},
			     {.name = "name", .dtype = ZR_BYTES},
			     {.name = "mtime", .dtype = ZR_I64, .fixed = 1},
			     {.name = "atime", .dtype = ZR_U32, .fixed = 1}};
	zr_create_opts o = {.attrs = "{\"names\": {\"field\": \"name\", \"kind\": \"path\", "
				     "\"atime\": \"mtime\", \"ctime\": \"atime\"}}"};
	zr_dataset *ds;
	zr_names n;

	cr_assert_eq(zr_create(t_ds, f, 4, &o), 0, "%s", zr_errmsg(NULL));
	cr_assert_eq(zr_open(&ds, t_ds, ZR_RDWR), 0, "%s", zr_errmsg(NULL));
	cr_assert_eq(zr_names_get(ds, &n), 0);
	cr_assert_eq(n.mtime, -1);
	cr_assert_eq(n.atime, -1);
	cr_assert_eq(n.ctime, -1);
	cr_assert_not(zr_names_own(&n, 2));
	zr_close(ds);
}

Test(names, a_mode_field_of_another_type_or_the_times_is_no_mode)
{
	zr_field_spec f[] = {{.name = "data", .dtype = ZR_BYTES},
			     {.name = "name", .dtype = ZR_BYTES},
			     {.name = "mtime", .dtype = ZR_I64, .fixed = 1}};
	zr_create_opts o = {.attrs = "{\"names\": {\"field\": \"name\", \"kind\": \"path\", "
				     "\"mtime\": \"mtime\", \"mode\": \"mtime\"}}"};
	zr_dataset *ds;
	zr_names n;
	uint32_t got;

	cr_assert_eq(zr_create(t_ds, f, 3, &o), 0, "%s", zr_errmsg(NULL));
	cr_assert_eq(zr_open(&ds, t_ds, ZR_RDWR), 0, "%s", zr_errmsg(NULL));
	cr_assert_eq(zr_names_get(ds, &n), 0);
	cr_assert_eq(n.mtime, 2);
	cr_assert_eq(n.mode, -1);
	cr_assert_eq(zr_name_mode(ds, &n, 0, 0, &got), 0);
	zr_close(ds);
}
