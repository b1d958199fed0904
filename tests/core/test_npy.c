/*
 * Description: .npy headers (core/npy.c): what zr_npy_header writes,
 * zr_npy_parse reads back (all dtypes, scalar and 8-d rows), in NumPy's
 * own layout; malformed, big-endian, Fortran-ordered, truncated and
 * oversized headers are refused with a reason.
 */
#include "helpers.h"

#include <errno.h>

TestSuite(npy);

Test(npy, header_round_trips_every_dtype_and_shape)
{
	zr_dtype types[] = {ZR_U8, ZR_U16, ZR_U32, ZR_U64, ZR_I8, ZR_I16,
			    ZR_I32, ZR_I64, ZR_F16, ZR_F32, ZR_F64};
	for (size_t t = 0; t < sizeof types / sizeof *types; t++)
		for (unsigned nd = 0; nd <= ZR_SHAPE_MAX; nd++) {
			zr_field_spec s = {.name = "x", .dtype = types[t], .fixed = 1, .ndim = nd};
			for (unsigned k = 0; k < nd; k++)
				s.shape[k] = k + 2;
			char h[ZR_NPY_HEADER_MAX];
			int n = zr_npy_header(&s, 123456789, h, sizeof h);
			cr_assert_gt(n, 0, "%s", zr_errmsg(NULL));
			cr_assert_eq(n % 64, 0);
			cr_assert_eq(h[n - 1], '\n');
			zr_field_spec back;
			uint64_t rows, off;
			cr_assert_eq(zr_npy_parse(h, (size_t)n, &back, &rows, &off), 0, "%s",
				     zr_errmsg(NULL));
			cr_assert_eq(back.dtype, types[t]);
			cr_assert_eq(back.ndim, nd);
			cr_assert_eq(rows, 123456789);
			cr_assert_eq(off, (uint64_t)n);
			for (unsigned k = 0; k < nd; k++)
				cr_assert_eq(back.shape[k], k + 2);
		}
}

Test(npy, numpy_layout)
{
	zr_field_spec s = {.name = "x", .dtype = ZR_F32, .fixed = 1, .ndim = 2, .shape = {3, 4}};
	char h[ZR_NPY_HEADER_MAX];
	int n = zr_npy_header(&s, 5, h, sizeof h);
	/* what numpy.save(np.zeros((5, 3, 4), '<f4')) writes */
	static const char want[] = "\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortran_order': "
				   "False, 'shape': (5, 3, 4), }";
	cr_assert_eq(n, 128);
	cr_assert_eq(memcmp(h, want, sizeof want - 1), 0);
	zr_field_spec scalar = {.name = "y", .dtype = ZR_I64, .fixed = 1};
	n = zr_npy_header(&scalar, 10, h, sizeof h);
	cr_assert_not_null(strstr(h + 10, "'shape': (10,), }"));
	zr_field_spec var = {.name = "z", .dtype = ZR_BYTES};
	cr_assert_eq(zr_npy_header(&var, 10, h, sizeof h), -EINVAL);
	cr_assert_eq(zr_npy_header(&s, 5, h, 64), -EOVERFLOW);
}

static void refused(const char *dict, const char *says)
{
	char buf[512];
	size_t n = strlen(dict);
	memcpy(buf, "\x93NUMPY\x01\x00", 8);
	buf[8] = (char)n;
	buf[9] = 0;
	memcpy(buf + 10, dict, n);
	zr_field_spec s;
	uint64_t rows, off;
	cr_assert_eq(zr_npy_parse(buf, 10 + n, &s, &rows, &off), ZR_EINVAL_SPEC, "'%s' accepted",
		     dict);
	cr_assert_not_null(strstr(zr_errmsg(NULL), says), "'%s': '%s' lacks '%s'", dict,
			   zr_errmsg(NULL), says);
}

Test(npy, bad_headers_are_refused)
{
	refused("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", "not supported");
	refused("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", "not supported");
	refused("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", "not supported");
	refused("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", "Fortran");
	refused("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", "0-d");
	refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1), }", "bad shape");
	refused("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1,1), }",
		"bad shape");
	refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 0), }", "do not fit");
	refused("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 100000, 100000), }",
		"do not fit");
	refused("{'fortran_order': False, 'shape': (2,), }", "descr");
	refused("{'descr': '<f4', 'fortran_order': False}", "no 'shape'");
	refused("{'descr': '<f4', 'shape': (2,)}", "Fortran");
	zr_field_spec s;
	uint64_t rows, off;
	cr_assert_eq(zr_npy_parse("\x93NUMPY\x01\x00\xff\x00{", 11, &s, &rows, &off),
		     ZR_EINVAL_SPEC);
	cr_assert_not_null(strstr(zr_errmsg(NULL), "truncated"));
	cr_assert_eq(zr_npy_parse("PK\x03\x04 not numpy", 16, &s, &rows, &off), ZR_EINVAL_SPEC);
	cr_assert_eq(zr_npy_parse("\x93NUMPY\x07", 7, &s, &rows, &off), ZR_EINVAL_SPEC);
}
