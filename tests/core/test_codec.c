/*
 * Description: byte encodings (core/codec.c): the offset entry's layout is
 * fixed little-endian (a test vector); flate records round-trip for sizes
 * from 0 B up, carry their logical length in front, and every damaged stream
 * (truncated, trailing bytes, wrong length, bit flips) is refused.
 */
#include "helpers.h"
#include "store_i.h"

#include <zlib.h>

TestSuite(codec);

Test(codec, entry_layout_is_fixed)
{
	zr_entry e = {.offset = 0x0102030405060708ULL, .chunk_id = 0x11223344, .len = 0xA0B0C0D0};
	static const uint8_t want[16] = {0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,
					 0x44, 0x33, 0x22, 0x11, 0xD0, 0xC0, 0xB0, 0xA0};
	uint8_t p[16];
	zr_entry d;
	zr_entry_encode(p, &e);
	cr_assert_eq(memcmp(p, want, 16), 0);
	zr_entry_decode(p, &d);
	cr_assert_eq(d.offset, e.offset);
	cr_assert_eq(d.chunk_id, e.chunk_id);
	cr_assert_eq(d.len, e.len);
	/* the tear-free store writes the same bytes */
	uint64_t slot[2];
	zr_entry_store((uint8_t *)slot, &e);
	cr_assert_eq(memcmp(slot, want, 16), 0);
}

static size_t encode(const void *src, size_t n, uint8_t **out)
{
	size_t cap = zr_flate_bound(n), len;
	*out = malloc(cap);
	cr_assert_eq(zr_flate_encode(src, n, *out, cap, &len), 0);
	cr_assert_leq(len, cap);
	return len;
}

Test(codec, flate_round_trip_and_length_header)
{
	size_t sizes[] = {0, 1, 2, 100, 4096, 65537, (size_t)5 << 20};
	for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
		size_t n = sizes[k];
		uint8_t *src = malloc(n + 1), *phys, *back = malloc(n + 1);
		t_fill(src, n, 5, k);
		size_t len = encode(src, n, &phys);
		cr_assert_eq(zr_le64(phys), n, "logical length in front");
		zr_fstate f = {.def.spec.compress = ZR_FLATE};
		zr_entry e = {.len = (uint32_t)len};
		uint64_t logical;
		cr_assert_eq(zr_logical_len(&f, &e, phys, &logical), 0);
		cr_assert_eq(logical, n);
		cr_assert_eq(zr_flate_decode(phys, len, back, n), 0, "size %zu", n);
		cr_assert_eq(memcmp(src, back, n), 0);
		/* a plain zlib stream follows the header */
		uLongf zn = (uLongf)n;
		cr_assert_eq(uncompress(back, &zn, phys + 8, (uLong)(len - 8)), Z_OK);
		cr_assert_eq(zn, n);
		free(src);
		free(back);
		free(phys);
	}
}

Test(codec, damaged_streams_are_refused)
{
	uint8_t src[3000], back[3000], *phys;
	t_fill(src, sizeof src, 6, 1);
	size_t len = encode(src, sizeof src, &phys);

	cr_assert_eq(zr_flate_decode(phys, len - 1, back, sizeof src), ZR_ECORRUPT, "truncated");
	cr_assert_eq(zr_flate_decode(phys, 5, back, sizeof src), ZR_ECORRUPT, "header cut");
	uint8_t *longer = malloc(len + 1);
	memcpy(longer, phys, len);
	longer[len] = 0;
	cr_assert_eq(zr_flate_decode(longer, len + 1, back, sizeof src), ZR_ECORRUPT, "trailing");
	free(longer);
	cr_assert_eq(zr_flate_decode(phys, len, back, sizeof src - 1), ZR_ECORRUPT, "length");
	/* every single bit flip in the stream is caught (Adler-32 or structure) */
	int caught = 0, tried = 0;
	for (size_t i = 8; i < len; i += 7) {
		phys[i] ^= 0x10;
		tried++;
		caught += zr_flate_decode(phys, len, back, sizeof src) == ZR_ECORRUPT;
		phys[i] ^= 0x10;
	}
	cr_assert_eq(caught, tried);
	cr_assert_eq(zr_flate_decode(phys, len, back, sizeof src), 0);
	free(phys);
}

Test(codec, logical_length_claims_are_bounded)
{
	uint8_t hdr[32] = {0};
	zr_fstate f = {.def.spec.compress = ZR_FLATE};
	zr_entry e = {.len = 32};
	uint64_t logical;
	zr_put_le64(hdr, UINT64_C(1) << 40);
	cr_assert_eq(zr_logical_len(&f, &e, hdr, &logical), ZR_ECORRUPT);
	e.len = 10; /* shorter than header + smallest stream */
	cr_assert_eq(zr_logical_len(&f, &e, hdr, &logical), ZR_ECORRUPT);
	f.def.spec.compress = ZR_RAW;
	cr_assert_eq(zr_logical_len(&f, &e, hdr, &logical), 0);
	cr_assert_eq(logical, 10);
}
