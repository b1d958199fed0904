/*
 * Description: the tree's directories, symbolic links, FIFOs, sockets,
 * devices and hard links (core/tree.c):
 * set in any order and read back sorted after a commit and a reopen, kept
 * by commits that do not set them and by a rebalance, bad entries refused
 * with the entry named, a damaged tree file or reference refused at open,
 * nothing written by a read-only handle; a file only by a commit that
 * changed them, the one before removed, a stray one swept by a writer.
 */
#include "helpers.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

TestSuite(tree, .init = t_setup, .fini = t_cleanup);

static const zr_tree_entry given[] = {
	{.path = "b/link", .target = "../a/x.txt", .mode = S_IFLNK | 0777,
	 .mtime = 1700000000123456789, .atime = ZR_MTIME_NONE, .ctime = 1700000009000000001},
	{.path = "a", .mode = S_IFDIR | 0750, .mtime = -5, .atime = 42, .owned = 1, .uid = 1234,
	 .gid = 4000000000u},
	{.path = "a/empty", .mode = S_IFDIR | 0700, .mtime = 7, .atime = ZR_MTIME_NONE,
	 .ctime = -3},
	{.path = ".", .mode = S_IFDIR | 0711, .mtime = 8, .atime = ZR_MTIME_NONE},
	{.path = "b/sock", .mode = S_IFSOCK | 0755, .mtime = 9, .atime = 10, .owned = 1,
	 .uid = 5, .gid = 6},
	{.path = "a/fifo", .mode = S_IFIFO | 04640, .mtime = 11, .atime = ZR_MTIME_NONE},
	{.path = "dev/null", .mode = S_IFCHR | 0666, .mtime = 12, .atime = ZR_MTIME_NONE,
	 .rdev = 0x103},
	{.path = "dev/big", .mode = S_IFBLK | 0660, .mtime = 13, .atime = 14,
	 .rdev = ((uint64_t)4095 << 32) | 0xfff000ffu}, /* past 32 bits */
	{.path = "dev/zero", .mode = S_IFCHR | 0600, .mtime = 15, .atime = ZR_MTIME_NONE},
	{.path = "b/hard", .target = "a/x.txt", .mode = S_IFREG, .mtime = 16,
	 .atime = ZR_MTIME_NONE},
};
#define NGIVEN (sizeof given / sizeof *given)

static void expect_given(zr_dataset *ds)
{
	static const unsigned order[] = {3, 1, 2, 5, 9, 0, 4, 7, 6, 8}; /* sorted by path */
	zr_tree_entry *got;
	size_t n;

	cr_assert_eq(zr_tree_get(ds, &got, &n), 0);
	cr_assert_eq(n, NGIVEN);
	for (size_t i = 0; i < n; i++) {
		const zr_tree_entry *w = &given[order[i]];
		cr_expect_str_eq(got[i].path, w->path);
		cr_expect_eq(got[i].mode, w->mode);
		cr_expect_eq(got[i].mtime, w->mtime);
		cr_expect_eq(got[i].atime, w->atime, "%s: atime %lld", w->path,
			     (long long)got[i].atime);
		cr_expect_eq(got[i].owned, w->owned, "%s", w->path);
		cr_expect_eq(got[i].uid, w->uid, "%s", w->path);
		cr_expect_eq(got[i].gid, w->gid, "%s", w->path);
		cr_expect_eq(got[i].ctime, w->ctime, "%s: ctime %lld", w->path,
			     (long long)got[i].ctime);
		cr_expect_eq(got[i].rdev, w->rdev, "%s: rdev %#llx", w->path,
			     (unsigned long long)got[i].rdev);
		if (w->target)
			cr_expect_str_eq(got[i].target, w->target);
		else
			cr_expect_null(got[i].target);
	}
	free(got);
}

Test(tree, set_in_any_order_read_back_sorted_after_reopen)
{
	zr_dataset *ds;
	zr_tree_entry *got;
	size_t n;

	t_create1(t_ds, ZR_RAW, 4);
	ds = t_open(t_ds, ZR_RDWR);
	cr_assert_eq(zr_tree_get(ds, &got, &n), 0);
	cr_assert_eq(n, 0);
	cr_assert_null(got);
	cr_assert_eq(zr_tree_set(ds, given, NGIVEN), 0, "%s", zr_errmsg(ds));
	cr_assert_eq(zr_commit(ds), 0, "%s", zr_errmsg(ds));
	zr_close(ds);
	ds = t_open(t_ds, 0);
	expect_given(ds);
	zr_close(ds);
	/* a commit that sets none keeps them; setting none removes them */
	ds = t_open(t_ds, ZR_RDWR);
	t_append_range(ds, 1, 0, 3, 64);
	cr_assert_eq(zr_commit(ds), 0);
	zr_close(ds);
	ds = t_open(t_ds, ZR_RDWR);
	expect_given(ds);
	/* a rebalance writes a new state: they go with it */
	zr_rebalance_report r;
	cr_assert_eq(zr_rebalance(ds, 2, &r), 0, "%s", zr_errmsg(ds));
	zr_close(ds);
	ds = t_open(t_ds, ZR_RDWR);
	expect_given(ds);
	cr_assert_eq(zr_tree_set(ds, NULL, 0), 0);
	cr_assert_eq(zr_commit(ds), 0);
	zr_close(ds);
	ds = t_open(t_ds, 0);
	cr_assert_eq(zr_tree_get(ds, &got, &n), 0);
	cr_assert_eq(n, 0);
	zr_close(ds);
}

Test(tree, bad_entries_are_refused_naming_them)
{
	static const struct {
		zr_tree_entry e;
		int rc;
		const char *says;
	} bad[] = {
		{{.path = "../up", .mode = S_IFDIR | 0755}, -EINVAL, "'../up'"},
		{{.path = "/abs", .mode = S_IFDIR | 0755}, -EINVAL, "'/abs'"},
		{{.path = "a//b", .mode = S_IFDIR | 0755}, -EINVAL, "relative path"},
		{{.path = "f", .mode = S_IFMT | 0644}, -EINVAL, "not a directory's"},
		{{.path = "c", .mode = S_IFREG}, -EINVAL, "a hard link without a target"},
		{{.path = "h", .mode = S_IFREG | 0600, .target = "a"}, -EINVAL, "permission bits"},
		{{.path = "h", .mode = S_IFREG, .target = "../a"}, -EINVAL, "not another relative"},
		{{.path = "h", .mode = S_IFREG, .target = "h"}, -EINVAL, "not another relative"},
		{{.path = "h", .mode = S_IFREG, .target = "a/"}, -EINVAL, "not another relative"},
		{{.path = "p", .mode = S_IFIFO | 0600, .rdev = 1}, -EINVAL, "not a device"},
		{{.path = "d", .mode = S_IFDIR | 0755, .rdev = 1}, -EINVAL, "not a device"},
		{{.path = "c", .mode = S_IFCHR | 0600, .rdev = 1ull << 63}, -EINVAL, "past 2^63"},
		{{.path = "c", .mode = S_IFCHR | 0600, .target = "x"}, -EINVAL, "with a target"},
		{{.path = "p", .mode = S_IFIFO | 0600, .target = "x"}, -EINVAL, "with a target"},
		{{.path = ".", .mode = S_IFIFO | 0600}, -EINVAL, "('.') is a dir"},
		{{.path = ".", .mode = S_IFLNK | 0777, .target = "x"}, -EINVAL, "('.') is a dir"},
		{{.path = "l", .mode = S_IFLNK | 0777}, -EINVAL, "without a target"},
		{{.path = "d", .mode = S_IFDIR | 0755, .target = "x"}, -EINVAL, "with a target"},
		{{.path = "l", .mode = S_IFLNK | 0777, .target = ""}, -EINVAL, "target is empty"},
		{{.path = "bad\xff", .mode = S_IFDIR | 0755}, -EILSEQ, "not UTF-8"},
	};
	zr_tree_entry twice[] = {{.path = "d", .mode = S_IFDIR | 0755},
				 {.path = "d", .mode = S_IFDIR | 0700}};
	zr_dataset *ds;

	t_create1(t_ds, ZR_RAW, 4);
	ds = t_open(t_ds, ZR_RDWR);
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		cr_expect_eq(zr_tree_set(ds, &bad[i].e, 1), bad[i].rc, "entry %zu", i);
		cr_expect(strstr(zr_errmsg(ds), bad[i].says), "entry %zu: %s", i, zr_errmsg(ds));
	}
	cr_expect_eq(zr_tree_set(ds, twice, 2), -EINVAL);
	cr_expect(strstr(zr_errmsg(ds), "'d' is given twice"), "%s", zr_errmsg(ds));
	cr_assert_eq(zr_commit(ds), 0);
	zr_close(ds);
	ds = t_open(t_ds, ZR_RDONLY);
	cr_expect_eq(zr_tree_set(ds, given, 1), -EROFS);
	zr_close(ds);
}

/* The file of the tree (tree.1: the first commit's) holding @text, and
 * meta.json's "tree" naming it: with its size, CRC-32 and @entries
 * (@match), or as it was; or (@ref not NULL) "tree" replaced by @ref. */
static void put_tree(const char *text, long entries, bool match, const char *ref)
{
	char path[512];
	json_t *meta;
	FILE *f;

	snprintf(path, sizeof path, "%s/tree.1", t_ds);
	if (text && strcmp(text, "flip") == 0) { /* its last byte changed, its size not */
		cr_assert_not_null(f = fopen(path, "r+"));
		cr_assert_eq(fseek(f, -1, SEEK_END), 0);
		fputc(' ', f);
		fclose(f);
	} else if (text) {
		cr_assert_not_null(f = fopen(path, "w"));
		fputs(text, f);
		fclose(f);
	} else {
		cr_assert_eq(unlink(path), 0);
	}
	snprintf(path, sizeof path, "%s/meta.json", t_ds);
	cr_assert_not_null(meta = json_load_file(path, 0, NULL));
	if (ref)
		json_object_set_new(meta, "tree", json_loads(ref, JSON_DECODE_ANY, NULL));
	else if (match && text)
		json_object_set_new(meta, "tree",
				    json_pack("{s:i,s:I,s:I,s:I}", "generation", 1, "bytes",
					      (json_int_t)strlen(text), "entries", (json_int_t)entries,
					      "crc32",
					      (json_int_t)crc32(0, (const Bytef *)text,
								(uInt)strlen(text))));
	cr_assert_eq(json_dump_file(meta, path, JSON_INDENT(2)), 0);
	json_decref(meta);
}

Test(tree, a_damaged_tree_is_refused_at_open)
{
	static const struct {
		const char *text;
		long entries;
		bool match;
		const char *ref, *says;
	} bad[] = {
		{"", 0, false, "{}", "'generation' is missing"},
		{"", 0, false, "{\"generation\": 1, \"bytes\": 9, \"entries\": 99999999, \"crc32\": 1}",
		 "'entries' = 99999999 is out of range 0..65536"},
		{"", 0, false, "[1]", "'tree' is not {generation, bytes, entries, crc32}"},
		{NULL, 0, false, NULL, "tree.1: missing (meta.json names it)"},
		{"[]", 0, false, NULL, "tree.1: not the size meta.json gives"},
		{"flip", 0, false, NULL, "tree.1: damaged (not the CRC-32 meta.json gives)"},
		{"{}", 1, true, NULL, "'tree' is not an array"},
		{"[{\"path\": \"b\", \"mode\": 16877, \"mtime\": 0}, "
		 "{\"path\": \"a\", \"mode\": 16877, \"mtime\": 0}]",
		 2, true, NULL, "'a' is not after 'b'"},
		{"[{\"path\": \"a\", \"mode\": 16877, \"mtime\": 0}, "
		 "{\"path\": \"a\", \"mode\": 16877, \"mtime\": 0}]",
		 2, true, NULL, "'a' is not after 'a'"},
		{"[{\"path\": \"a\", \"mode\": 16877}]", 1, true, NULL, "entry 0: not an object"},
		{"[{\"path\": \"..\", \"mode\": 16877, \"mtime\": 0}]", 1, true, NULL,
		 "entry 0: its path"},
		{"[{\"path\": \"a\", \"mode\": 41471, \"mtime\": 0}]", 1, true, NULL,
		 "without a target"},
		{"[{\"path\": \"a\", \"mode\": 4480, \"mtime\": 0, \"rdev\": 3}]", 1, true, NULL,
		 "a device number on an entry that is not a device"},
		{"[{\"path\": \"a\", \"mode\": 8576, \"mtime\": 0, \"rdev\": -3}]", 1, true, NULL,
		 "entry 0: not an object"},
		{"[{\"path\": \"a\", \"mode\": 8576, \"mtime\": 0, \"rdev\": \"3\"}]", 1, true,
		 NULL, "entry 0: not an object"},
		{"[{\"path\": \"a\", \"mode\": 16877, \"mtime\": 0}]", 2, true, NULL,
		 "1 entries, meta.json says 2"},
	};
	zr_dataset *ds;

	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		t_rmrf(t_ds);
		t_create1(t_ds, ZR_RAW, 4);
		ds = t_open(t_ds, ZR_RDWR);
		cr_assert_eq(zr_tree_set(ds, given, 1), 0);
		cr_assert_eq(zr_commit(ds), 0);
		zr_close(ds);
		put_tree(bad[i].text, bad[i].entries, bad[i].match, bad[i].ref);
		cr_expect_eq(zr_open(&ds, t_ds, 0), ZR_ECORRUPT, "case %zu", i);
		cr_expect(strstr(zr_errmsg(NULL), bad[i].says), "case %zu: %s", i, zr_errmsg(NULL));
	}
}

Test(tree, a_commit_that_changes_it_writes_a_file_and_removes_the_last)
{
	char path[512];
	zr_dataset *ds;

	t_create1(t_ds, ZR_RAW, 4);
	ds = t_open(t_ds, ZR_RDWR);
	cr_assert_eq(zr_tree_set(ds, given, 2), 0);
	cr_assert_eq(zr_commit(ds), 0); /* generation 1 */
	t_append_range(ds, 1, 0, 2, 64);
	cr_assert_eq(zr_commit(ds), 0); /* 2: records only, the same file */
	snprintf(path, sizeof path, "%s/tree.1", t_ds);
	cr_assert_eq(access(path, F_OK), 0, "a commit that did not change the tree replaced it");
	cr_assert_eq(zr_tree_set(ds, given, 3), 0);
	cr_assert_eq(zr_commit(ds), 0); /* 3 */
	cr_assert_neq(access(path, F_OK), 0, "tree.1 was left behind");
	snprintf(path, sizeof path, "%s/tree.3", t_ds);
	cr_assert_eq(access(path, F_OK), 0);
	zr_close(ds);
	/* a file a commit that never landed left is swept by the next writer */
	snprintf(path, sizeof path, "%s/tree.9", t_ds);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fclose(f);
	ds = t_open(t_ds, ZR_RDWR);
	cr_assert_neq(access(path, F_OK), 0, "tree.9 was not swept");
	zr_close(ds);
	ds = t_open(t_ds, 0);
	zr_tree_entry *got;
	size_t n;
	cr_assert_eq(zr_tree_get(ds, &got, &n), 0);
	cr_expect_eq(n, 3);
	free(got);
	zr_close(ds);
}
