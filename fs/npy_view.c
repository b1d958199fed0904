/*
 * npy_view.c - the .npy views: a fixed-shape field's records as one array, for
 * the whole field (/FIELD.npy) and for a batch (.batches/.../FIELD.npy).
 *
 * A view is the core's zr_npy_header() followed by its rows in C order, so
 * numpy.load() and numpy.load(mmap_mode='r') read it as it lies. Row i is
 * record i's bytes when the record has exactly the row's size, and zeros
 * otherwise (missing, or of another length). Both views are served here
 * from rows their callers locate (records.c, batch_files.c): chunk file
 * ranges with their mappings for raw fields, memory for inflated ones.
 */
#include "zrfs_i.h"

#include <assert.h>
#include <errno.h>

static const uint8_t zeros[ZRFS_ZEROS];

void zrfs_npy_span(const struct zrfs_npy *h, uint64_t pos, uint64_t end, uint64_t *lo,
		   uint64_t *hi)
{
	uint64_t at = h->hdr_len, rsz = h->row_size;

	assert(rsz > 0);
	*lo = pos > at ? (pos - at) / rsz : 0;
	*hi = end > at ? (end - at) / rsz + ((end - at) % rsz != 0) : 0;
	*lo = *lo < h->rows ? *lo : h->rows;
	*hi = *hi < h->rows ? *hi : h->rows;
	*hi = *hi > *lo ? *hi : *lo;
}

int zrfs_npy_pieces(struct zrfs_pieces *p, const struct zrfs_npy *h, const struct zrfs_row *rows,
		    uint64_t lo, uint64_t pos, uint64_t end)
{
	uint64_t at = h->hdr_len, rsz = h->row_size;
	int rc = 0;

	if (end > h->size)
		end = h->size;
	if (pos < at && pos < end) {
		uint64_t stop = at < end ? at : end;
		rc = zrfs_pieces_add(p, -1, 0, h->hdr + pos, stop - pos);
		pos = stop;
	}
	while (pos < end && rc == 0) {
		uint64_t i = (pos - at) / rsz, in = (pos - at) % rsz;
		uint64_t n = rsz - in < end - pos ? rsz - in : end - pos;
		const struct zrfs_row *r = &rows[i - lo];
		if (r->present && r->len == rsz) {
			rc = zrfs_pieces_add(p, r->fd, r->pos + in,
					     r->mem ? (const uint8_t *)r->mem + in : NULL, n);
		} else {
			for (uint64_t z = 0; z < n && rc == 0; z += sizeof zeros)
				rc = zrfs_pieces_add(p, -1, 0, zeros,
						     n - z < sizeof zeros ? n - z : sizeof zeros);
		}
		pos += n;
	}
	return rc;
}
