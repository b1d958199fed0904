/*
 * Description: the field tree without a mount (fs/fields.c): its names in the
 * root (meta.json, a directory per field, FIELD.npy for fixed shapes only),
 * a field's directory lists its present records in id order, and the whole
 * field views of a raw and a flate field hold every row (missing rows as
 * zeros) whole and read in pieces; a record file's number the kernel holds
 * is not given to newer bytes until the kernel forgets it.
 */
#include "fs_fixture.h"

TestSuite(tree, .init = t_fs_setup, .fini = t_fs_teardown);

static const struct zrfs_subtree *const T = &zrfs_fields;

Test(tree, root_names)
{
	int rc;
	cr_assert_eq(t_lookup(T, ZRFS_INO_ROOT, "x", &rc), ZRFS_INO_DIR + 0);
	cr_assert_eq(t_lookup(T, ZRFS_INO_ROOT, "v", &rc), ZRFS_INO_DIR + 2);
	fuse_ino_t npy = t_lookup(T, ZRFS_INO_ROOT, "y.npy", &rc), meta;
	cr_assert(npy >> 58 == 1 && (npy & 0xff) == 1, "y.npy: %llx", (unsigned long long)npy);
	meta = t_lookup(T, ZRFS_INO_ROOT, "meta.json", &rc);
	cr_assert_eq(meta, ZRFS_INO_META | 1, "meta.json's number carries the generation");
	static const char *const none[] = {"v.npy", "z", ".batches", "by", "x.np", "meta"};
	for (size_t i = 0; i < sizeof none / sizeof *none; i++) {
		t_lookup(T, ZRFS_INO_ROOT, none[i], &rc);
		cr_assert_eq(rc, -ENOENT, "%s", none[i]);
	}
	char names[256] = "";
	struct zrfs_dirent d;
	for (uint64_t pos = 2; t_entry(T, ZRFS_INO_ROOT, pos, &d) == 1; pos = d.pos + 1) {
		strcat(names, d.name);
		strcat(names, d.type == S_IFDIR ? "/ " : " ");
	}
	cr_assert_str_eq(names, "meta.json x/ x.npy x.present.npy y/ y.npy y.present.npy v/ "
				"v.present.npy ");
	fuse_ino_t present = t_lookup(T, ZRFS_INO_ROOT, "v.present.npy", &rc);
	cr_assert(present >> 58 == 1 && (present & ZRFS_INO_PRESENT) && (present & 0xff) == 2,
		  "v.present.npy: %llx", (unsigned long long)present);
	t_lookup(T, meta, "x", &rc);
	cr_assert_eq(rc, -ENOTDIR);
}

Test(tree, a_field_lists_its_present_records)
{
	char names[256] = "";
	struct zrfs_dirent d;
	int rc;
	fuse_ino_t v = t_lookup(T, ZRFS_INO_ROOT, "v", &rc);
	for (uint64_t pos = 2; t_entry(T, v, pos, &d) == 1; pos = d.pos + 1) {
		strcat(names, d.name);
		strcat(names, " ");
		cr_assert_eq(t_lookup(T, v, d.name, &rc), d.ino);
	}
	cr_assert_str_eq(names, "0.bin 1.bin 2.bin 3.bin 5.bin 6.bin 7.bin 8.bin 9.bin ",
			 "record 4 is missing, record 2 is empty but present");
	/* resuming in the middle skips nothing */
	cr_assert_eq(t_entry(T, v, 6, &d), 1);
	cr_assert_str_eq(d.name, "5.bin");
	struct stat st;
	cr_assert_eq(t_attr(T, t_lookup(T, v, "4.bin", &rc), &st), -ENOENT);
	cr_assert_eq(t_entry(T, ZRFS_INO_META, 2, &d), -ENOTDIR);
}

Test(tree, whole_field_views)
{
	for (unsigned f = 0; f < 2; f++) {
		const char *name = f ? "y.npy" : "x.npy";
		uint64_t rsz = f ? 8 : 6;
		char hdr[ZR_NPY_HEADER_MAX];
		int h = zr_npy_header(&t_fields[f], T_N, hdr, sizeof hdr), rc;
		uint8_t want[1024];
		memcpy(want, hdr, (size_t)h);
		for (uint64_t id = 0; id < T_N; id++)
			if (t_value(f, id, want + h + id * rsz) < 0)
				memset(want + h + id * rsz, 0, rsz);
		size_t size = (size_t)h + T_N * rsz, len;
		fuse_ino_t ino = t_lookup(T, ZRFS_INO_ROOT, name, &rc);
		struct stat st;
		cr_assert_eq(t_attr(T, ino, &st), 0);
		cr_assert_eq((size_t)st.st_size, size);
		static const size_t chunks[] = {1 << 20, 7, 3};
		for (size_t c = 0; c < 3; c++) {
			uint8_t *got = t_read_all(T, ino, chunks[c], &len);
			cr_assert_eq(len, size, "%s in pieces of %zu", name, chunks[c]);
			cr_assert_eq(memcmp(got, want, len), 0, "%s in pieces of %zu", name, chunks[c]);
			free(got);
		}
	}
}

Test(tree, meta_json_and_directories)
{
	size_t len;
	int rc;
	char path[512], want[4096];
	snprintf(path, sizeof path, "%s/meta.json", t_ds);
	FILE *f = fopen(path, "rb");
	size_t want_len = fread(want, 1, sizeof want, f);
	fclose(f);
	uint8_t *got = t_read_all(T, t_lookup(T, ZRFS_INO_ROOT, "meta.json", &rc), 1 << 20, &len);
	cr_assert_eq(len, want_len);
	cr_assert_eq(memcmp(got, want, len), 0);
	free(got);
	t_read(T, ZRFS_INO_DIR, 4096, 0);
	cr_assert_eq(t_reply.err, EISDIR);
	struct stat st;
	cr_assert_eq(t_attr(T, ZRFS_INO_DIR + 1, &st), 0);
	cr_assert(S_ISDIR(st.st_mode));
	cr_assert(!T->owns(&t_fs, ZRFS_INO_NPY | 2), "v has no .npy view");
	cr_assert(!T->owns(&t_fs, ZRFS_INO_DIR + 3), "there are 3 fields");
}

/* A record file's number the kernel holds is never given to newer bytes
 * before the kernel forgets it: a FORGET of that older inode, coming late,
 * would otherwise unpin the newer one under its reader (ESTALE). */
Test(tree, a_number_the_kernel_holds_is_not_given_to_newer_bytes)
{
	unsigned held;
	bool seen[ZRFS_VERSIONS] = {false};

	cr_assert_eq(zrfs_inode_hand(&t_fs, zrfs_rec_ino(0, 3, 0), T), 0); /* a lookup first */
	cr_assert_eq(zrfs_rec_version_bump(&t_fs, 0, 3), 0);
	held = zrfs_rec_version(&t_fs, 0, 3);
	cr_assert_eq(zrfs_inode_hand(&t_fs, zrfs_rec_ino(0, 3, held), T), 0); /* and one of it */
	for (int k = 0; k < 3 * ZRFS_VERSIONS; k++) { /* it wraps round three times */
		cr_assert_eq(zrfs_rec_version_bump(&t_fs, 0, 3), 0);
		seen[zrfs_rec_version(&t_fs, 0, 3)] = true;
	}
	cr_assert(!seen[held], "version %u, which the kernel holds, was given again", held);
	cr_assert(!seen[0], "version 0, which the kernel holds, was given again");
	cr_assert(zrfs_inode_forget(&t_fs, zrfs_rec_ino(0, 3, held), 1)); /* its FORGET */
	for (int k = 0; k < ZRFS_VERSIONS && zrfs_rec_version(&t_fs, 0, 3) != held; k++)
		cr_assert_eq(zrfs_rec_version_bump(&t_fs, 0, 3), 0);
	cr_assert_eq(zrfs_rec_version(&t_fs, 0, 3), held, "a forgotten number comes round again");
	/* another record's numbers are its own */
	cr_assert_eq(zrfs_rec_version_bump(&t_fs, 1, 3), 0);
	cr_assert_eq(zrfs_rec_version(&t_fs, 1, 3), 1);
	zrfs_inode_forget(&t_fs, zrfs_rec_ino(0, 3, 0), 1);
}

/* The versions of records whose numbers the kernel holds none of any more
 * are given back: the table shrinks to the records whose files it holds. */
Test(tree, versions_are_given_back_once_the_kernel_holds_no_number_of_the_record)
{
	for (uint64_t id = 0; id < T_N; id++)
		cr_assert_eq(zrfs_rec_version_bump(&t_fs, 2, id), 0);
	fuse_ino_t kept = zrfs_rec_ino(2, 4, zrfs_rec_version(&t_fs, 2, 4));
	fuse_ino_t twin = zrfs_rec_text_ino(zrfs_rec_ino(2, 6, 0)); /* an older one, in tree/ */
	cr_assert_eq(zrfs_inode_hand(&t_fs, kept, T), 0);
	cr_assert_eq(zrfs_inode_hand(&t_fs, twin, T), 0);
	cr_assert_eq(zrfs_versions_trim(&t_fs, 3), T_N - 3, "the 3 oldest looked at, none held");
	cr_assert_eq(zrfs_versions_trim(&t_fs, 3), T_N - 5, "records 3 and 5 go, 4 stays");
	cr_assert_eq(zrfs_versions_trim(&t_fs, 1000), 2, "those of records 4 and 6 stay");
	cr_assert_eq(zrfs_rec_version(&t_fs, 2, 0), 0, "numbered as if never changed");
	cr_assert_eq(zrfs_rec_version(&t_fs, 2, 4), 1);
	cr_assert(zrfs_inode_forget(&t_fs, kept, 1));
	cr_assert(zrfs_inode_forget(&t_fs, twin, 1));
	cr_assert_eq(zrfs_versions_trim(&t_fs, 1000), 0);
	cr_assert_eq(zrfs_inodes_held(&t_fs), 0);
}
