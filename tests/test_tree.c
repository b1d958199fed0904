/*
 * Description: the mount's name and header logic (fs/tree.c, fs/npy.c)
 * without a mount: record names parse only in their one canonical form
 * (ids below N, the field's extension, no leading zeros, nothing after a
 * NUL), .npy headers follow NumPy's format 1.0, errors map to errno once.
 */
#include "zrfs_i.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

TestSuite(tree);

static const zr_field_spec jpg = {.name = "img", .dtype = ZR_BYTES, .ext = "jpg"};
static const zr_field_spec bare = {.name = "lab", .dtype = ZR_I64};

static void names(const zr_field_spec *spec, uint64_t n, const char *name, int want_rc,
		  uint64_t want_id)
{
	struct zrfs_field f = {.spec = spec, .ext_len = spec->ext ? strlen(spec->ext) : 0};
	uint64_t id = 12345;
	int rc = zrfs_record_name(&f, name, n, &id);
	cr_assert_eq(rc, want_rc, "'%s': %d", name, rc);
	if (rc == 0)
		cr_assert_eq(id, want_id, "'%s': id %llu", name, (unsigned long long)id);
}

Test(tree, record_names)
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
	names(&bare, UINT64_C(1) << 40, "1099511627775", 0, (UINT64_C(1) << 40) - 1);
	names(&bare, UINT64_C(1) << 40, "1099511627776", -ENOENT, 0);
	names(&bare, UINT64_C(1) << 40, "18446744073709551617", -ENOENT, 0);
	names(&bare, UINT64_C(1) << 40, "99999999999999999999999999999", -ENOENT, 0);
	/* a name is a C string: whatever follows a NUL is not part of it */
	static const char with_nul[] = "12\0.jpg";
	names(&bare, 100, with_nul, 0, 12);
	names(&jpg, 100, with_nul, -ENOENT, 0);
}

Test(tree, npy_header_follows_numpy_format_1_0)
{
	zr_field_spec s = {.name = "x", .dtype = ZR_F32, .fixed = 1, .ndim = 3, .shape = {32, 32, 3}};
	struct zrfs_npy h;
	cr_assert_eq(zrfs_npy_header(&s, 1000, 32 * 32 * 3 * 4, &h), 0);
	cr_assert_eq(h.hdr_len % 64, 0);
	cr_assert_eq(memcmp(h.hdr, "\x93NUMPY\x01\x00", 8), 0);
	cr_assert_eq((size_t)(uint8_t)h.hdr[8] | (size_t)(uint8_t)h.hdr[9] << 8, h.hdr_len - 10);
	cr_assert_eq(h.hdr[h.hdr_len - 1], '\n');
	cr_assert_not_null(strstr(h.hdr + 10, "{'descr': '<f4', 'fortran_order': False, "
					      "'shape': (1000, 32, 32, 3), }"));
	cr_assert_eq(h.size, h.hdr_len + 1000 * 12288);
	zr_field_spec scalar = {.name = "y", .dtype = ZR_I64, .fixed = 1};
	cr_assert_eq(zrfs_npy_header(&scalar, 7, 8, &h), 0);
	cr_assert_not_null(strstr(h.hdr + 10, "'shape': (7,), }"), "%s", h.hdr + 10);
	zr_field_spec var = {.name = "z", .dtype = ZR_BYTES};
	cr_assert_eq(zrfs_npy_header(&var, 7, 0, &h), -EINVAL);
}

Test(tree, errors_map_to_errno)
{
	cr_assert_eq(zrfs_errno(ZR_ECORRUPT), EIO);
	cr_assert_eq(zrfs_errno(ZR_EVERSION), EIO);
	cr_assert_eq(zrfs_errno(-ENOENT), ENOENT);
	cr_assert_eq(zrfs_errno(-ENOMEM), ENOMEM);
	cr_assert_eq(zrfs_errno(-99999), EIO);
}
