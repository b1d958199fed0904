/*
 * Description: the .npy views' layout (fs/npy_view.c) without a mount:
 * headers follow NumPy's format 1.0; the rows under a byte range are those
 * it touches; the pieces of a range are the header's bytes, then each row's
 * bytes when it has the row's size and zeros otherwise, cut to the range.
 */
#include "zrfs_i.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

TestSuite(npy_view);

Test(npy_view, header_follows_numpy_format_1_0)
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
	cr_assert_eq(h.rows, 1000);
	zr_field_spec scalar = {.name = "y", .dtype = ZR_I64, .fixed = 1};
	cr_assert_eq(zrfs_npy_header(&scalar, 7, 8, &h), 0);
	cr_assert_not_null(strstr(h.hdr + 10, "'shape': (7,), }"), "%s", h.hdr + 10);
	zr_field_spec var = {.name = "z", .dtype = ZR_BYTES};
	cr_assert_eq(zrfs_npy_header(&var, 7, 0, &h), -EINVAL);
}

Test(npy_view, span_covers_the_rows_a_range_touches)
{
	zr_field_spec s = {.name = "y", .dtype = ZR_I64, .fixed = 1};
	struct zrfs_npy h;
	uint64_t lo, hi;
	cr_assert_eq(zrfs_npy_header(&s, 10, 8, &h), 0);
	uint64_t at = h.hdr_len;
	zrfs_npy_span(&h, 0, at, &lo, &hi);
	cr_assert(lo == 0 && hi == 0, "the header alone: no rows");
	zrfs_npy_span(&h, 0, at + 1, &lo, &hi);
	cr_assert(lo == 0 && hi == 1);
	zrfs_npy_span(&h, at + 8, at + 16, &lo, &hi);
	cr_assert(lo == 1 && hi == 2, "exactly row 1");
	zrfs_npy_span(&h, at + 15, at + 17, &lo, &hi);
	cr_assert(lo == 1 && hi == 3, "the end of row 1 and the start of row 2");
	zrfs_npy_span(&h, at + 75, at + 1000, &lo, &hi);
	cr_assert(lo == 9 && hi == 10, "clamped to the rows there are");
	zrfs_npy_span(&h, at + 1000, at + 2000, &lo, &hi);
	cr_assert(lo == 10 && hi == 10, "past the end");
}

/* The bytes @p describes (memory pieces only). */
static uint8_t *flatten(const struct zrfs_pieces *p, size_t *len)
{
	uint8_t *out = malloc(zrfs_pieces_size(p) + 1);
	size_t at = 0;
	for (size_t i = 0; i < p->bv->count; i++) {
		cr_assert_not_null(p->bv->buf[i].mem);
		memcpy(out + at, p->bv->buf[i].mem, p->bv->buf[i].size);
		at += p->bv->buf[i].size;
	}
	*len = at;
	return out;
}

Test(npy_view, pieces_are_header_rows_and_zeros_cut_to_the_range)
{
	zr_field_spec s = {.name = "x", .dtype = ZR_U8, .fixed = 1, .ndim = 1, .shape = {5}};
	uint8_t rec[4][5] = {{1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}, {0}, {11, 12, 13, 14, 15}};
	/* row 2 is missing (len 0), row 1 has a damaged length: both zeros */
	struct zrfs_row rows[4] = {{rec[0], -1, 0, 5, true},
				   {rec[1], -1, 0, 4, true},
				   {NULL, -1, 0, 0, false},
				   {rec[3], -1, 0, 5, true}};
	struct zrfs_npy h;
	cr_assert_eq(zrfs_npy_header(&s, 4, 5, &h), 0);
	uint8_t *want = malloc(h.size);
	memcpy(want, h.hdr, h.hdr_len);
	memcpy(want + h.hdr_len, rec[0], 5);
	memset(want + h.hdr_len + 5, 0, 10);
	memcpy(want + h.hdr_len + 15, rec[3], 5);
	/* every range [pos, end), end past the size included */
	for (uint64_t pos = 0; pos <= h.size; pos++)
		for (uint64_t end = pos; end <= h.size + 3; end++) {
			struct zrfs_pieces p;
			uint64_t lo, hi;
			size_t len;
			zrfs_npy_span(&h, pos, end, &lo, &hi);
			cr_assert_eq(zrfs_pieces_init(&p, 1), 0);
			cr_assert_eq(zrfs_npy_pieces(&p, &h, rows + lo, lo, pos, end), 0);
			uint8_t *got = flatten(&p, &len);
			uint64_t want_len = (end < h.size ? end : h.size) - pos;
			cr_assert_eq(len, want_len, "[%llu, %llu)", (unsigned long long)pos,
				     (unsigned long long)end);
			cr_assert_eq(memcmp(got, want + pos, len), 0, "[%llu, %llu)",
				     (unsigned long long)pos, (unsigned long long)end);
			free(got);
			zrfs_pieces_free(&p);
		}
	free(want);
}

Test(npy_view, a_large_zero_row_is_pieces_of_the_static_zeros)
{
	zr_field_spec s = {.name = "x", .dtype = ZR_U8, .fixed = 1, .ndim = 1, .shape = {3 << 20}};
	struct zrfs_row missing = {NULL, -1, 0, 0, false};
	struct zrfs_npy h;
	struct zrfs_pieces p;
	cr_assert_eq(zrfs_npy_header(&s, 1, 3 << 20, &h), 0);
	cr_assert_eq(zrfs_pieces_init(&p, 1), 0);
	cr_assert_eq(zrfs_npy_pieces(&p, &h, &missing, 0, h.hdr_len, h.size), 0);
	cr_assert_eq(zrfs_pieces_size(&p), 3 << 20);
	cr_assert_eq(p.bv->count, (3u << 20) / ZRFS_ZEROS);
	for (size_t i = 0; i < p.bv->count; i++)
		cr_assert_eq(((const uint8_t *)p.bv->buf[i].mem)[ZRFS_ZEROS - 1], 0);
	zrfs_pieces_free(&p);
}
