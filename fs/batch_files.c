/*
 * batch_files.c - where a batch file's bytes are assembled: the files of a
 * step directory of /.batches (see batch_i.h), their sizes and contents.
 *
 * Batch k of epoch e is built directly from the sampler (O(B)), a part of
 * it without the rest (zs_batch_span). A raw field's batch is never
 * assembled: its B + 1 offsets are made once into the shared bounded cache
 * (the <field>.offsets file, which sizes <field>), and a read is answered
 * with the pieces of the chunk files under it, sent from the chunk
 * mappings (reply.c). So a request takes memory for what it reads, and a
 * batch whose offsets do not fit the cache is refused (EFBIG), however
 * large a batch a spec asks for. A flate field's batch is
 * assembled once with the core's io_uring batch reader (one submission,
 * records inflated) into the shared bounded cache (cache.c), as a blob of
 * B + 1 little-endian offsets followed by the bytes, from which <field>,
 * <field>.offsets and <field>.npy are served. Both kinds of <field>.npy are
 * made by npy_view.c from rows located here.
 *
 * Sections: ids and info.json, raw batches, flate batches, sizes and reads.
 */
#include "batch_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- ids and info.json ---- */

/* @n values as little-endian u64s at @dst. */
static void put_le64s(uint8_t *dst, const uint64_t *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		for (int k = 0; k < 8; k++)
			dst[i * 8 + (size_t)k] = (uint8_t)(v[i] >> (8 * k));
}

static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int k = 7; k >= 0; k--)
		v = v << 8 | p[k];
	return v;
}

#define SPAN 4096 /* ids made at a time when a request needs many */

/* Ids @from .. @from + @count - 1 of step @at into a malloc'd array of
 * *n (cut to the batch). 0, -ENOMEM, -ENOENT. */
static int step_ids(const struct batch_step *at, uint64_t from, uint64_t count, uint64_t **ids,
		    size_t *n)
{
	uint64_t size = zs_batch_size(at->s, at->step);
	int64_t got;

	count = from < size ? (size - from < count ? size - from : count) : 0;
	*ids = malloc((count ? count : 1) * sizeof **ids);
	if (!*ids)
		return -ENOMEM;
	got = zs_batch_span(at->s, at->epoch, at->step, (uint32_t)from, (uint32_t)count, *ids);
	if (got < 0) {
		free(*ids);
		*ids = NULL;
		return -ENOENT;
	}
	*n = (size_t)got;
	return 0;
}

static int info_json(const struct batch_step *at, char *buf, size_t cap)
{
	const zs_spec *sp = zs_sampler_spec(at->s);
	char canon[ZS_SPEC_MAX + 1];

	zs_spec_format(sp, canon, sizeof canon);
	return snprintf(buf, cap,
			"{\n  \"spec\": \"%s\",\n  \"canonical\": \"%s\",\n  \"epoch\": %llu,\n"
			"  \"step\": %llu,\n  \"steps\": %llu,\n  \"rank\": %u,\n  \"world\": %u,\n"
			"  \"seed\": %llu,\n  \"seed_str\": \"%llu\",\n  \"batch_size\": %u,\n"
			"  \"records\": %llu,\n  \"position_after\": %llu\n}\n",
			at->spec, canon, (unsigned long long)at->epoch, (unsigned long long)at->step,
			(unsigned long long)zs_steps(at->s), sp->rank, sp->world,
			(unsigned long long)zs_batch_seed(at->s, at->epoch, at->step),
			(unsigned long long)zs_batch_seed(at->s, at->epoch, at->step),
			zs_batch_size(at->s, at->step),
			(unsigned long long)(sp->hi - sp->lo), /* the epoch's records */
			/* every position of the epoch's order before it handed out by
			 * this step of every rank: what a job saves to resume (from=) */
			(unsigned long long)zs_position_after(at->s, at->step));
}

/* Reply to a read of [@off, @off + @size) of step @at's ids file: only
 * the ids under it are made. */
static void reply_ids(fuse_req_t req, const struct batch_step *at, size_t size, off_t off)
{
	uint64_t first = (uint64_t)off / 8, skip = (uint64_t)off % 8, *ids;
	size_t n;
	uint8_t *le;
	int rc = step_ids(at, first, (skip + size + 7) / 8, &ids, &n);

	if (rc < 0) {
		zrfs_reply_err(req, rc);
		return;
	}
	if (!(le = malloc(n * 8 + 1))) {
		zrfs_reply_err(req, -ENOMEM);
	} else {
		put_le64s(le, ids, n);
		zrfs_reply_slice(req, le, (uint64_t)n * 8, size, (off_t)skip);
		free(le);
	}
	free(ids);
}

/* ---- raw batches: pieces of the chunk files, never assembled ---- */

struct assemble {
	struct zrfs *fs;
	struct zrfs_view *v;
	const struct batch_step *at;
	unsigned field;
};

/* The cache's loader of a raw field's offsets: B + 1 little-endian u64s
 * (the <field>.offsets file), made SPAN ids at a time. */
static int load_offsets(void *ctx, uint8_t **data, uint64_t *len)
{
	struct assemble *a = ctx;
	struct zrfs *fs = a->fs;
	uint64_t n = zs_batch_size(a->at->s, a->at->step), pos = 0;
	struct zrfs_row *rows = NULL;
	uint64_t *ids = NULL;
	int rc = 0;

	*data = NULL;
	if ((n + 1) * 8 > fs->opts.cache_bytes)
		return zrfs_too_big(fs, (n + 1) * 8);
	if (!(rows = malloc(SPAN * sizeof *rows)) ||
	    !(*data = zrfs_cache_alloc(fs->cache, (n + 1) * 8)))
		rc = -ENOMEM;
	else
		put_le64s(*data, &pos, 1);
	for (uint64_t from = 0; rc == 0 && from < n; from += SPAN) {
		size_t k;
		if ((rc = step_ids(a->at, from, SPAN, &ids, &k)) == 0 &&
		    (rc = zrfs_records_stat(fs, a->v, a->field, ids, k, rows)) == 0)
			for (size_t i = 0; i < k; i++) {
				pos += rows[i].len;
				put_le64s(*data + (from + i + 1) * 8, &pos, 1);
			}
		free(ids);
	}
	free(rows);
	if (rc < 0) {
		zrfs_cache_free(fs->cache, *data);
		*data = NULL;
		return rc;
	}
	*len = (n + 1) * 8;
	return 0;
}

/* Raw field @field's offsets of step @at, through the cache: release after use. */
static int get_offsets(struct zrfs *fs, struct zrfs_view *v, const struct batch_step *at,
		       unsigned field, struct zrfs_cached **e, const uint8_t **data)
{
	struct assemble a = {fs, v, at, field};
	uint64_t len;

	return zrfs_cache_get(fs->cache, batch_key(at->slot, at->step, field), v->gen, load_offsets,
			      &a, e, data, &len);
}

/* The first record (of @n, offsets @offs) whose bytes end after @pos:
 * records before it lie wholly before @pos. */
static uint64_t first_after(const uint8_t *offs, uint64_t n, uint64_t pos)
{
	uint64_t lo = 0, hi = n;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (get_le64(offs + (mid + 1) * 8) <= pos)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Bytes [@pos, @end) of the <field> file of raw field @field's batch of
 * step @at, whose offsets are @offs: the pieces of the records under them
 * in @p, mapped (@g keeps them). Only the ids under the range are made,
 * SPAN at a time, and only records with bytes take memory: a request
 * takes memory for what it reads. */
static int raw_data_pieces(struct zrfs *fs, struct zrfs_view *v, const struct batch_step *at,
			   unsigned field, const uint8_t *offs, uint64_t pos, uint64_t end,
			   struct zrfs_pieces *p, zr_batch **g)
{
	uint64_t n = zs_batch_size(at->s, at->step), lo, hi, *ids = NULL, *want = NULL;
	uint64_t *place = NULL;
	struct zrfs_row *rows = NULL;
	size_t nwant = 0, cap = 0;
	int rc = 0;

	*g = NULL;
	if (end > get_le64(offs + n * 8))
		end = get_le64(offs + n * 8);
	if (pos >= end)
		return 0;
	lo = first_after(offs, n, pos);
	for (hi = lo; hi < n && get_le64(offs + hi * 8) < end; hi++)
		;
	for (uint64_t from = lo; rc == 0 && from < hi; from += SPAN) {
		size_t k;
		if ((rc = step_ids(at, from, hi - from < SPAN ? hi - from : SPAN, &ids, &k)) < 0)
			break;
		for (size_t i = 0; rc == 0 && i < k; i++) {
			uint64_t b = from + i;
			if (get_le64(offs + (b + 1) * 8) == get_le64(offs + b * 8))
				continue; /* missing or empty: no bytes */
			if (nwant == cap) {
				uint64_t *w2, *p2;
				cap = cap ? 2 * cap : 64;
				w2 = realloc(want, cap * sizeof *want);
				want = w2 ? w2 : want;
				p2 = realloc(place, cap * sizeof *place);
				place = p2 ? p2 : place;
				if (!w2 || !p2) {
					rc = -ENOMEM;
					break;
				}
			}
			want[nwant] = ids[i];
			place[nwant++] = b;
		}
		free(ids);
		ids = NULL;
	}
	if (rc == 0 && nwant)
		rc = (rows = malloc(nwant * sizeof *rows)) == NULL
			     ? -ENOMEM
			     : zrfs_records_locate(fs, v, field, want, nwant, rows, g);
	for (size_t j = 0; rc == 0 && j < nwant; j++) {
		const struct zrfs_row *r = &rows[j];
		uint64_t o0 = get_le64(offs + place[j] * 8), o1 = get_le64(offs + (place[j] + 1) * 8);
		uint64_t from = pos > o0 ? pos : o0, to = end < o1 ? end : o1;
		if (r->len != o1 - o0) /* not the record the offsets were made from */
			rc = -EIO;
		else
			rc = zrfs_pieces_add(p, r->fd, r->pos + (from - o0),
					     r->mem ? (const uint8_t *)r->mem + (from - o0) : NULL,
					     to - from);
	}
	free(rows);
	free(want);
	free(place);
	return rc;
}

/* The pieces of bytes [@pos, @end) of the <field>.npy file of a raw batch
 * of @n records; @h receives the header the pieces point into. Only the
 * rows under the range are made. */
static int raw_npy_pieces(struct zrfs *fs, struct zrfs_view *v, const struct batch_step *at,
			  unsigned field, uint64_t pos, uint64_t end, struct zrfs_npy *h,
			  struct zrfs_pieces *p, zr_batch **g)
{
	const struct zrfs_field *f = &fs->fields[field];
	uint64_t n = zs_batch_size(at->s, at->step), lo, hi, *ids = NULL;
	struct zrfs_row *rows = NULL;
	size_t k = 0;
	int rc = zrfs_npy_header(f->spec, n, f->record_size, h);

	*g = NULL;
	if (rc < 0)
		return rc;
	zrfs_npy_span(h, pos, end, &lo, &hi);
	if ((rc = step_ids(at, lo, hi - lo, &ids, &k)) < 0)
		return rc;
	if (!(rows = malloc((k + 1) * sizeof *rows)))
		rc = -ENOMEM;
	if (rc == 0)
		rc = zrfs_records_locate(fs, v, field, ids, k, rows, g);
	if (rc == 0)
		rc = zrfs_npy_pieces(p, h, rows, lo, pos, end);
	free(rows);
	free(ids);
	return rc;
}

/* Reply to a read of part @part of raw field @field's batch of step @at. */
static void read_raw(fuse_req_t req, struct zrfs *fs, struct zrfs_view *v,
		     const struct batch_step *at, unsigned field, enum batch_part part, size_t size,
		     off_t off, bool ahead)
{
	uint64_t pos = (uint64_t)off, n = zs_batch_size(at->s, at->step);
	struct zrfs_pieces p = {0};
	struct zrfs_cached *e = NULL;
	const uint8_t *offs = NULL;
	struct zrfs_npy h;
	zr_batch *g = NULL;
	int rc = part == PART_NPY ? 0 : get_offsets(fs, v, at, field, &e, &offs);

	if (rc == 0 && part == PART_OFFSETS) {
		zrfs_reply_slice(req, offs, (n + 1) * 8, size, off);
		goto out;
	}
	if (rc == 0)
		rc = zrfs_pieces_init(&p, 16);
	if (rc == 0 && part == PART_DATA)
		rc = raw_data_pieces(fs, v, at, field, offs, pos, pos + size, &p, &g);
	else if (rc == 0)
		rc = raw_npy_pieces(fs, v, at, field, pos, pos + size, &h, &p, &g);
	if (rc == 0)
		zrfs_reply_pieces(req, fs, v, &p, ahead);
	else
		zrfs_reply_err(req, rc);
out:
	zr_batch_release(g);
	zrfs_pieces_free(&p);
	if (e)
		zrfs_cache_release(fs->cache, e);
}

#define AHEAD_WINDOW (8u << 20) /* bytes of a batch asked for at a time */

void zrfs_batch_read_ahead(struct zrfs *fs, struct zrfs_view *v, const struct batch_step *at,
			   unsigned field)
{
	uint64_t n = zs_batch_size(at->s, at->step), total;
	struct zrfs_cached *e;
	const uint8_t *offs;

	if (get_offsets(fs, v, at, field, &e, &offs) < 0)
		return;
	total = get_le64(offs + n * 8);
	for (uint64_t pos = 0; pos < total; pos += AHEAD_WINDOW) {
		struct zrfs_pieces p = {0};
		zr_batch *g = NULL;
		if (zrfs_pieces_init(&p, 16) == 0 &&
		    raw_data_pieces(fs, v, at, field, offs, pos, pos + AHEAD_WINDOW, &p, &g) == 0)
			zrfs_read_ahead(fs, &p);
		zr_batch_release(g);
		zrfs_pieces_free(&p);
	}
	zrfs_cache_release(fs->cache, e);
}

/* ---- flate batches: assembled once into the cache ---- */

/* zr_batch_bytes, with ids of UINT64_MAX (records the view does not
 * have) counted as missing. */
static int batch_bytes(zr_dataset *ds, unsigned field, const uint64_t *ids, size_t n,
		       uint64_t *total)
{
	*total = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t one;
		int rc = ids[i] == UINT64_MAX ? 0 : zr_batch_bytes(ds, field, &ids[i], 1, &one);
		if (rc < 0)
			return rc;
		*total += ids[i] == UINT64_MAX ? 0 : one;
	}
	return 0;
}

/* zr_reader_read of the present ids (not UINT64_MAX), the others empty:
 * @offs gets n + 1 offsets into @dst. */
static int rows_read_present(zr_reader *r, unsigned field, const uint64_t *ids, size_t n, uint8_t *dst,
			uint64_t cap, uint64_t *offs)
{
	size_t k = 0;
	uint64_t *have = malloc((n + 1) * sizeof *have), *o = malloc((n + 1) * sizeof *o);
	int rc = have && o ? 0 : -ENOMEM;

	for (size_t i = 0; rc == 0 && i < n; i++)
		if (ids[i] != UINT64_MAX)
			have[k++] = ids[i];
	if (rc == 0)
		rc = zr_reader_read(r, field, have, k, dst, cap, o);
	for (size_t i = 0, j = 0; rc == 0 && i <= n; i++) {
		offs[i] = o[j];
		j += i < n && ids[i] != UINT64_MAX;
	}
	free(have);
	free(o);
	return rc;
}

/* The cache's loader of a flate field's blob: (B + 1) little-endian u64
 * offsets, then the inflated records. */
static int load_blob(void *ctx, uint8_t **data, uint64_t *len)
{
	struct assemble *a = ctx;
	struct zrfs *fs = a->fs;
	zr_dataset *ds = a->v->ds;
	uint64_t *ids = NULL, *offs = NULL, total = 0;
	zr_reader *r;
	size_t n = zs_batch_size(a->at->s, a->at->step);
	int rc;

	*data = NULL;
	if ((n + 1) * 8 > fs->opts.cache_bytes) /* before anything is made for it */
		return zrfs_too_big(fs, (n + 1) * 8);
	rc = step_ids(a->at, 0, n, &ids, &n);
	/* ids the view no longer has read as missing: the reader must not see them */
	for (size_t i = 0; rc == 0 && i < n; i++)
		if (ids[i] >= a->v->n)
			ids[i] = UINT64_MAX;
	if (rc == 0)
		rc = batch_bytes(ds, a->field, ids, n, &total);
	if (rc == 0 && (n + 1) * 8 + total > fs->opts.cache_bytes) {
		free(ids);
		return zrfs_too_big(fs, (n + 1) * 8 + total);
	}
	if (rc == 0)
		rc = zrfs_scratch_reader(ds, &r);
	if (rc == 0) {
		offs = malloc((n + 1) * sizeof *offs);
		*data = zrfs_cache_alloc(fs->cache, (n + 1) * 8 + total + 1);
		if (!offs || !*data)
			rc = -ENOMEM;
		if (rc == 0)
			rc = rows_read_present(r, a->field, ids, n, *data + (n + 1) * 8, total, offs);
		if (rc == 0)
			put_le64s(*data, offs, n + 1);
		*len = (n + 1) * 8 + total;
	}
	if (rc < 0) {
		if (zrfs_log_admit())
			fuse_log(FUSE_LOG_ERR, "zrfs: batch %llu of epoch %llu, field '%s': %s (%s)\n",
				 (unsigned long long)a->at->step, (unsigned long long)a->at->epoch,
				 fs->fields[a->field].spec->name, zr_strerror(rc), zr_errmsg(ds));
		zrfs_cache_free(fs->cache, *data);
		*data = NULL;
	}
	free(offs);
	free(ids);
	return rc;
}

/* Flate field @field's blob of step @at, through the cache: release after use. */
static int get_blob(struct zrfs *fs, struct zrfs_view *v, const struct batch_step *at,
		    unsigned field, struct zrfs_cached **e, const uint8_t **data, uint64_t *len)
{
	struct assemble a = {fs, v, at, field};

	return zrfs_cache_get(fs->cache, batch_key(at->slot, at->step, field), v->gen, load_blob, &a,
			      e, data, len);
}

int zrfs_batch_assemble(struct zrfs *fs, struct zrfs_view *v, const struct batch_step *at,
			unsigned field)
{
	struct zrfs_cached *e;
	const uint8_t *data;
	uint64_t len;
	int rc = get_blob(fs, v, at, field, &e, &data, &len);

	if (rc == 0)
		zrfs_cache_release(fs->cache, e);
	return rc;
}

/* Reply with [off, off + size) of the .npy view of a flate field's batch,
 * from its blob of @n records: rows in the blob's memory. */
static void reply_blob_npy(fuse_req_t req, struct zrfs *fs, struct zrfs_view *v, unsigned field,
			   const uint8_t *blob, size_t n, size_t size, off_t off)
{
	const struct zrfs_field *f = &fs->fields[field];
	const uint8_t *bytes = blob + (n + 1) * 8;
	uint64_t pos = (uint64_t)off, lo = 0, hi = 0;
	struct zrfs_pieces p = {0};
	struct zrfs_row *rows = NULL;
	struct zrfs_npy h;
	int rc = zrfs_npy_header(f->spec, n, f->record_size, &h);

	if (rc == 0) {
		zrfs_npy_span(&h, pos, pos + size, &lo, &hi);
		rows = malloc((hi - lo + 1) * sizeof *rows);
		rc = rows && zrfs_pieces_init(&p, 2 + hi - lo) == 0 ? 0 : -ENOMEM;
	}
	for (uint64_t i = lo; rc == 0 && i < hi; i++) {
		uint64_t o0 = get_le64(blob + i * 8), o1 = get_le64(blob + (i + 1) * 8);
		rows[i - lo] = (struct zrfs_row){bytes + o0, -1, 0, o1 - o0, o1 > o0};
	}
	if (rc == 0)
		rc = zrfs_npy_pieces(&p, &h, rows, lo, pos, pos + size);
	if (rc == 0)
		zrfs_reply_pieces(req, fs, v, &p, true);
	else
		zrfs_reply_err(req, rc);
	zrfs_pieces_free(&p);
	free(rows);
}

/* Reply to a read of part @part of flate field @field's batch of step @at. */
static void batch_read_flate(fuse_req_t req, struct zrfs *fs, struct zrfs_view *v,
		       const struct batch_step *at, unsigned field, enum batch_part part,
		       size_t size, off_t off)
{
	size_t n = zs_batch_size(at->s, at->step);
	uint64_t head = ((uint64_t)n + 1) * 8, len;
	struct zrfs_cached *e;
	const uint8_t *data;
	int rc = get_blob(fs, v, at, field, &e, &data, &len);

	if (rc < 0) {
		zrfs_reply_err(req, rc);
		return;
	}
	if (part == PART_DATA)
		zrfs_reply_slice(req, data + head, len - head, size, off);
	else if (part == PART_OFFSETS)
		zrfs_reply_slice(req, data, head, size, off);
	else
		reply_blob_npy(req, fs, v, field, data, n, size, off);
	zrfs_cache_release(fs->cache, e);
}

/* ---- sizes and reads ---- */

static int field_file_size(struct zrfs *fs, struct zrfs_view *v, const struct batch_step *at,
			   unsigned field, enum batch_part part, uint64_t *size)
{
	const struct zrfs_field *f = &fs->fields[field];
	uint64_t n = zs_batch_size(at->s, at->step);
	struct zrfs_npy h;
	int rc = 0;

	if (part == PART_OFFSETS) {
		*size = (n + 1) * 8;
	} else if (part == PART_NPY) {
		rc = zrfs_npy_header(f->spec, n, f->record_size, &h);
		*size = h.size;
	} else if (f->whole) {
		struct zrfs_cached *e;
		const uint8_t *data;
		if ((rc = get_blob(fs, v, at, field, &e, &data, size)) == 0) {
			*size -= (n + 1) * 8;
			zrfs_cache_release(fs->cache, e);
		}
	} else {
		struct zrfs_cached *e;
		const uint8_t *offs;
		if ((rc = get_offsets(fs, v, at, field, &e, &offs)) == 0) {
			*size = get_le64(offs + n * 8);
			zrfs_cache_release(fs->cache, e);
		}
	}
	return rc;
}

int zrfs_batch_file_size(struct zrfs *fs, struct zrfs_view *v, const struct batch_step *at,
			 unsigned kind, uint64_t *size)
{
	char info[1024];

	if (kind == STEP_IDS) {
		*size = (uint64_t)zs_batch_size(at->s, at->step) * 8;
		return 0;
	}
	if (kind == STEP_INFO) {
		*size = (uint64_t)info_json(at, info, sizeof info);
		return 0;
	}
	return field_file_size(fs, v, at, kind_field(kind), kind_part(kind), size);
}

void zrfs_batch_file_read(fuse_req_t req, struct zrfs *fs, struct zrfs_view *v,
			  const struct batch_step *at, unsigned kind, size_t size, off_t off,
			  bool ahead)
{
	if (kind == STEP_IDS) {
		reply_ids(req, at, size, off);
	} else if (kind == STEP_INFO) {
		char info[1024];
		int n = info_json(at, info, sizeof info);
		zrfs_reply_slice(req, info, (uint64_t)n, size, off);
	} else if (fs->fields[kind_field(kind)].whole) {
		batch_read_flate(req, fs, v, at, kind_field(kind), kind_part(kind), size, off);
	} else {
		read_raw(req, fs, v, at, kind_field(kind), kind_part(kind), size, off, ahead);
	}
}

void zrfs_batch_uncache(struct zrfs *fs, const struct batch_step *at)
{
	for (unsigned f = 0; f < fs->nfields; f++)
		zrfs_cache_drop(fs->cache, batch_key(at->slot, at->step, f));
}
