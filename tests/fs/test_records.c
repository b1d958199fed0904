/*
 * Description: record files' names and numbers (fs/records.c) without a
 * mount: names parse only in their one canonical form (ids below N, the
 * field's extension, no leading zeros, nothing after a NUL) and format back
 * to themselves; decimal names stop at their bound; inode numbers decode to
 * (field, id) and nothing else does; attributes and reads of record files.
 */
#include "fs_fixture.h"

TestSuite(records);

static const zr_field_spec jpg = {.name = "img", .dtype = ZR_BYTES, .ext = "jpg"};
static const zr_field_spec bare = {.name = "lab", .dtype = ZR_I64};

static void names(const zr_field_spec *spec, uint64_t n, const char *name, int want_rc,
		  uint64_t want_id)
{
	struct zrfs_field f = {.spec = spec, .ext_len = spec->ext ? strlen(spec->ext) : 0};
	struct zrfs fs = {.nfields = 1, .fields = &f, .names = {-1, -1, 0, -1}};
	uint64_t id = 12345;
	char back[64];
	int rc;

	snprintf(f.ext, sizeof f.ext, "%s", spec->ext ? spec->ext : "");
	rc = zrfs_record_name_parse(&fs, 0, name, n, &id);

	cr_assert_eq(rc, want_rc, "'%s': %d", name, rc);
	if (rc != 0)
		return;
	cr_assert_eq(id, want_id, "'%s': id %llu", name, (unsigned long long)id);
	zrfs_record_name_format(&fs, 0, id, back, sizeof back);
	cr_assert_str_eq(back, name, "a parsed name formats back to itself");
}

Test(records, names_parse_in_one_form_only)
{
	names(&jpg, 100, "0.jpg", 0, 0);
	names(&jpg, 100, "99.jpg", 0, 99);
	names(&jpg, 100, "100.jpg", -ENOENT, 0);
	names(&jpg, 100, "7", -ENOENT, 0);
	names(&jpg, 100, "07.jpg", -ENOENT, 0);
	names(&jpg, 100, "7.JPG", -ENOENT, 0);
	names(&jpg, 100, "7.jpg.jpg", -ENOENT, 0);
	names(&jpg, 100, "7.jp", -ENOENT, 0);
	names(&jpg, 100, ".jpg", -ENOENT, 0);
	names(&jpg, 100, "-1.jpg", -ENOENT, 0);
	names(&bare, 100, "42", 0, 42);
	names(&bare, 100, "42.", -ENOENT, 0);
	names(&bare, 100, "4 2", -ENOENT, 0);
	names(&bare, 100, "", -ENOENT, 0);
	names(&bare, 100, "00", -ENOENT, 0);
	names(&bare, 0, "0", -ENOENT, 0);
	names(&bare, 1, "0", 0, 0);
	names(&bare, 1, "5", -ENOENT, 0);
	names(&bare, UINT64_C(1) << 40, "1099511627775", 0, (UINT64_C(1) << 40) - 1);
	names(&bare, UINT64_C(1) << 40, "1099511627776", -ENOENT, 0);
	names(&bare, UINT64_C(1) << 40, "18446744073709551617", -ENOENT, 0);
	names(&bare, UINT64_C(1) << 40, "99999999999999999999999999999", -ENOENT, 0);
	/* a name is a C string: whatever follows a NUL is not part of it */
	static const char with_nul[] = "12\0.jpg";
	names(&bare, 100, with_nul, 0, 12);
	names(&jpg, 100, with_nul, -ENOENT, 0);
}

Test(records, decimals_stop_at_their_bound)
{
	uint64_t v = 7;
	cr_assert_eq(zrfs_parse_dec("18446744073709551615", 20, UINT64_MAX, &v), 0);
	cr_assert_eq(v, UINT64_MAX);
	cr_assert_eq(zrfs_parse_dec("18446744073709551616", 20, UINT64_MAX, &v), -ENOENT);
	cr_assert_eq(zrfs_parse_dec("10", 2, 9, &v), -ENOENT);
	cr_assert_eq(zrfs_parse_dec("9", 1, 9, &v), 0);
	cr_assert_eq(zrfs_parse_dec("9", 1, 8, &v), -ENOENT);
	cr_assert_eq(zrfs_parse_dec("0", 1, 0, &v), 0);
	cr_assert_eq(v, 0);
	cr_assert_eq(zrfs_parse_dec("123", 2, 100, &v), 0, "only the length given is read");
	cr_assert_eq(v, 12);
	cr_assert_eq(zrfs_parse_dec("", 0, 100, &v), -ENOENT);
	cr_assert_eq(zrfs_parse_dec("1/", 2, 100, &v), -ENOENT, "'/' is just below '0'");
	cr_assert_eq(zrfs_parse_dec("1:", 2, 100, &v), -ENOENT, "':' is just above '9'");
}

Test(records, inode_numbers_decode_to_field_id_and_version, .init = t_fs_setup,
     .fini = t_fs_teardown)
{
	unsigned f, version;
	uint64_t id;

	for (unsigned field = 0; field < 3; field++)
		for (uint64_t i = 0; i < T_N; i++)
			for (unsigned ver = 0; ver < ZRFS_VERSIONS; ver += 85) {
				fuse_ino_t ino = zrfs_rec_ino(field, i, ver);
				cr_assert(zrfs_rec_decode(&t_fs, ino, &f, &id, &version));
				cr_assert(f == field && id == i && version == ver);
				for (unsigned other = 0; other < ZRFS_VERSIONS; other += 51)
					cr_assert(other == ver || zrfs_rec_ino(field, i, other) != ino,
						  "versions have numbers of their own");
			}
	cr_assert(!zrfs_rec_decode(&t_fs, zrfs_rec_ino(3, 0, 0), &f, &id, &version), "no field 3");
	cr_assert(!zrfs_rec_decode(&t_fs, ZRFS_INO_META, &f, &id, &version));
	cr_assert(!zrfs_rec_decode(&t_fs, ZRFS_INO_NPY | 1, &f, &id, &version));
	cr_assert(!zrfs_rec_decode(&t_fs, ZRFS_INO_STEP | zrfs_rec_ino(0, 1, 7), &f, &id, &version),
		  "a batch step's number is not a record's");
	cr_assert(!zrfs_rec_decode(&t_fs, ZRFS_INO_BY_CLASS | 5, &f, &id, &version));
}

Test(records, attributes_and_bytes_of_record_files, .init = t_fs_setup, .fini = t_fs_teardown)
{
	struct zrfs_view *v = zrfs_view_current(&t_fs);

	for (unsigned f = 0; f < 3; f++)
		for (uint64_t id = 0; id < T_N; id++) {
			uint8_t want[64];
			int n = t_value(f, id, want);
			struct stat st;
			fuse_ino_t ino = zrfs_rec_ino(f, id, 0);
			int rc = zrfs_record_attr(&t_fs, v, ino, f, id, &st);
			cr_assert_eq(zrfs_record_listed(v, f, id), n >= 0);
			if (n < 0) {
				cr_assert_eq(rc, -ENOENT, "field %u record %llu is missing", f,
					     (unsigned long long)id);
				zrfs_record_read(NULL, &t_fs, v, zrfs_rec_cache_key(ino), 0, f, id, 4096, 0);
				cr_assert_eq(t_reply.err, ENOENT);
				continue;
			}
			cr_assert_eq(rc, 0);
			cr_assert_eq(st.st_size, n);
			cr_assert_eq(st.st_ino, ino);
			for (off_t off = 0; off <= n; off += 5) {
				size_t len;
				zrfs_record_read(NULL, &t_fs, v, zrfs_rec_cache_key(ino), 0, f, id, 4, off);
				const uint8_t *b = t_bytes(&len);
				size_t want_len = (size_t)(n - off < 4 ? n - off : 4);
				cr_assert_eq(len, want_len, "field %u record %llu at %lld", f,
					     (unsigned long long)id, (long long)off);
				cr_assert_eq(memcmp(b, want + off, len), 0);
			}
		}
	/* an id beyond the view: no such record */
	struct stat st;
	cr_assert_eq(zrfs_record_attr(&t_fs, v, zrfs_rec_ino(0, T_N, 0), 0, T_N, &st), -ENOENT);
	zrfs_view_put(v);
}
