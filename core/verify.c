/*
 * verify.c - check a dataset completely: zr_verify().
 *
 * Every entry of every field is checked against its chunk (the chunk exists,
 * the bytes lie within its committed data, a fixed-shape record has the
 * right size), every value of a format-2 dataset must give the CRC-32C its
 * entry holds, and every flate record is inflated and must give exactly
 * its stored logical length with a valid Adler-32. Problems are reported one by
 * one, with field, id and reason; the count is returned.
 */
#include "store_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct vstate {
	zr_verify_cb cb;
	void *ctx;
	int64_t problems;
};

static void report(struct vstate *v, const char *field, uint64_t id, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void report(struct vstate *v, const char *field, uint64_t id, const char *fmt, ...)
{
	char reason[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof reason, fmt, ap);
	va_end(ap);
	v->problems++;
	if (v->cb)
		v->cb(v->ctx, field, id, reason);
}

/* zr_errmsg() is "<path>: field '<f>' record <id>: reason": keep the reason. */
static const char *reason_of(const char *msg)
{
	const char *p = strstr(msg, " record ");

	if (p && (p = strchr(p + 8, ':')))
		return p + 2;
	return msg;
}

/* The checks of one record's stored bytes (mapped; its chunk pinned). */
static int check_bytes(zr_dataset *ds, unsigned fi, uint64_t id, const zr_entry *e,
		       const uint8_t *bytes, struct vstate *v, uint8_t **buf, size_t *cap)
{
	zr_fstate *f = &ds->fields[fi];
	uint64_t logical;
	uint32_t crc;

	if (ds->version >= 2 && (crc = zr_crc32c(0, bytes, e->len)) != e->crc) {
		/* the checks below would only say the same, less precisely */
		report(v, f->def.name, id,
		       "the %u bytes in chunk %u at %llu do not match their checksum (CRC-32C "
		       "%08x, the entry says %08x): the bytes or their entry changed since they "
		       "were written",
		       e->len, e->chunk_id, (unsigned long long)e->offset, crc, e->crc);
		return 0;
	}
	if (zr_logical_len(f, e, bytes, &logical) < 0) {
		report(v, f->def.name, id, "flate header claims an impossible length");
		return 0;
	}
	if (f->record_size && logical != f->record_size)
		report(v, f->def.name, id, "%llu bytes, but records of this shape are %llu",
		       (unsigned long long)logical, (unsigned long long)f->record_size);
	if (f->def.spec.compress != ZR_FLATE)
		return 0;
	if (logical > *cap) {
		uint8_t *b = realloc(*buf, logical);
		RETURN_IF(!b, -ENOMEM, "out of memory (%llu bytes)", (unsigned long long)logical);
		*buf = b;
		*cap = logical;
	}
	if (zr_flate_decode(bytes, e->len, *buf, logical) < 0)
		report(v, f->def.name, id,
		       "flate stream in chunk %u at %llu does not inflate to %llu bytes",
		       e->chunk_id, (unsigned long long)e->offset, (unsigned long long)logical);
	return 0;
}

static int verify_field(zr_dataset *ds, unsigned fi, struct vstate *v, uint8_t **buf,
			size_t *cap)
{
	zr_fstate *f = &ds->fields[fi];
	uint64_t len = zr_length(ds);

	for (uint64_t id = 0; id < len; id++) {
		const uint8_t *bytes;
		zr_chunk *held;
		zr_entry e;
		int rc;

		zr_progress_tell(ds, fi * len + id, ds->nfields * len);
		if (zr_entry_get(ds, fi, id, &e) < 0) {
			report(v, f->def.name, id, "%s", reason_of(zr_errmsg(ds)));
			continue;
		}
		if (zr_entry_missing(&e))
			continue;
		if (e.len == 0) {
			if (f->record_size)
				report(v, f->def.name, id, "empty, but records of this shape are %llu bytes",
				       (unsigned long long)f->record_size);
			continue;
		}
		if (zr_entry_locate(ds, fi, id, &e, &bytes, &held) < 0) {
			report(v, f->def.name, id, "%s", reason_of(zr_errmsg(ds)));
			continue;
		}
		rc = check_bytes(ds, fi, id, &e, bytes, v, buf, cap);
		zr_chunk_unuse(held);
		FORWARD_IF_ERR(rc);
	}
	return 0;
}

int64_t zr_verify(zr_dataset *ds, zr_verify_cb cb, void *ctx)
{
	struct vstate v = {cb, ctx, 0};
	uint8_t *buf = NULL;
	size_t cap = 0;
	int rc = 0;

	for (unsigned f = 0; f < ds->nfields && rc == 0; f++)
		rc = verify_field(ds, f, &v, &buf, &cap);
	if (rc == 0)
		zr_progress_tell(ds, ds->nfields * zr_length(ds), ds->nfields * zr_length(ds));
	free(buf);
	return rc < 0 ? rc : v.problems;
}
