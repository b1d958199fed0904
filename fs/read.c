/*
 * read.c - file contents: meta.json, records, and the .npy views.
 *
 * A read of a raw record, or of the records under a range of a .npy view,
 * is described as a fuse_bufvec of pieces of the chunk files (adjacent
 * pieces merged), each with the address where the dataset maps it. By
 * default they are sent from the mappings with one writev (fuse_reply_iov):
 * the kernel's copy into the reader's pages is the only one, and the daemon
 * never touches the bytes, so a chunk cut short under a live mount makes
 * that copy fault and the reader get EIO, not the daemon SIGBUS. Pieces
 * not yet asked for are first asked for together (POSIX_FADV_WILLNEED), so
 * cold reads reach the disk at once. Where a mapping is unknown (a record
 * the core refuses to map) the pieces are read into a per-thread buffer,
 * with one io_uring submission; with -o splice libfuse splices them
 * (slower on every size measured: BENCHMARKS.md). Flate
 * records are inflated once into the bounded cache (cache.c) and served from
 * there. Records missing from a .npy view read as zeros.
 *
 * open and opendir return ENOSYS when the kernel allows it
 * (FUSE_CAP_NO_OPEN_SUPPORT): the kernel then stops sending OPEN and RELEASE
 * for these immutable files and keeps their page cache across opens.
 */
#include "zrfs_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <liburing.h>

#define RING_DEPTH 64

/* Zeros for missing records in a .npy view; a reply is at most 1 MiB. */
static const uint8_t zeros[1 << 20];

void zrfs_add_piece(struct fuse_bufvec *bv, int fd, off_t pos, const void *mem, size_t len)
{
	struct fuse_buf *last = bv->count ? &bv->buf[bv->count - 1] : NULL;

	if (len == 0)
		return;
	bool in_file = last && (last->flags & FUSE_BUF_IS_FD);
	if (last && (fd >= 0 ? in_file && last->fd == fd && last->pos + (off_t)last->size == pos
			     : !in_file && (const char *)last->mem + last->size == mem)) {
		last->size += len;
		return;
	}
	struct fuse_buf *b = &bv->buf[bv->count++];
	memset(b, 0, sizeof *b);
	b->size = len;
	b->mem = (void *)mem;
	if (fd >= 0) {
		b->flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK | FUSE_BUF_FD_RETRY;
		b->fd = fd;
		b->pos = pos;
	}
}

/* The per-thread reply buffer, freed when the thread exits. */
static _Thread_local char *tl_buf;
static _Thread_local size_t tl_cap;
static pthread_key_t tl_key;
static pthread_once_t tl_once = PTHREAD_ONCE_INIT;

static void tl_key_init(void)
{
	pthread_key_create(&tl_key, free);
}

static char *reply_buffer(size_t n)
{
	if (n > tl_cap) {
		char *b = realloc(tl_buf, n);
		if (!b)
			return NULL;
		pthread_once(&tl_once, tl_key_init);
		pthread_setspecific(tl_key, b);
		tl_buf = b;
		tl_cap = n;
	}
	return tl_buf;
}

/* The per-thread io_uring for reads of many pieces; NULL if unavailable. */
static _Thread_local struct io_uring *tl_ring;
static _Thread_local bool tl_ring_failed;
static pthread_key_t ring_key;
static pthread_once_t ring_once = PTHREAD_ONCE_INIT;

static void ring_free(void *r)
{
	io_uring_queue_exit(r);
	free(r);
}

static void ring_key_init(void)
{
	pthread_key_create(&ring_key, ring_free);
}

static struct io_uring *thread_ring(void)
{
	if (!tl_ring && !tl_ring_failed) {
		struct io_uring *r = malloc(sizeof *r);
		if (!r || io_uring_queue_init(RING_DEPTH, r, 0) < 0) {
			free(r);
			tl_ring_failed = true; /* no io_uring here: pread it is */
			return NULL;
		}
		pthread_once(&ring_once, ring_key_init);
		pthread_setspecific(ring_key, r);
		tl_ring = r;
	}
	return tl_ring;
}

/* pread all of one piece; -EIO if the file ends early. */
static int read_piece(int fd, char *dst, size_t n, off_t pos)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = pread(fd, dst + got, n - got, pos + (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		got += (size_t)r;
	}
	return 0;
}

/* Read the fd pieces of @bv into @buf with one io_uring submission per
 * RING_DEPTH pieces: for data not in the page cache the disk sees them all
 * at once. Short completions are finished with pread. */
static int read_pieces_uring(struct io_uring *ring, const struct fuse_bufvec *bv, char *buf)
{
	size_t at = 0, i = 0;
	int rc = 0;

	while (i < bv->count && rc == 0) {
		struct piece {
			const struct fuse_buf *b;
			char *dst;
		} q[RING_DEPTH];
		unsigned queued = 0;
		for (; i < bv->count && queued < RING_DEPTH; i++) {
			const struct fuse_buf *b = &bv->buf[i];
			if (b->flags & FUSE_BUF_IS_FD) {
				struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
				io_uring_prep_read(sqe, b->fd, buf + at, (unsigned)b->size, (uint64_t)b->pos);
				io_uring_sqe_set_data64(sqe, queued);
				q[queued++] = (struct piece){b, buf + at};
			} else {
				memcpy(buf + at, b->mem, b->size);
			}
			at += b->size;
		}
		if (queued && (rc = io_uring_submit_and_wait(ring, queued)) >= 0)
			rc = 0;
		for (unsigned done = 0; done < queued; done++) {
			struct io_uring_cqe *cqe;
			int wrc = io_uring_wait_cqe(ring, &cqe);
			if (wrc < 0) {
				rc = rc ? rc : wrc;
				break;
			}
			unsigned k = (unsigned)io_uring_cqe_get_data64(cqe);
			int res = cqe->res;
			io_uring_cqe_seen(ring, cqe);
			if (res < 0 && res != -EAGAIN && res != -EINTR) {
				rc = rc ? rc : res;
				continue;
			}
			size_t got = res > 0 ? (size_t)res : 0;
			ZR_URING_FILLED(q[k].dst, got);
			if (got < q[k].b->size && rc == 0) /* short: finish with pread */
				rc = read_piece(q[k].b->fd, q[k].dst + got, q[k].b->size - got,
						q[k].b->pos + (off_t)got);
		}
	}
	return rc;
}

/* Send @bv: spliced (-o splice), or gathered into one buffer and written. */
static void reply_bufvec(fuse_req_t req, struct zrfs *fs, struct fuse_bufvec *bv)
{
	size_t total = fuse_buf_size(bv), at = 0, nfd = 0;
	struct io_uring *ring;
	char *buf;
	int rc = 0;

	if (fs->opts.splice) {
		/* answers the request whatever happens (with the error if reading fails) */
		fuse_reply_data(req, bv, FUSE_BUF_SPLICE_MOVE);
		return;
	}
	if (!(buf = reply_buffer(total ? total : 1))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (size_t i = 0; i < bv->count; i++)
		nfd += (bv->buf[i].flags & FUSE_BUF_IS_FD) != 0;
	if (nfd > 1 && (ring = thread_ring()) != NULL) {
		rc = read_pieces_uring(ring, bv, buf);
	} else {
		for (size_t i = 0; i < bv->count && rc == 0; i++) {
			const struct fuse_buf *b = &bv->buf[i];
			if (!(b->flags & FUSE_BUF_IS_FD))
				memcpy(buf + at, b->mem, b->size);
			else
				rc = read_piece(b->fd, buf + at, b->size, b->pos);
			at += b->size;
		}
	}
	if (rc < 0) { /* a chunk shorter than its entries say, or unreadable */
		fuse_log(FUSE_LOG_ERR, "zrfs: %s: a chunk file ends early or cannot be read (%s)\n",
			 fs->dataset, strerror(rc == -EIO ? EIO : -rc));
		fuse_reply_err(req, EIO);
		return;
	}
	fuse_reply_buf(req, buf, total);
}

/* Whether the pages under [@mem, @mem + @len) of a chunk mapping are in
 * the page cache (the first MiB of a longer record stands for it). */
static bool resident(const void *mem, uint64_t len)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)mem & ~(page - 1);
	unsigned char vec[256];
	size_t n = (size_t)(((uintptr_t)mem + len - a + page - 1) / page);

	if (n > sizeof vec)
		n = sizeof vec;
	if (mincore((void *)a, n * page, vec) < 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(vec[i] & 1))
			return false;
	return true;
}

/* Ask the kernel to read @len bytes at @pos of @fd ahead, widened to whole
 * -o readaround windows. */
static void read_ahead(struct zrfs *fs, int fd, uint64_t pos, uint64_t len)
{
	uint64_t w = fs->opts.readaround, end = pos + len;

	if (w) {
		pos -= pos % w;
		end += (w - end % w) % w;
	}
	posix_fadvise(fd, (off_t)pos, (off_t)(end - pos), POSIX_FADV_WILLNEED);
}

/* Records already in the page cache (mincore on their mapping) are not
 * asked for: no page cache walk over a window. But a warm dataset would
 * pay one mincore per record of every batch, a third of a warm epoch's
 * profile, spent learning that nothing needs reading. So once a whole
 * batch was found cached (fs->warm), the next ones check their first
 * ZRFS_WARM_SAMPLE records only, and take the rest as cached when those
 * are; one miss sets checking everything again. A record the sample
 * skipped that is not cached still reads, by a page fault in the reply
 * rather than ahead of it. */
void zrfs_read_ahead_bufvec(struct zrfs *fs, const struct fuse_bufvec *bv)
{
	bool warm = atomic_load_explicit(&fs->warm, memory_order_relaxed);
	size_t checked = 0, missed = 0;

	for (size_t i = 0; i < bv->count; i++) {
		const struct fuse_buf *b = &bv->buf[i];
		if (!(b->flags & FUSE_BUF_IS_FD))
			continue;
		if (warm && missed == 0 && checked == ZRFS_WARM_SAMPLE)
			break;
		checked++;
		if (b->mem && resident(b->mem, b->size))
			continue;
		missed++;
		read_ahead(fs, b->fd, (uint64_t)b->pos, b->size);
	}
	if (checked && warm != (missed == 0))
		atomic_store_explicit(&fs->warm, missed == 0, memory_order_relaxed);
}

/* Send @bv from where its bytes are mapped: one writev, one copy, by the
 * kernel, into the pages the reader gets. The daemon does not touch the
 * bytes: if a chunk was cut short under the mount, the kernel's copy
 * faults, the reader gets EIO, and we log it. false (nothing sent) if a
 * file piece has no mapping or there are more pieces than a writev takes. */
static bool reply_mapped(fuse_req_t req, struct zrfs *fs, const struct fuse_bufvec *bv, bool ahead)
{
	struct iovec iov[1023]; /* + the header libfuse adds: IOV_MAX */

	if (fs->opts.splice || bv->count > sizeof iov / sizeof iov[0])
		return false;
	for (size_t i = 0; i < bv->count; i++) {
		if (!bv->buf[i].mem)
			return false;
		iov[i] = (struct iovec){bv->buf[i].mem, bv->buf[i].size};
	}
	/* pages not yet asked for are asked for all at once: a cold disk gets
	 * them together rather than one page fault after another */
	if (!ahead)
		zrfs_read_ahead_bufvec(fs, bv);
	if (fuse_reply_iov(req, iov, (int)bv->count) == -EFAULT)
		fuse_log(FUSE_LOG_ERR, "zrfs: %s: a chunk file ends early: read failed (EIO)\n",
			 fs->dataset);
	return true;
}

void zrfs_reply_bufvec(fuse_req_t req, struct zrfs *fs, struct fuse_bufvec *bv, bool ahead)
{
	if (!reply_mapped(req, fs, bv, ahead))
		reply_bufvec(req, fs, bv);
}

struct flate_job {
	struct zrfs *fs;
	unsigned field;
	uint64_t id;
};

static int load_flate(void *ctx, uint8_t **data, uint64_t *len)
{
	struct flate_job *j = ctx;
	zr_record_stat st;
	int64_t got;
	int rc;

	if ((rc = zr_stat(j->fs->ds, j->field, j->id, &st)) < 0)
		return rc;
	if (!st.present)
		return -ENOENT;
	if (st.logical_len > j->fs->opts.cache_bytes)
		return zrfs_too_big(j->fs, st.logical_len);
	*data = zrfs_cache_alloc(j->fs->cache, st.logical_len ? st.logical_len : 1);
	if (!*data)
		return -ENOMEM;
	got = zr_record_load(j->fs->ds, j->field, j->id, *data, st.logical_len);
	if (got < 0) {
		zrfs_cache_free(j->fs->cache, *data);
		*data = NULL;
		return (int)got;
	}
	*len = (uint64_t)got;
	return 0;
}

int zrfs_too_big(struct zrfs *fs, uint64_t bytes)
{
	fuse_log(FUSE_LOG_ERR, "zrfs: %s: a file of %llu bytes to inflate is larger than the "
		 "cache (-o cache=%llu bytes): not served (EFBIG); mount with a larger cache\n",
		 fs->dataset, (unsigned long long)bytes, (unsigned long long)fs->opts.cache_bytes);
	return -EFBIG;
}

int zrfs_flate_get(struct zrfs *fs, unsigned field, uint64_t id, struct zrfs_cached **out,
		   const uint8_t **data, uint64_t *len)
{
	struct flate_job j = {fs, field, id};

	/* keys of records: field << 40 | id, below 2^48; batch files use bit 63 */
	return zrfs_cache_get(fs->cache, (uint64_t)field << ZRFS_ID_BITS | id, load_flate, &j, out,
			      data, len);
}

void zrfs_ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct zrfs *fs = fuse_req_userdata(req);

	(void)ino;
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (fs->no_open) {
		fuse_reply_err(req, ENOSYS); /* stateless: no OPEN/RELEASE from now on */
		return;
	}
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

static void reply_slice(fuse_req_t req, const void *data, uint64_t len, size_t size, off_t off)
{
	if ((uint64_t)off >= len)
		fuse_reply_buf(req, NULL, 0);
	else
		fuse_reply_buf(req, (const char *)data + off,
			       (uint64_t)size < len - (uint64_t)off ? size : len - (uint64_t)off);
}

static void read_record(fuse_req_t req, struct zrfs *fs, unsigned field, uint64_t id,
			size_t size, off_t off)
{
	const struct zrfs_field *f = &fs->fields[field];
	zr_record_stat st;
	int rc;

	if (f->flate) {
		struct zrfs_cached *e;
		const uint8_t *data;
		uint64_t len;
		rc = zrfs_flate_get(fs, field, id, &e, &data, &len);
		if (rc < 0) {
			if (rc != -EFBIG) /* logged with the reason */
				zrfs_log_record_error(fs, field, id, rc);
			fuse_reply_err(req, zrfs_errno(rc));
			return;
		}
		reply_slice(req, data, len, size, off);
		zrfs_cache_release(fs->cache, e);
		return;
	}
	rc = zr_stat(fs->ds, field, id, &st);
	if (rc < 0 || !st.present) {
		if (rc < 0)
			zrfs_log_record_error(fs, field, id, rc);
		fuse_reply_err(req, rc < 0 ? zrfs_errno(rc) : ENOENT);
		return;
	}
	if ((uint64_t)off >= st.physical_len) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(0);
	zr_batch *g = NULL;
	bv.buf[0].size = st.physical_len - (uint64_t)off < size ? st.physical_len - (uint64_t)off
								 : size;
	bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK | FUSE_BUF_FD_RETRY;
	bv.buf[0].fd = st.fd;
	bv.buf[0].pos = (off_t)st.offset + off;
	if (zr_gather(fs->ds, field, &id, 1, &g) == 0) { /* where it is mapped */
		size_t n;
		bv.buf[0].mem = (uint8_t *)(uintptr_t)zr_batch_records(g, &n)[0].data + off;
	}
	zrfs_reply_bufvec(req, fs, &bv, false);
	zr_batch_release(g);
}

/* Bytes [off, off + size) of field @field's .npy view. */
static void read_npy(fuse_req_t req, struct zrfs *fs, unsigned field, size_t size, off_t off)
{
	const struct zrfs_field *f = &fs->fields[field];
	uint64_t rsz = f->record_size, hdr = f->npy.hdr_len, end, pos = (uint64_t)off;
	struct fuse_bufvec *bv = NULL;
	uint8_t *buf = NULL;
	size_t filled = 0;
	int rc = 0;

	if (pos >= f->npy.size) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > sizeof zeros)
		size = sizeof zeros;
	end = pos + size < f->npy.size ? pos + size : f->npy.size;
	/* segments: a piece of the header, then one per record touched */
	size_t max_seg = 2 + (size_t)((end - (pos > hdr ? pos : hdr)) / (rsz ? rsz : 1)) + 1;
	if (f->flate)
		buf = malloc(end - pos);
	else
		bv = malloc(sizeof *bv + max_seg * sizeof bv->buf[0]);
	if (!bv && !buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (bv)
		memset(bv, 0, sizeof *bv);
	/* where the raw records touched are mapped */
	zr_batch *g = NULL;
	const zr_slice *maps = NULL;
	uint64_t first = 0;
	if (bv && end > hdr) {
		first = ((pos > hdr ? pos : hdr) - hdr) / rsz;
		size_t n = (size_t)((end - 1 - hdr) / rsz - first + 1);
		uint64_t *ids = malloc(n * sizeof *ids);
		for (size_t i = 0; ids && i < n; i++)
			ids[i] = first + i;
		if (ids && zr_gather(fs->ds, field, ids, n, &g) == 0)
			maps = zr_batch_records(g, &n);
		free(ids);
	}
	while (pos < end && rc == 0) {
		const void *mem = NULL;
		uint64_t len;
		int fd = -1;
		off_t fpos = 0;
		if (pos < hdr) {
			len = (hdr < end ? hdr : end) - pos;
			mem = f->npy.hdr + pos;
		} else {
			uint64_t id = (pos - hdr) / rsz, in = (pos - hdr) % rsz;
			len = rsz - in < end - pos ? rsz - in : end - pos;
			if (f->flate) {
				struct zrfs_cached *e;
				const uint8_t *data;
				uint64_t dlen;
				rc = zrfs_flate_get(fs, field, id, &e, &data, &dlen);
				if (rc == -ENOENT) {
					rc = 0;
					mem = zeros;
				} else if (rc == 0) {
					memcpy(buf + filled, dlen == rsz ? data + in : zeros, len);
					zrfs_cache_release(fs->cache, e);
					filled += len;
					pos += len;
					continue;
				} else if (rc != -EFBIG) {
					zrfs_log_record_error(fs, field, id, rc);
				}
			} else {
				zr_record_stat st;
				rc = zr_stat(fs->ds, field, id, &st);
				if (rc < 0)
					zrfs_log_record_error(fs, field, id, rc);
				else if (!st.present || st.physical_len != rsz)
					mem = zeros;
				else {
					fd = st.fd;
					fpos = (off_t)(st.offset + in);
					if (maps)
						mem = (const uint8_t *)maps[id - first].data + in;
				}
			}
		}
		if (rc < 0)
			break;
		if (buf) {
			memcpy(buf + filled, mem, len);
			filled += len;
		} else {
			zrfs_add_piece(bv, fd, fpos, mem, len);
		}
		pos += len;
	}
	if (rc < 0) {
		fuse_reply_err(req, zrfs_errno(rc));
	} else if (buf) {
		fuse_reply_buf(req, (const char *)buf, filled);
	} else {
		zrfs_reply_bufvec(req, fs, bv, false);
	}
	zr_batch_release(g);
	free(bv);
	free(buf);
}

void zrfs_ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		  struct fuse_file_info *fi)
{
	struct zrfs *fs = fuse_req_userdata(req);

	(void)fi;
	if (zrfs_batches_owns(ino)) {
		zrfs_batches_read(req, fs, ino, size, off);
	} else if (ino == ZRFS_INO_META) {
		reply_slice(req, fs->meta, fs->meta_len, size, off);
	} else if (ino >= ZRFS_INO_NPY && ino < ZRFS_INO_NPY + fs->nfields &&
		   fs->fields[ino - ZRFS_INO_NPY].has_npy) {
		read_npy(req, fs, (unsigned)(ino - ZRFS_INO_NPY), size, off);
	} else if (ino & ZRFS_INO_REC) {
		uint64_t f = (ino & ~ZRFS_INO_REC) >> ZRFS_ID_BITS;
		uint64_t id = ino & ((UINT64_C(1) << ZRFS_ID_BITS) - 1);
		if (f < fs->nfields && id < fs->n)
			read_record(req, fs, (unsigned)f, id, size, off);
		else
			fuse_reply_err(req, ENOENT);
	} else {
		fuse_reply_err(req, EISDIR);
	}
}
