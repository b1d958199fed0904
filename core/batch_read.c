/*
 * batch_read.c - batch reads into caller buffers through io_uring.
 *
 * zr_reader_read() validates every entry first (nothing is read if one is
 * bad or the buffer is short), then queues one read per record and submits
 * them together: for data not in the page cache the kernel sees the whole
 * batch at once instead of one blocking pread after another. Raw records are
 * read straight into their place in the caller's buffer; flate records into
 * the reader's scratch buffer, then inflated into place. Where io_uring is
 * unavailable (kernel without it, seccomp), the same plan runs with pread.
 * zr_reader_read_ranges() runs the same machinery over byte ranges a caller
 * located itself (with zr_stat()).
 */
#include "store_i.h"

#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>

bool zr_uring_disabled;

struct rd {
	int fd;
	uint8_t *buf;
	uint32_t len, done;
	uint64_t off;
	uint32_t chunk_id, crc; /* a record's: checked, and named when wrong */
};

struct zr_reader {
	zr_dataset *ds;
	struct io_uring ring;
	bool uring;
	unsigned depth;
	struct rd *rds;
	size_t rds_cap;
	uint8_t *scratch;
	size_t scratch_cap;
	zr_chunk **held;  /* pinned while their fds are read */
	size_t held_cap, nheld;
};

int zr_reader_open(zr_dataset *ds, unsigned depth, zr_reader **out)
{
	zr_reader *r = calloc(1, sizeof *r);

	*out = NULL;
	RETURN_IF(!r, -ENOMEM, "out of memory");
	r->ds = ds;
	r->depth = depth ? depth : 256;
	if (r->depth > 4096)
		r->depth = 4096;
	r->uring = !zr_uring_disabled && io_uring_queue_init(r->depth, &r->ring, 0) == 0;
	*out = r;
	return 0;
}

void zr_reader_retarget(zr_reader *r, zr_dataset *ds)
{
	r->ds = ds;
}

int zr_reader_uses_uring(const zr_reader *r)
{
	return r->uring;
}

void zr_reader_close(zr_reader *r)
{
	if (!r)
		return;
	if (r->uring)
		io_uring_queue_exit(&r->ring);
	free(r->rds);
	free(r->scratch);
	free(r->held);
	free(r);
}

static int grow(void **p, size_t *cap, size_t need, size_t unit)
{
	void *q;

	if (need <= *cap)
		return 0;
	if (need < *cap * 2)
		need = *cap * 2;
	q = realloc(*p, need * unit);
	RETURN_IF(!q, -ENOMEM, "out of memory");
	*p = q;
	*cap = need;
	return 0;
}

static int run_pread(struct rd *rds, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (rds[i].len == 0)
			continue;
		int rc = zr_read_full(rds[i].fd, rds[i].buf, rds[i].len, rds[i].off);
		if (rc < 0)
			return rc == -ENODATA ? -EIO : rc;
	}
	return 0;
}

/* Issue all reads, at most depth in flight; requeue short reads. */
static int run_uring(zr_reader *r, struct rd *rds, size_t n)
{
	size_t next = 0, inflight = 0;
	int rc = 0;

	while ((next < n || inflight) && rc == 0) {
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;
		while (next < n && inflight < r->depth) {
			struct rd *d = &rds[next];
			struct io_uring_sqe *sqe;
			if (d->len == 0) {
				next++;
				continue;
			}
			if (!(sqe = io_uring_get_sqe(&r->ring)))
				break;
			next++;
			io_uring_prep_read(sqe, d->fd, d->buf + d->done, d->len - d->done,
					   d->off + d->done);
			io_uring_sqe_set_data(sqe, d);
			inflight++;
		}
		if (inflight == 0)
			break; /* the rest are missing or empty: nothing to read */
		rc = io_uring_submit_and_wait(&r->ring, 1);
		if (rc < 0) {
			if (rc == -EINTR) {
				rc = 0;
				continue;
			}
			break;
		}
		rc = 0;
		io_uring_for_each_cqe(&r->ring, head, cqe)
		{
			struct rd *d = io_uring_cqe_get_data(cqe);
			int res = cqe->res, e = 0;
			seen++;
			inflight--;
			if (res > 0)
				ZR_URING_FILLED(d->buf + d->done, (size_t)res);
			if (res < 0 && res != -EAGAIN && res != -EINTR) {
				e = res;
			} else if (res == 0) {
				e = -EIO; /* end of file inside a record */
			} else if (res > 0 && (d->done += (uint32_t)res) < d->len) {
				/* short read: queue the rest now */
				struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
				if (sqe) {
					io_uring_prep_read(sqe, d->fd, d->buf + d->done,
							   d->len - d->done, d->off + d->done);
					io_uring_sqe_set_data(sqe, d);
					inflight++;
				} else {
					e = zr_read_full(d->fd, d->buf + d->done, d->len - d->done,
							 d->off + d->done);
				}
			} else if (res < 0) {
				e = zr_read_full(d->fd, d->buf + d->done, d->len - d->done,
						 d->off + d->done);
			}
			if (e < 0 && rc == 0)
				rc = e;
		}
		io_uring_cq_advance(&r->ring, seen);
	}
	/* on error, drain what is still in flight before the buffers go away */
	while (inflight > 0) {
		struct io_uring_cqe *cqe;
		if (io_uring_wait_cqe(&r->ring, &cqe) < 0)
			break;
		io_uring_cqe_seen(&r->ring, cqe);
		inflight--;
	}
	return rc;
}

int zr_reader_read_ranges(zr_reader *r, const zr_range *ranges, size_t n)
{
	int rc;

	FORWARD_IF_ERR(grow((void **)&r->rds, &r->rds_cap, n + 1, sizeof *r->rds));
	for (size_t i = 0; i < n; i++)
		r->rds[i] = (struct rd){ranges[i].fd, ranges[i].dst, ranges[i].len, 0,
					ranges[i].offset, 0, 0};
	rc = r->uring ? run_uring(r, r->rds, n) : run_pread(r->rds, n);
	RETURN_IF(rc < 0, rc == -ENODATA ? -EIO : rc,
		  "%s: reading %zu ranges of chunk files failed: %s", r->ds->path, n,
		  rc == -ENODATA || rc == -EIO ? "a file ends inside a range, or cannot be read"
					      : strerror(-rc));
	return 0;
}

static int reader_read(zr_reader *r, unsigned field, const uint64_t *ids, size_t n, void *dst,
		       size_t cap, uint64_t *offsets)
{
	zr_dataset *ds = r->ds;
	uint64_t len = zr_length(ds), out = 0, scratch = 0;
	bool flate;
	int rc;

	RETURN_IF(field >= ds->nfields, -ENOENT, "%s: no field %u", ds->path, field);
	flate = ds->fields[field].def.spec.compress == ZR_FLATE;
	FORWARD_IF_ERR(grow((void **)&r->rds, &r->rds_cap, n + 1, sizeof *r->rds));
	FORWARD_IF_ERR(grow((void **)&r->held, &r->held_cap, n + 1, sizeof *r->held));
	/* plan: validate every entry and place every read */
	for (size_t i = 0; i < n; i++) {
		zr_entry e;
		zr_chunk *c;
		RETURN_IF(ids[i] >= len, -ENOENT, "%s: record %llu does not exist (length %llu)",
			  ds->path, (unsigned long long)ids[i], (unsigned long long)len);
		FORWARD_IF_ERR(zr_entry_get(ds, field, ids[i], &e));
		FORWARD_IF_ERR(zr_entry_check(ds, field, ids[i], &e, &c));
		if (c && r->nheld && r->held[r->nheld - 1] == c)
			zr_chunk_unuse(c); /* pinned for the record before */
		else if (c)
			r->held[r->nheld++] = c;
		if (!flate && !zr_entry_missing(&e))
			FORWARD_IF_ERR(zr_shape_check(ds, field, ids[i], e.len));
		if (offsets)
			offsets[i] = out;
		r->rds[i] = (struct rd){c ? c->fd : -1, NULL, e.len, 0, e.offset, e.chunk_id, e.crc};
		if (flate) {
			r->rds[i].buf = (uint8_t *)(uintptr_t)scratch; /* fixed up below */
			scratch += e.len;
		} else {
			RETURN_IF(out + e.len > cap, -ENOBUFS,
				  "%s: buffer of %zu bytes is too small for this batch", ds->path,
				  cap);
			r->rds[i].buf = (uint8_t *)dst + out;
			out += e.len;
		}
	}
	if (flate) {
		FORWARD_IF_ERR(grow((void **)&r->scratch, &r->scratch_cap, scratch ? scratch : 1, 1));
		for (size_t i = 0; i < n; i++)
			r->rds[i].buf = r->scratch + (uintptr_t)r->rds[i].buf;
	}
	rc = r->uring ? run_uring(r, r->rds, n) : run_pread(r->rds, n);
	RETURN_IF(rc < 0, rc == -ENODATA ? -EIO : rc, "%s: field '%s': read failed: %s", ds->path,
		  ds->fields[field].def.name, strerror(-rc));
	for (size_t i = 0; zr_checks(ds, field) && i < n; i++) {
		struct rd *d = &r->rds[i];
		zr_entry e = {d->off, d->chunk_id, d->len, d->crc};
		FORWARD_IF_ERR(zr_value_check(ds, field, ids[i], &e, d->buf));
	}
	if (flate) {
		/* inflate each record into place, in order */
		for (size_t i = 0; i < n; i++) {
			struct rd *d = &r->rds[i];
			zr_entry e = {.len = d->len};
			uint64_t logical;
			if (offsets)
				offsets[i] = out;
			if (d->len == 0)
				continue;
			rc = zr_logical_len(&ds->fields[field], &e, d->buf, &logical);
			RETURN_IF(rc < 0, ZR_ECORRUPT, "%s: field '%s' record %llu: bad flate header",
				  ds->path, ds->fields[field].def.name, (unsigned long long)ids[i]);
			FORWARD_IF_ERR(zr_shape_check(ds, field, ids[i], logical));
			RETURN_IF(out + logical > cap, -ENOBUFS,
				  "%s: buffer of %zu bytes is too small for this batch", ds->path,
				  cap);
			rc = zr_flate_decode(d->buf, d->len, (uint8_t *)dst + out, logical);
			RETURN_IF(rc < 0, ZR_ECORRUPT,
				  "%s: field '%s' record %llu: the stream does not inflate",
				  ds->path, ds->fields[field].def.name, (unsigned long long)ids[i]);
			out += logical;
		}
	}
	if (offsets)
		offsets[n] = out;
	return 0;
}

int zr_reader_read(zr_reader *r, unsigned field, const uint64_t *ids, size_t n, void *dst,
		   size_t cap, uint64_t *offsets)
{
	int rc;

	r->nheld = 0;
	rc = reader_read(r, field, ids, n, dst, cap, offsets);
	while (r->nheld)
		zr_chunk_unuse(r->held[--r->nheld]);
	return rc;
}
