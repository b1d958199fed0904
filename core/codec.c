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
 */
#include "store_i.h"

#include <errno.h>
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

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Layout of an entry (FORMAT.md): offset u64 @0, chunk_id u32 @8, len u32 @12. */
void zr_entry_decode(const uint8_t *p, zr_entry *e)
{
	e->offset = zr_le64(p);
	e->chunk_id = le32(p + 8);
	e->len = le32(p + 12);
}

void zr_entry_encode(uint8_t *p, const zr_entry *e)
{
	zr_put_le64(p, e->offset);
	put_le32(p + 8, e->chunk_id);
	put_le32(p + 12, e->len);
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

int zr_flate_copy(int in_fd, uint64_t off, uint64_t phys_len, uint64_t logical_len, int out_fd)
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
