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

/* Format 1: offset u64, chunk u32, length u32. */
Test(codec, entry_layout_is_fixed)
{
	zr_entry e = {.offset = 0x0102030405060708ULL, .chunk_id = 0x11223344, .len = 0xA0B0C0D0};
	static const uint8_t want[16] = {0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,
					 0x44, 0x33, 0x22, 0x11, 0xD0, 0xC0, 0xB0, 0xA0};
	uint8_t p[16];
	zr_entry d;
	zr_entry_encode(p, 1, &e);
	cr_assert_eq(memcmp(p, want, 16), 0);
	zr_entry_decode(p, 1, &d);
	cr_assert_eq(d.offset, e.offset);
	cr_assert_eq(d.chunk_id, e.chunk_id);
	cr_assert_eq(d.len, e.len);
	cr_assert_eq(d.crc, 0);
	/* the tear-free store writes the same bytes */
	uint64_t slot[2];
	zr_entry_store((uint8_t *)slot, 1, &e);
	cr_assert_eq(memcmp(slot, want, 16), 0);
}

/* Format 2: the offset's low 40 bits and the checksum's high 24, the chunk
 * id's low 24 bits and the checksum's low 8, the length (FORMAT.md). */
Test(codec, entry_layout_of_format_2)
{
	zr_entry e = {.offset = 0x0000000405060708ULL, .chunk_id = 0x00223344, .len = 0xA0B0C0D0,
		      .crc = 0xE3069283};
	static const uint8_t want[16] = {0x08, 0x07, 0x06, 0x05, 0x04, 0x92, 0x06, 0xE3,
					 0x44, 0x33, 0x22, 0x83, 0xD0, 0xC0, 0xB0, 0xA0};
	uint8_t p[16];
	zr_entry d;
	zr_entry_encode(p, 2, &e);
	cr_assert_eq(memcmp(p, want, 16), 0);
	zr_entry_decode(p, 2, &d);
	cr_assert(d.offset == e.offset && d.chunk_id == e.chunk_id && d.len == e.len &&
		  d.crc == e.crc);
	uint64_t slot[2];
	zr_entry_store((uint8_t *)slot, 2, &e);
	cr_assert_eq(memcmp(slot, want, 16), 0);
	/* empty (the chunk id 0xFFFFFF) and missing (all zero) */
	zr_entry empty = {.chunk_id = ZR_CHUNK_EMPTY};
	static const uint8_t want_empty[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0,
					       0, 0, 0, 0};
	zr_entry_encode(p, 2, &empty);
	cr_assert_eq(memcmp(p, want_empty, 16), 0);
	zr_entry_decode(p, 2, &d);
	cr_assert(d.chunk_id == ZR_CHUNK_EMPTY && d.len == 0 && !zr_entry_missing(&d));
	memset(p, 0, 16);
	zr_entry_decode(p, 2, &d);
	cr_assert(zr_entry_missing(&d) && d.crc == 0);
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

/* CRC-32C: the published check value, and the CPU's instruction and the
 * tables agree at every length and alignment, in one piece or several. */
Test(codec, crc32c_is_castagnoli)
{
	cr_assert_eq(zr_crc32c(0, "123456789", 9), 0xE3069283u);
	cr_assert_eq(zr_crc32c_portable(0, "123456789", 9), 0xE3069283u);
	cr_assert_eq(zr_crc32c(0, "", 0), 0);
	uint8_t zeros[32] = {0}; /* RFC 3720, B.4 */
	cr_assert_eq(zr_crc32c(0, zeros, 32), 0x8A9136AAu);
	static uint8_t buf[4096 + 8];
	t_fill(buf, sizeof buf, 3, 1);
	for (size_t at = 0; at < 8; at++)
		for (size_t n = 0; n < 300; n += 1 + n / 16) {
			uint32_t one = zr_crc32c(0, buf + at, n);
			cr_assert_eq(one, zr_crc32c_portable(0, buf + at, n), "at %zu n %zu", at, n);
			cr_assert_eq(zr_crc32c(zr_crc32c(0, buf + at, n / 3), buf + at + n / 3,
					       n - n / 3),
				     one, "in two pieces: at %zu n %zu", at, n);
		}
	/* past the three stripes the instruction runs over at once */
	for (size_t n = 1400; n < 4096; n += 1 + n % 97)
		cr_assert_eq(zr_crc32c(0, buf + n % 8, n), zr_crc32c_portable(0, buf + n % 8, n),
			     "n %zu", n);
	cr_assert_eq(zr_crc32c(0, buf, 4096), zr_crc32c_portable(0, buf, 4096));
}
