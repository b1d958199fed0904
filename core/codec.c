/*
 * codec.c - byte encodings: offset entries, and flate records.
 *
 * A flate record is stored as an 8-byte little-endian logical length followed
 * by one zlib stream (RFC 1950, with its Adler-32 check). Keeping the length
 * in front of the stream makes the logical size of any record an O(1) read
 * of 8 bytes, without inflating, which is what a filesystem's stat needs.
 *
 * zlib streams are kept per thread and reset between records, so the hot read
 * path allocates nothing per record.
 *
 * A format-2 entry holds the CRC-32C (Castagnoli, the polynomial of iSCSI,
 * ext4's metadata and Btrfs) of its value's stored bytes: SSE 4.2's crc32
 * instruction where the CPU has it, else eight tables.
 */
#include "store_i.h"

#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

uint64_t zr_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

void zr_put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* ---- CRC-32C ---- */

#define CRC32C_POLY 0x82F63B78u /* reflected */

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_tables(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? c >> 1 ^ CRC32C_POLY : c >> 1;
		crc_table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_table[t][i] = crc_table[t - 1][i] >> 8 ^
					  crc_table[0][crc_table[t - 1][i] & 0xFF];
}

static uint32_t crc_soft(uint32_t c, const uint8_t *p, size_t n)
{
	for (; n && ((uintptr_t)p & 7); n--)
		c = c >> 8 ^ crc_table[0][(c ^ *p++) & 0xFF];
	for (; n >= 8; n -= 8, p += 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		w = le64toh(w) ^ c;
		c = crc_table[7][w & 0xFF] ^ crc_table[6][w >> 8 & 0xFF] ^
		    crc_table[5][w >> 16 & 0xFF] ^ crc_table[4][w >> 24 & 0xFF] ^
		    crc_table[3][w >> 32 & 0xFF] ^ crc_table[2][w >> 40 & 0xFF] ^
		    crc_table[1][w >> 48 & 0xFF] ^ crc_table[0][w >> 56];
	}
	while (n--)
		c = c >> 8 ^ crc_table[0][(c ^ *p++) & 0xFF];
	return c;
}

#if defined(__x86_64__)
/* The instruction takes 3 cycles and can start one a cycle: three streams
 * over adjacent stripes of STRIPE bytes run at once, and are joined by
 * shifting a stripe's CRC over the bytes after it (crc_shift: the CRC
 * register is linear, so that is a table lookup per byte of it). */
#define STRIPE 512

static uint32_t shift_table[2][4][256]; /* over STRIPE and 2 * STRIPE zero bytes */

static uint32_t crc_shift(int k, uint32_t c)
{
	return shift_table[k][0][c & 0xFF] ^ shift_table[k][1][c >> 8 & 0xFF] ^
	       shift_table[k][2][c >> 16 & 0xFF] ^ shift_table[k][3][c >> 24];
}

static void shift_tables(void)
{
	static const uint8_t zeros[2 * STRIPE];

	for (int k = 0; k < 2; k++)
		for (int b = 0; b < 4; b++)
			for (uint32_t i = 0; i < 256; i++)
				shift_table[k][b][i] = crc_soft(i << (8 * b), zeros,
								(size_t)(k + 1) * STRIPE);
}

__attribute__((target("sse4.2"))) static uint32_t crc_sse42(uint32_t c, const uint8_t *p,
							     size_t n)
{
	uint64_t c0, c1, c2;

	for (; n && ((uintptr_t)p & 7); n--)
		c = __builtin_ia32_crc32qi(c, *p++);
	c0 = c;
	for (; n >= 3 * STRIPE; n -= 3 * STRIPE, p += 3 * STRIPE) {
		c1 = c2 = 0;
		for (size_t i = 0; i < STRIPE; i += 8) {
			uint64_t w0, w1, w2;
			memcpy(&w0, p + i, 8);
			memcpy(&w1, p + STRIPE + i, 8);
			memcpy(&w2, p + 2 * STRIPE + i, 8);
			c0 = __builtin_ia32_crc32di(c0, w0);
			c1 = __builtin_ia32_crc32di(c1, w1);
			c2 = __builtin_ia32_crc32di(c2, w2);
		}
		c0 = crc_shift(1, (uint32_t)c0) ^ crc_shift(0, (uint32_t)c1) ^ (uint32_t)c2;
	}
	for (; n >= 8; n -= 8, p += 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		c0 = __builtin_ia32_crc32di(c0, w);
	}
	c = (uint32_t)c0;
	while (n--)
		c = __builtin_ia32_crc32qi(c, *p++);
	return c;
}
#endif

static uint32_t (*crc_impl)(uint32_t, const uint8_t *, size_t);

static void crc_init(void)
{
	crc_tables();
	crc_impl = crc_soft;
#if defined(__x86_64__)
	if (__builtin_cpu_supports("sse4.2")) {
		shift_tables();
		crc_impl = crc_sse42;
	}
#endif
}

uint32_t zr_crc32c(uint32_t crc, const void *p, size_t n)
{
	pthread_once(&crc_once, crc_init);
	return ~crc_impl(~crc, p, n);
}

uint32_t zr_crc32c_portable(uint32_t crc, const void *p, size_t n)
{
	pthread_once(&crc_once, crc_init);
	return ~crc_soft(~crc, p, n);
}

/* ---- entries ---- */

/* Format 1: offset u64 @0, chunk_id u32 @8, len u32 @12 (FORMAT.md).
 * Format 2 takes 32 bits for the checksum from the offset (40 bits left:
 * chunks of up to 1 TiB) and the chunk id (24 left): its high 24 bits sit
 * above the offset, its low 8 above the chunk id. */
#define OFFSET_MASK (ZR_V2_OFFSET_LIMIT - 1)

void zr_entry_words(const zr_entry *e, unsigned version, uint64_t w[2])
{
	uint32_t chunk = e->chunk_id;

	if (version < 2) {
		w[0] = e->offset;
		w[1] = (uint64_t)chunk | (uint64_t)e->len << 32;
		return;
	}
	chunk = chunk == ZR_CHUNK_EMPTY ? ZR_V2_CHUNK_LIMIT : chunk & ZR_V2_CHUNK_LIMIT;
	w[0] = (e->offset & OFFSET_MASK) | (uint64_t)(e->crc >> 8) << 40;
	w[1] = (uint64_t)chunk | (uint64_t)(e->crc & 0xFF) << 24 | (uint64_t)e->len << 32;
}

void zr_entry_unwords(const uint64_t w[2], unsigned version, zr_entry *e)
{
	e->len = (uint32_t)(w[1] >> 32);
	if (version < 2) {
		e->offset = w[0];
		e->chunk_id = (uint32_t)w[1];
		e->crc = 0;
		return;
	}
	e->offset = w[0] & OFFSET_MASK;
	e->chunk_id = (uint32_t)w[1] & ZR_V2_CHUNK_LIMIT;
	if (e->chunk_id == ZR_V2_CHUNK_LIMIT)
		e->chunk_id = ZR_CHUNK_EMPTY;
	e->crc = (uint32_t)(w[0] >> 40) << 8 | (uint32_t)(w[1] >> 24 & 0xFF);
}

void zr_entry_decode(const uint8_t *p, unsigned version, zr_entry *e)
{
	uint64_t w[2] = {zr_le64(p), zr_le64(p + 8)};

	zr_entry_unwords(w, version, e);
}

void zr_entry_encode(uint8_t *p, unsigned version, const zr_entry *e)
{
	uint64_t w[2];

	zr_entry_words(e, version, w);
	zr_put_le64(p, w[0]);
	zr_put_le64(p + 8, w[1]);
}

/* ---- per-thread zlib streams ---- */

struct zstreams {
	z_stream inf, def;
	bool inf_ok, def_ok;
};

static pthread_key_t zkey;
static pthread_once_t zonce = PTHREAD_ONCE_INIT;

static void zstreams_free(void *p)
{
	struct zstreams *z = p;

	if (z->inf_ok)
		inflateEnd(&z->inf);
	if (z->def_ok)
		deflateEnd(&z->def);
	free(z);
}

static void zkey_init(void)
{
	pthread_key_create(&zkey, zstreams_free);
}

static struct zstreams *zstreams_get(void)
{
	struct zstreams *z;

	pthread_once(&zonce, zkey_init);
	z = pthread_getspecific(zkey);
	if (!z) {
		z = calloc(1, sizeof *z);
		if (z)
			pthread_setspecific(zkey, z);
	}
	return z;
}

size_t zr_flate_bound(size_t n)
{
	return ZR_FLATE_HDR + compressBound((uLong)n);
}

int zr_flate_encode(const void *src, size_t n, uint8_t *dst, size_t cap, size_t *out_len)
{
	struct zstreams *z = zstreams_get();
	z_stream *s;
	int zrc;

	RETURN_IF(!z, -ENOMEM, "out of memory");
	s = &z->def;
	if (!z->def_ok) {
		memset(s, 0, sizeof *s);
		RETURN_IF(deflateInit(s, Z_DEFAULT_COMPRESSION) != Z_OK, -ENOMEM,
			  "zlib: deflateInit failed");
		z->def_ok = true;
	} else {
		deflateReset(s);
	}
	zr_put_le64(dst, n);
	s->next_in = (Bytef *)(uintptr_t)src;
	s->next_out = dst + ZR_FLATE_HDR;
	s->avail_out = (uInt)(cap - ZR_FLATE_HDR);
	/* avail_in is 32-bit: feed large records in pieces */
	do {
		size_t piece = n > (1u << 30) ? (1u << 30) : n;
		s->avail_in = (uInt)piece;
		n -= piece;
		zrc = deflate(s, n ? Z_NO_FLUSH : Z_FINISH);
		n += s->avail_in;
		RETURN_IF(zrc == Z_STREAM_ERROR, -EIO, "zlib: deflate failed");
	} while (zrc != Z_STREAM_END && s->avail_out > 0);
	RETURN_IF(zrc != Z_STREAM_END, -EOVERFLOW, "zlib: output buffer too small");
	*out_len = ZR_FLATE_HDR + s->total_out;
	return 0;
}

int zr_flate_decode(const uint8_t *phys, size_t phys_len, void *dst, uint64_t logical_len)
{
	struct zstreams *z = zstreams_get();
	z_stream *s;
	int zrc;

	if (!z)
		return -ENOMEM;
	if (phys_len < ZR_FLATE_HDR || zr_le64(phys) != logical_len)
		return ZR_ECORRUPT;
	s = &z->inf;
	if (!z->inf_ok) {
		memset(s, 0, sizeof *s);
		if (inflateInit(s) != Z_OK)
			return -ENOMEM;
		z->inf_ok = true;
	} else {
		inflateReset(s);
	}
	s->next_in = (Bytef *)(uintptr_t)(phys + ZR_FLATE_HDR);
	s->next_out = dst;
	s->avail_in = s->avail_out = 0;
	uint64_t in_left = phys_len - ZR_FLATE_HDR, out_left = logical_len;
	const uint64_t piece = 1u << 30; /* avail_* are 32-bit: feed in pieces */
	do {
		if (s->avail_in == 0 && in_left) {
			s->avail_in = (uInt)(in_left < piece ? in_left : piece);
			in_left -= s->avail_in;
		}
		if (s->avail_out == 0 && out_left) {
			s->avail_out = (uInt)(out_left < piece ? out_left : piece);
			out_left -= s->avail_out;
		}
		zrc = inflate(s, Z_NO_FLUSH);
	} while (zrc == Z_OK);
	/* exactly logical_len bytes, a complete stream, and nothing after it */
	if (zrc != Z_STREAM_END || in_left || s->avail_in || out_left || s->avail_out)
		return ZR_ECORRUPT;
	return 0;
}

int zr_flate_copy(int in_fd, uint64_t off, uint64_t phys_len, uint64_t logical_len, int out_fd,
		  uint32_t *crc)
{
	uint8_t *in = malloc(ZR_COPY_PIECE), *out = malloc(ZR_COPY_PIECE), hdr[ZR_FLATE_HDR];
	uint64_t in_left, done = 0;
	z_stream s;
	int zrc = Z_OK, rc;

	memset(&s, 0, sizeof s);
	if (!in || !out || inflateInit(&s) != Z_OK) {
		free(in);
		free(out);
		return -ENOMEM;
	}
	rc = phys_len < ZR_FLATE_HDR ? ZR_ECORRUPT : zr_read_full(in_fd, hdr, ZR_FLATE_HDR, off);
	if (rc == 0 && zr_le64(hdr) != logical_len)
		rc = ZR_ECORRUPT;
	if (crc)
		*crc = zr_crc32c(0, hdr, ZR_FLATE_HDR);
	in_left = phys_len - ZR_FLATE_HDR;
	off += ZR_FLATE_HDR;
	while (rc == 0 && zrc != Z_STREAM_END) {
		if (s.avail_in == 0) {
			uInt n = (uInt)(in_left < ZR_COPY_PIECE ? in_left : ZR_COPY_PIECE);
			if (n == 0) {
				rc = ZR_ECORRUPT; /* the stream ends early */
				break;
			}
			if ((rc = zr_read_full(in_fd, in, n, off)) < 0)
				break;
			if (crc)
				*crc = zr_crc32c(*crc, in, n);
			s.next_in = in;
			s.avail_in = n;
			in_left -= n;
			off += n;
		}
		s.next_out = out;
		s.avail_out = ZR_COPY_PIECE;
		zrc = inflate(&s, Z_NO_FLUSH);
		if (zrc != Z_OK && zrc != Z_STREAM_END) {
			rc = ZR_ECORRUPT;
			break;
		}
		size_t got = ZR_COPY_PIECE - s.avail_out;
		if (done + got > logical_len)
			rc = ZR_ECORRUPT;
		else if (got && (rc = zr_write_full(out_fd, out, got, done)) == 0)
			done += got;
	}
	/* exactly logical_len bytes, a complete stream, and nothing after it */
	if (rc == 0 && (done != logical_len || in_left || s.avail_in))
		rc = ZR_ECORRUPT;
	inflateEnd(&s);
	free(in);
	free(out);
	return rc;
}

int zr_logical_len(const zr_fstate *f, const zr_entry *e, const uint8_t *bytes, uint64_t *out)
{
	if (e->len == 0) {
		*out = 0;
		return 0;
	}
	if (f->def.spec.compress == ZR_RAW) {
		*out = e->len;
		return 0;
	}
	if (e->len < ZR_FLATE_HDR + 8) /* header + the smallest zlib stream */
		return ZR_ECORRUPT;
	*out = zr_le64(bytes);
	/* zlib cannot expand by more than ~1032:1; a larger claim is corrupt */
	if (*out > (uint64_t)e->len * 1032 + 64)
		return ZR_ECORRUPT;
	return 0;
}
