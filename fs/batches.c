/*
 * batches.c - /.batches: sampler-ordered batches as files.
 *
 *   /.batches/<spec>/                    a sampler spec (sampler/ grammar)
 *   /.batches/<spec>/epoch-<e>/          one epoch of it
 *   /.batches/<spec>/epoch-<e>/<k>/      batch step k for the spec's rank:
 *       ids             the record ids, little-endian u64
 *       <field>         the records of the field, concatenated in batch order
 *       <field>.offsets B + 1 little-endian u64 offsets into <field>
 *       <field>.npy     fixed-shape fields: a (B, *shape) array
 *       info.json       epoch, step, rank, world, per-batch seed, size, spec
 *
 * Everything is computed from the path: batch k of epoch e is built
 * directly (libzrsampler, O(B)), so any step of any epoch is instant to
 * reach and ranks need no coordination. Any spec that parses works on
 * lookup; listing /.batches shows the mount's -o batches= specs and a
 * default. A malformed or out-of-range name is ENOENT with a log line.
 *
 * A raw field's batch is never assembled: its files are sized from the
 * offset tables and each read is answered with the pieces of the chunk
 * files it covers, sent from the chunk mappings with one writev (the
 * kernel's copy into the reader's pages is the only one; if a chunk was cut
 * short under the mount, that copy faults and the reader gets EIO, the
 * daemon never touches the bytes). A flate field's batch is assembled once
 * with the core's io_uring batch reader (one submission, records inflated)
 * into the shared bounded cache (cache.c), as B + 1 offsets followed by the
 * bytes, from which <field>, <field>.offsets and <field>.npy are served
 * (the .npy view as pieces of it, laid out as a raw batch's).
 *
 * Every read at offset 0 of step k queues, for background threads (one per
 * CPU, at most -o prefetch), steps k+1 .. k+prefetch of the same field:
 * flate batches are assembled ahead, raw ones have their records read ahead
 * by the kernel (POSIX_FADV_WILLNEED, in -o readaround windows; a read of
 * a raw step no prefetch reached asks for its own records first), so a
 * cold epoch streams. It also queues the
 * drop of step k - drop_behind: its files leave the kernel's page cache
 * (FUSE_NOTIFY_INVAL_INODE) and its flate batches the cache, whose buffers
 * are then reused. Batch files are read once per epoch; keeping them would
 * double the memory the records take, and on virtual machines every fresh
 * page of page cache costs a host fault on first touch (~10 us per 4 KiB
 * on the machine of BENCHMARKS.md) that recycled pages do not.
 * The default drop_behind, 16, stays above the batches a DataLoader holds
 * in flight (workers x prefetch_factor + 1), whose files a training process
 * may map (np.load with mmap_mode): a mapped page dropped under it is read
 * again on its next access.
 *
 * Inode numbers: the spec directory is ZRFS_INO_SPEC + its index in the
 * table of spec names seen; (spec, epoch) pairs get a slot in a second
 * table; a step directory and its files are slot << 42 | step << 10 | kind.
 * Both tables only grow (up to 4096 specs and 65536 epoch slots per mount),
 * so inode numbers never change while mounted.
 */
#include "zrfs_i.h"
#include "zrsampler.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SPECS_MAX 4096
#define SLOTS_MAX 65536
#define STEPS_MAX (UINT64_C(1) << 32)
#define INO_SPEC UINT64_C(0x10000)
#define INO_EPOCH (UINT64_C(2) << 60)
#define INO_STEP (UINT64_C(3) << 60)
#define KEY_BATCH (UINT64_C(1) << 63)
#define HINTS 256
#define THREADS_MAX 4
#define DEFAULT_SPEC "shuffle,batch=256,tail=keep"

enum { K_STEPDIR, K_IDS, K_INFO, K_FIELD0 }; /* then 3 per field: data, offsets, npy */

struct spec_entry {
	char name[ZS_SPEC_MAX + 1];
	zs_sampler *s;
};

struct slot {
	uint32_t spec;
	uint64_t epoch;
};

struct job {
	uint32_t slot;
	uint64_t step;
	unsigned field;
	bool drop;            /* drop the step's files from the page cache */
};

struct zrfs_batches {
	pthread_mutex_t lock;     /* the tables and the queue */
	struct spec_entry *specs;
	uint32_t nspecs, nlisted; /* the first nlisted are listed in /.batches */
	struct slot *slots;
	uint32_t nslots;
	/* prefetch and drop-behind */
	pthread_t threads[THREADS_MAX];
	unsigned nthreads;
	bool running, stop;
	pthread_cond_t cond;
	struct job *queue;
	unsigned qhead, qlen, qcap;
	/* raw batches whose records the prefetcher asked the kernel to read
	 * ahead (batch keys, direct-mapped): reads of these need not ask */
	uint64_t hinted[HINTS];
};

bool zrfs_batches_owns(fuse_ino_t ino)
{
	return ino == ZRFS_INO_BATCHES || (ino >= INO_SPEC && ino < INO_SPEC + SPECS_MAX) ||
	       (ino & (UINT64_C(3) << 60)) >= INO_EPOCH;
}

/* @n values as little-endian u64s at @dst; and one read back from @p. */
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

/* ---- the tables ---- */

/* Index of spec @name, interned on first sight; -ENOENT (logged) if bad. */
static int spec_index(struct zrfs *fs, const char *name, bool listed)
{
	struct zrfs_batches *b = fs->batches;
	zs_spec spec;
	zs_sampler *s;
	int idx = -ENOENT;

	pthread_mutex_lock(&b->lock);
	for (uint32_t i = 0; i < b->nspecs; i++)
		if (strcmp(b->specs[i].name, name) == 0) {
			idx = (int)i;
			break;
		}
	pthread_mutex_unlock(&b->lock);
	if (idx >= 0)
		return idx;
	if (zs_spec_parse(name, &spec) < 0 || zs_sampler_create(&s, &spec, fs->n) < 0) {
		fuse_log(FUSE_LOG_ERR, "zrfs: %s/%s: %s\n", ZRFS_BATCHES_NAME, name, zs_errmsg());
		return -ENOENT;
	}
	pthread_mutex_lock(&b->lock);
	for (uint32_t i = 0; i < b->nspecs && idx < 0; i++)
		if (strcmp(b->specs[i].name, name) == 0)
			idx = (int)i; /* another thread was first */
	if (idx < 0 && b->nspecs < SPECS_MAX) {
		idx = (int)b->nspecs++;
		snprintf(b->specs[idx].name, sizeof b->specs[idx].name, "%s", name);
		b->specs[idx].s = s;
		s = NULL;
		if (listed)
			b->nlisted = b->nspecs;
	}
	pthread_mutex_unlock(&b->lock);
	zs_sampler_destroy(s);
	if (idx < 0)
		fuse_log(FUSE_LOG_ERR, "zrfs: %s/%s: more than %d specs in one mount\n",
			 ZRFS_BATCHES_NAME, name, SPECS_MAX);
	return idx < 0 ? -ENOENT : idx;
}

static int slot_of(struct zrfs_batches *b, uint32_t spec, uint64_t epoch)
{
	int found = -ENOENT;

	pthread_mutex_lock(&b->lock);
	for (uint32_t i = b->nslots; i-- > 0;) /* recent epochs are at the end */
		if (b->slots[i].spec == spec && b->slots[i].epoch == epoch) {
			found = (int)i;
			break;
		}
	if (found < 0 && b->nslots < SLOTS_MAX) {
		b->slots[b->nslots] = (struct slot){spec, epoch};
		found = (int)b->nslots++;
	}
	pthread_mutex_unlock(&b->lock);
	if (found < 0)
		fuse_log(FUSE_LOG_ERR, "zrfs: more than %d epochs opened in one mount\n", SLOTS_MAX);
	return found;
}

/* The sampler and epoch of slot @slot (both immutable once made). */
static const zs_sampler *slot_sampler(struct zrfs_batches *b, uint32_t slot, uint64_t *epoch,
				      uint32_t *spec)
{
	const zs_sampler *s;

	pthread_mutex_lock(&b->lock);
	*epoch = b->slots[slot].epoch;
	*spec = b->slots[slot].spec;
	s = b->specs[*spec].s;
	pthread_mutex_unlock(&b->lock);
	return s;
}

/* ---- inode numbers ---- */

enum node { N_NONE, N_TOP, N_SPEC, N_EPOCH, N_STEP };

struct where {
	uint32_t spec, slot;
	uint64_t epoch, step;
	unsigned kind;
	const zs_sampler *s;
};

static enum node decode(struct zrfs *fs, fuse_ino_t ino, struct where *w)
{
	struct zrfs_batches *b = fs->batches;
	uint32_t n;

	if (ino == ZRFS_INO_BATCHES)
		return N_TOP;
	if (ino >= INO_SPEC && ino < INO_SPEC + SPECS_MAX) {
		w->spec = (uint32_t)(ino - INO_SPEC);
		pthread_mutex_lock(&b->lock);
		n = b->nspecs;
		w->s = w->spec < n ? b->specs[w->spec].s : NULL;
		pthread_mutex_unlock(&b->lock);
		return w->s ? N_SPEC : N_NONE;
	}
	w->slot = (uint32_t)((ino >> 42) & (SLOTS_MAX - 1));
	if ((ino & (UINT64_C(3) << 60)) == INO_EPOCH)
		w->slot = (uint32_t)(ino & (SLOTS_MAX - 1));
	pthread_mutex_lock(&b->lock);
	n = b->nslots;
	pthread_mutex_unlock(&b->lock);
	if (w->slot >= n)
		return N_NONE;
	w->s = slot_sampler(b, w->slot, &w->epoch, &w->spec);
	if ((ino & (UINT64_C(3) << 60)) == INO_EPOCH)
		return N_EPOCH;
	w->step = (ino >> 10) & (STEPS_MAX - 1);
	w->kind = (unsigned)(ino & 1023);
	if (w->step >= zs_steps(w->s) || w->kind >= K_FIELD0 + 3 * fs->nfields ||
	    (w->kind >= K_FIELD0 && (w->kind - K_FIELD0) % 3 == 2 &&
	     !fs->fields[(w->kind - K_FIELD0) / 3].has_npy))
		return N_NONE;
	return N_STEP;
}

static fuse_ino_t step_ino(uint32_t slot, uint64_t step, unsigned kind)
{
	return INO_STEP | (uint64_t)slot << 42 | step << 10 | kind;
}

/* ---- contents ---- */

/* One io_uring batch reader per thread, closed when the thread exits. */
static _Thread_local zr_reader *tl_reader;
static pthread_key_t reader_key;
static pthread_once_t reader_once = PTHREAD_ONCE_INIT;

static void reader_free(void *r)
{
	zr_reader_close(r);
}

static void reader_key_init(void)
{
	pthread_key_create(&reader_key, reader_free);
}

static int thread_reader(zr_dataset *ds, zr_reader **out)
{
	if (!tl_reader) {
		int rc = zr_reader_open(ds, 256, &tl_reader);
		if (rc < 0)
			return rc;
		pthread_once(&reader_once, reader_key_init);
		pthread_setspecific(reader_key, tl_reader);
	}
	*out = tl_reader;
	return 0;
}

/* A batch field's blob: (B + 1) little-endian u64 offsets, then the bytes. */
struct assemble {
	struct zrfs *fs;
	const zs_sampler *s;
	uint64_t epoch, step;
	unsigned field;
};

static int load_batch(void *ctx, uint8_t **data, uint64_t *len)
{
	struct assemble *a = ctx;
	uint32_t max = zs_batch_max(a->s);
	uint64_t *ids = malloc((size_t)max * sizeof *ids), total = 0;
	int64_t n;
	int rc;

	*data = NULL;
	if (!ids)
		return -ENOMEM;
	n = zs_batch(a->s, a->epoch, a->step, ids);
	rc = n < 0 ? -ENOENT : 0;
	if (rc == 0)
		rc = zr_batch_bytes(a->fs->ds, a->field, ids, (size_t)n, &total);
	if (rc == 0 && ((uint64_t)n + 1) * 8 + total > a->fs->opts.cache_bytes) {
		free(ids);
		return zrfs_too_big(a->fs, ((uint64_t)n + 1) * 8 + total);
	}
	zr_reader *r = NULL;
	if (rc == 0)
		rc = thread_reader(a->fs->ds, &r);
	if (rc == 0) {
		size_t head = ((size_t)n + 1) * 8;
		uint64_t *offs = malloc(((size_t)n + 1) * sizeof *offs);
		*data = zrfs_cache_alloc(a->fs->cache, head + total + 1);
		if (!offs || !*data)
			rc = -ENOMEM;
		if (rc == 0)
			rc = zr_reader_read(r, a->field, ids, (size_t)n, *data + head, total, offs);
		if (rc == 0)
			put_le64s(*data, offs, (size_t)n + 1);
		free(offs);
		*len = head + total;
	}
	if (rc < 0) {
		fuse_log(FUSE_LOG_ERR, "zrfs: batch %llu of epoch %llu, field '%s': %s (%s)\n",
			 (unsigned long long)a->step, (unsigned long long)a->epoch,
			 a->fs->fields[a->field].spec->name, zr_strerror(rc), zr_errmsg(a->fs->ds));
		zrfs_cache_free(a->fs->cache, *data);
		*data = NULL;
	}
	free(ids);
	return rc;
}

/* ---- raw fields: served as pieces of the chunk files, never assembled ---- */

/* Where the records of a raw batch field lie: the ids of all n, and for
 * records lo .. hi - 1 their places and the prefix offsets. */
struct raw_batch {
	int64_t n, lo, hi;
	uint64_t *ids;
	zr_record_stat *st;
	uint64_t *offs;       /* n + 1: offs[lo .. hi], from record lo (lo is 0 but in part 2) */
	struct zrfs_npy npy;  /* the .npy view's header, which replies point into */
};

static void raw_free(struct raw_batch *r)
{
	free(r->ids);
	free(r->st);
	free(r->offs);
}

/* For [@pos, @end) of the .npy view of @r's @r->n records: its header, and
 * the rows under those bytes, lo .. hi - 1 (rows are record_size apart, so
 * a read of part of the view needs no more). */
static int npy_rows(const struct zrfs_field *fd, struct raw_batch *r, uint64_t pos, uint64_t end)
{
	uint64_t rsz = fd->record_size;
	int rc = zrfs_npy_header(fd->spec, (uint64_t)r->n, rsz, &r->npy);
	uint64_t h = r->npy.hdr_len;

	if (rc == 0 && rsz) {
		r->lo = pos > h ? (int64_t)((pos - h) / rsz) : 0;
		r->hi = end > h ? (int64_t)((end - h) / rsz + ((end - h) % rsz != 0)) : 0;
		r->lo = r->lo < r->n ? r->lo : r->n;
		r->hi = r->hi < r->n ? r->hi : r->n;
		r->hi = r->hi > r->lo ? r->hi : r->lo;
	}
	return rc;
}

/* The layout of a raw batch: of every record, or for [@pos, @end) of its
 * .npy view (@part 2) of the records under those bytes only; the view's
 * rows are record_size apart, so a read of part of it needs no more. */
static int raw_layout(struct zrfs *fs, const struct where *w, unsigned field, unsigned part,
		      uint64_t pos, uint64_t end, struct raw_batch *r)
{
	const struct zrfs_field *fd = &fs->fields[field];
	uint32_t max = zs_batch_max(w->s);
	int rc = 0;

	r->ids = malloc((size_t)max * sizeof *r->ids);
	r->st = malloc((size_t)max * sizeof *r->st);
	r->offs = malloc(((size_t)max + 1) * sizeof *r->offs);
	if (!r->ids || !r->st || !r->offs) {
		raw_free(r);
		return -ENOMEM;
	}
	r->n = zs_batch(w->s, w->epoch, w->step, r->ids);
	r->lo = 0;
	r->hi = r->n;
	r->npy.hdr_len = 0;
	if (part == 2 && r->n >= 0)
		rc = npy_rows(fd, r, pos, end);
	r->offs[r->lo] = 0;
	for (int64_t i = r->lo; i < r->hi && rc == 0; i++) {
		rc = zr_stat(fs->ds, field, r->ids[i], &r->st[i]);
		if (rc < 0)
			zrfs_log_record_error(fs, field, r->ids[i], rc);
		r->offs[i + 1] = r->offs[i] + (r->st[i].present ? r->st[i].physical_len : 0);
	}
	if (rc < 0 || r->n < 0) {
		raw_free(r);
		return rc < 0 ? rc : -ENOENT;
	}
	return 0;
}

static uint64_t batch_key(uint32_t slot, uint64_t step, unsigned field)
{
	return KEY_BATCH | (uint64_t)slot << 40 | step << 8 | field;
}

static unsigned hint_slot(uint64_t key)
{
	return (unsigned)((key * UINT64_C(0x9e3779b97f4a7c15)) >> 56) % HINTS;
}

static bool hinted(struct zrfs_batches *b, uint64_t key)
{
	pthread_mutex_lock(&b->lock);
	bool yes = b->hinted[hint_slot(key)] == key;
	pthread_mutex_unlock(&b->lock);
	return yes;
}

static const uint8_t zero_record[1 << 16];

/* The pieces of [@pos, @end) of a raw field's batch data (part 0) or of
 * its .npy view (part 2, missing or odd-sized records as zeros), from the
 * batch's layout @r (made for the same part and range), which keeps the
 * header the pieces point into; @end is clamped to the file's size. Each
 * file piece carries where it is mapped when @maps (records lo .. hi - 1)
 * has it. NULL: out of memory. */
static struct fuse_bufvec *raw_pieces(const struct zrfs_field *fd, const struct raw_batch *r,
				      const zr_slice *maps, unsigned part, uint64_t pos, uint64_t end)
{
	const struct zrfs_npy *h = &r->npy;
	uint64_t total = part == 2 ? h->size : r->offs[r->n];
	if (end > total)
		end = total;
	/* pieces: header, then per record at most 1 + record_size / 64K (zeros) */
	size_t cap = 2 + (size_t)(r->hi - r->lo) *
			     (2 + (part == 2 ? fd->record_size / sizeof zero_record : 0));
	struct fuse_bufvec *bv = calloc(1, sizeof *bv + cap * sizeof bv->buf[0]);
	if (!bv)
		return NULL;
	if (pos < h->hdr_len) {
		zrfs_add_piece(bv, -1, 0, h->hdr + pos, (h->hdr_len < end ? h->hdr_len : end) - pos);
		pos = h->hdr_len < end ? h->hdr_len : end;
	}
	for (int64_t i = r->lo; i < r->hi && pos < end; i++) {
		uint64_t start = part == 2 ? h->hdr_len + (uint64_t)i * fd->record_size : r->offs[i];
		uint64_t stop = part == 2 ? start + fd->record_size : r->offs[i + 1];
		if (stop <= pos)
			continue;
		uint64_t in = pos - start, n = (stop < end ? stop : end) - pos;
		const zr_record_stat *st = &r->st[i];
		if (part == 0 || (st->present && st->physical_len == fd->record_size)) {
			zrfs_add_piece(bv, st->fd, (off_t)(st->offset + in),
				       maps ? maps[i - r->lo].data + in : NULL, n);
		} else {
			for (uint64_t z = 0; z < n; z += sizeof zero_record)
				zrfs_add_piece(bv, -1, 0, zero_record,
					       n - z < sizeof zero_record ? n - z : sizeof zero_record);
		}
		pos += n;
	}
	return bv;
}

/* Where records lo .. hi - 1 of a raw batch are mapped (zr_gather of a raw
 * field copies nothing); NULL if they are not, and the pieces fall back to
 * reading the files. */
static const zr_slice *raw_maps(struct zrfs *fs, unsigned field, const struct raw_batch *r,
				zr_batch **g)
{
	size_t n;

	*g = NULL;
	return zr_gather(fs->ds, field, r->ids + r->lo, (size_t)(r->hi - r->lo), g) == 0
		       ? zr_batch_records(*g, &n)
		       : NULL;
}

/* Reply with [off, off + size) of a raw field's batch file (see raw_pieces). */
static void read_raw(fuse_req_t req, struct zrfs *fs, const struct where *w, unsigned field,
		     unsigned part, size_t size, off_t off)
{
	struct raw_batch r = {0};
	zr_batch *g;
	int rc = raw_layout(fs, w, field, part, (uint64_t)off, (uint64_t)off + size, &r);

	if (rc < 0) {
		fuse_reply_err(req, zrfs_errno(rc));
		return;
	}
	const zr_slice *maps = raw_maps(fs, field, &r, &g);
	struct fuse_bufvec *bv = raw_pieces(&fs->fields[field], &r, maps, part, (uint64_t)off,
					    (uint64_t)off + size);
	if (bv)
		zrfs_reply_bufvec(req, fs, bv,
				  hinted(fs->batches, batch_key(w->slot, w->step, field)));
	else
		fuse_reply_err(req, ENOMEM);
	zr_batch_release(g);
	free(bv);
	raw_free(&r);
}

static int get_blob(struct zrfs *fs, const struct where *w, unsigned field, bool prefetch,
		    struct zrfs_cached **e, const uint8_t **data, uint64_t *len);

static void enqueue_ahead(struct zrfs *fs, const struct where *w, unsigned field)
{
	struct zrfs_batches *b = fs->batches;

	if (!b->running)
		return;
	pthread_mutex_lock(&b->lock);
	for (uint64_t k = w->step + 1; k <= w->step + fs->opts.prefetch && k < zs_steps(w->s); k++) {
		bool queued = zrfs_cache_has(fs->cache, batch_key(w->slot, k, field));
		for (unsigned i = 0; i < b->qlen && !queued; i++) {
			const struct job *j = &b->queue[(b->qhead + i) % b->qcap];
			queued = !j->drop && j->slot == w->slot && j->step == k && j->field == field;
		}
		if (!queued && b->qlen < b->qcap)
			b->queue[(b->qhead + b->qlen++) % b->qcap] =
				(struct job){w->slot, k, field, false};
	}
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
}

static void enqueue_drop(struct zrfs *fs, const struct where *w)
{
	struct zrfs_batches *b = fs->batches;

	if (!b->running)
		return;
	pthread_mutex_lock(&b->lock);
	if (b->qlen < b->qcap)
		b->queue[(b->qhead + b->qlen++) % b->qcap] =
			(struct job){w->slot, w->step - fs->opts.drop_behind, 0, true};
	pthread_cond_signal(&b->cond);
	pthread_mutex_unlock(&b->lock);
}

static int get_blob(struct zrfs *fs, const struct where *w, unsigned field, bool prefetch,
		    struct zrfs_cached **e, const uint8_t **data, uint64_t *len)
{
	struct assemble a = {fs, w->s, w->epoch, w->step, field};
	uint64_t key = batch_key(w->slot, w->step, field);

	if (prefetch)
		enqueue_ahead(fs, w, field);
	return zrfs_cache_get(fs->cache, key, load_batch, &a, e, data, len);
}

static void *prefetcher(void *arg)
{
	struct zrfs *fs = arg;
	struct zrfs_batches *b = fs->batches;

	pthread_mutex_lock(&b->lock);
	while (!b->stop) {
		if (b->qlen == 0) {
			pthread_cond_wait(&b->cond, &b->lock);
			continue;
		}
		struct job j = b->queue[b->qhead];
		b->qhead = (b->qhead + 1) % b->qcap;
		b->qlen--;
		pthread_mutex_unlock(&b->lock);
		if (j.drop) {
			for (unsigned kind = K_IDS; kind < K_FIELD0 + 3 * fs->nfields; kind++)
				fuse_lowlevel_notify_inval_inode(fs->se, step_ino(j.slot, j.step, kind),
								 0, 0);
			for (unsigned f = 0; f < fs->nfields; f++)
				if (fs->fields[f].flate)
					zrfs_cache_forget(fs->cache, batch_key(j.slot, j.step, f));
			pthread_mutex_lock(&b->lock);
			continue;
		}
		struct where w = {.slot = j.slot, .step = j.step};
		struct zrfs_cached *e;
		const uint8_t *data;
		uint64_t len;
		w.s = slot_sampler(b, j.slot, &w.epoch, &w.spec);
		if (!fs->fields[j.field].flate) {
			/* raw: start the disk on the records; the kernel caches them */
			struct raw_batch r = {0};
			if (raw_layout(fs, &w, j.field, 0, 0, UINT64_MAX, &r) == 0) {
				zr_batch *g;
				const zr_slice *maps = raw_maps(fs, j.field, &r, &g);
				struct fuse_bufvec *bv =
					raw_pieces(&fs->fields[j.field], &r, maps, 0, 0, UINT64_MAX);
				if (bv)
					zrfs_read_ahead_bufvec(fs, bv);
				free(bv);
				zr_batch_release(g);
				raw_free(&r);
				uint64_t key = batch_key(j.slot, j.step, j.field);
				pthread_mutex_lock(&b->lock);
				b->hinted[hint_slot(key)] = key;
				pthread_mutex_unlock(&b->lock);
			}
		} else if (get_blob(fs, &w, j.field, false, &e, &data, &len) == 0) {
			zrfs_cache_release(fs->cache, e);
		}
		pthread_mutex_lock(&b->lock);
	}
	pthread_mutex_unlock(&b->lock);
	return NULL;
}

static int info_json(struct zrfs *fs, const struct where *w, char *buf, size_t cap)
{
	const zs_spec *sp = zs_sampler_spec(w->s);
	char canon[ZS_SPEC_MAX + 1];

	zs_spec_format(sp, canon, sizeof canon);
	return snprintf(buf, cap,
			"{\n  \"spec\": \"%s\",\n  \"canonical\": \"%s\",\n  \"epoch\": %llu,\n"
			"  \"step\": %llu,\n  \"steps\": %llu,\n  \"rank\": %u,\n  \"world\": %u,\n"
			"  \"seed\": %llu,\n  \"batch_size\": %u,\n  \"records\": %llu\n}\n",
			fs->batches->specs[w->spec].name, canon, (unsigned long long)w->epoch,
			(unsigned long long)w->step, (unsigned long long)zs_steps(w->s), sp->rank,
			sp->world, (unsigned long long)zs_batch_seed(w->s, w->epoch, w->step),
			zs_batch_size(w->s, w->step), (unsigned long long)fs->n);
}

/* Size of a step file; assembles the batch for a flate <field>. */
static int step_file_size(struct zrfs *fs, const struct where *w, uint64_t *size)
{
	uint32_t bsz = zs_batch_size(w->s, w->step);
	char info[1024];

	if (w->kind == K_IDS) {
		*size = (uint64_t)bsz * 8;
	} else if (w->kind == K_INFO) {
		*size = (uint64_t)info_json(fs, w, info, sizeof info);
	} else {
		unsigned f = (w->kind - K_FIELD0) / 3, part = (w->kind - K_FIELD0) % 3;
		if (part == 1) {
			*size = ((uint64_t)bsz + 1) * 8;
		} else if (part == 2) {
			struct zrfs_npy h;
			if (zrfs_npy_header(fs->fields[f].spec, bsz, fs->fields[f].record_size, &h) < 0)
				return -EIO;
			*size = h.size;
		} else if (!fs->fields[f].flate) {
			struct raw_batch r = {0};
			int rc = raw_layout(fs, w, f, 0, 0, UINT64_MAX, &r);
			if (rc < 0)
				return -zrfs_errno(rc);
			*size = r.offs[r.n];
			raw_free(&r);
		} else {
			struct zrfs_cached *e;
			const uint8_t *data;
			uint64_t len;
			int rc = get_blob(fs, w, f, false, &e, &data, &len);
			if (rc < 0)
				return -zrfs_errno(rc);
			*size = len - ((uint64_t)bsz + 1) * 8;
			zrfs_cache_release(fs->cache, e);
		}
	}
	return 0;
}

/* ---- the callbacks' halves ---- */

int zrfs_batches_attr(struct zrfs *fs, fuse_ino_t ino, struct stat *st)
{
	struct where w = {0};
	uint64_t size;
	int rc;

	switch (decode(fs, ino, &w)) {
	case N_TOP:
	case N_SPEC:
	case N_EPOCH:
		zrfs_base_attr(fs, ino, S_IFDIR | 0555, st);
		st->st_nlink = 2;
		return 0;
	case N_STEP:
		if (w.kind == K_STEPDIR) {
			zrfs_base_attr(fs, ino, S_IFDIR | 0555, st);
			st->st_nlink = 2;
			return 0;
		}
		if ((rc = step_file_size(fs, &w, &size)) < 0)
			return rc;
		zrfs_base_attr(fs, ino, S_IFREG | 0444, st);
		zrfs_file_size(st, size);
		return 0;
	case N_NONE:
		break;
	}
	return -ENOENT;
}

/* Decimal without sign or leading zeros, at most @max. */
static int parse_dec(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	size_t i = 0;

	if (s[0] == '0' && s[1])
		return -ENOENT;
	for (; s[i] >= '0' && s[i] <= '9'; i++) {
		if (i >= 19 || (v = v * 10 + (uint64_t)(s[i] - '0')) > max)
			return -ENOENT;
	}
	if (i == 0 || s[i])
		return -ENOENT;
	*out = v;
	return 0;
}

static unsigned step_kind(struct zrfs *fs, const char *name)
{
	size_t len = strlen(name);

	if (strcmp(name, "ids") == 0)
		return K_IDS;
	if (strcmp(name, "info.json") == 0)
		return K_INFO;
	for (unsigned f = 0; f < fs->nfields; f++) {
		const struct zrfs_field *fd = &fs->fields[f];
		if (len < fd->name_len || memcmp(name, fd->spec->name, fd->name_len) != 0)
			continue;
		if (name[fd->name_len] == 0)
			return K_FIELD0 + 3 * f;
		if (strcmp(name + fd->name_len, ".offsets") == 0)
			return K_FIELD0 + 3 * f + 1;
		if (fd->has_npy && strcmp(name + fd->name_len, ".npy") == 0)
			return K_FIELD0 + 3 * f + 2;
	}
	return K_STEPDIR; /* no such file */
}

int zrfs_batches_lookup(struct zrfs *fs, fuse_ino_t parent, const char *name, fuse_ino_t *out)
{
	struct where w = {0};
	uint64_t v;
	int idx;

	switch (decode(fs, parent, &w)) {
	case N_TOP:
		if ((idx = spec_index(fs, name, false)) < 0)
			return idx;
		*out = INO_SPEC + (uint64_t)idx;
		return 0;
	case N_SPEC:
		if (strncmp(name, "epoch-", 6) != 0 || parse_dec(name + 6, ZS_EPOCH_MAX, &v) < 0)
			return -ENOENT;
		if ((idx = slot_of(fs->batches, w.spec, v)) < 0)
			return -ENOENT;
		*out = INO_EPOCH | (uint64_t)idx;
		return 0;
	case N_EPOCH:
		if (parse_dec(name, STEPS_MAX - 1, &v) < 0 || v >= zs_steps(w.s))
			return -ENOENT;
		*out = step_ino(w.slot, v, K_STEPDIR);
		return 0;
	case N_STEP: {
		unsigned kind = w.kind == K_STEPDIR ? step_kind(fs, name) : K_STEPDIR;
		if (kind == K_STEPDIR)
			return w.kind == K_STEPDIR ? -ENOENT : -ENOTDIR;
		*out = step_ino(w.slot, w.step, kind);
		return 0;
	}
	case N_NONE:
		break;
	}
	return -ENOENT;
}

int zrfs_batches_list(struct zrfs_listing *l, struct zrfs *fs, fuse_ino_t ino, off_t off)
{
	struct where w = {0};
	enum node node = decode(fs, ino, &w);
	char name[ZS_SPEC_MAX + 16];

	if (node == N_NONE)
		return -ENOENT;
	if (node == N_STEP && w.kind != K_STEPDIR)
		return -ENOTDIR;
	if (!zrfs_list_dots(l, fs, ino, off))
		return 0;
	for (uint64_t p = off > 2 ? (uint64_t)off : 2;; p++) {
		fuse_ino_t child;
		mode_t type = S_IFREG;
		if (node == N_TOP) {
			pthread_mutex_lock(&fs->batches->lock);
			bool more = p - 2 < fs->batches->nlisted;
			if (more)
				snprintf(name, sizeof name, "%s", fs->batches->specs[p - 2].name);
			pthread_mutex_unlock(&fs->batches->lock);
			if (!more)
				break;
			child = INO_SPEC + (p - 2);
			type = S_IFDIR;
		} else if (node == N_SPEC) {
			int slot;
			if (p > 2 || (slot = slot_of(fs->batches, w.spec, 0)) < 0)
				break; /* epoch-0 listed; every epoch-<e> works on lookup */
			snprintf(name, sizeof name, "epoch-0");
			child = INO_EPOCH | (uint64_t)slot;
			type = S_IFDIR;
		} else if (node == N_EPOCH) {
			if (p - 2 >= zs_steps(w.s))
				break;
			snprintf(name, sizeof name, "%llu", (unsigned long long)(p - 2));
			child = step_ino(w.slot, p - 2, K_STEPDIR);
			type = S_IFDIR;
		} else {
			unsigned kind = (unsigned)(p - 2) + K_IDS;
			if (kind >= K_FIELD0 + 3 * fs->nfields)
				break;
			if (kind == K_IDS) {
				snprintf(name, sizeof name, "ids");
			} else if (kind == K_INFO) {
				snprintf(name, sizeof name, "info.json");
			} else {
				const struct zrfs_field *fd = &fs->fields[(kind - K_FIELD0) / 3];
				static const char *const suffix[] = {"", ".offsets", ".npy"};
				unsigned part = (kind - K_FIELD0) % 3;
				if (part == 2 && !fd->has_npy)
					continue;
				snprintf(name, sizeof name, "%s%s", fd->spec->name, suffix[part]);
			}
			child = step_ino(w.slot, w.step, kind);
		}
		if (!zrfs_list_add(l, fs, name, child, type, (off_t)p + 1))
			break;
	}
	return 0;
}

static void reply_part(fuse_req_t req, const uint8_t *data, uint64_t len, size_t size, off_t off)
{
	if ((uint64_t)off >= len)
		fuse_reply_buf(req, NULL, 0);
	else
		fuse_reply_buf(req, (const char *)data + off,
			       size < len - (uint64_t)off ? size : (size_t)(len - (uint64_t)off));
}

/* Reply with [off, off + size) of the .npy view of a flate field's batch,
 * assembled in @blob (B + 1 offsets, then the records): the pieces of a raw
 * batch's view, from the blob's memory. */
static void reply_flate_npy(fuse_req_t req, struct zrfs *fs, unsigned field, uint32_t bsz,
			    const uint8_t *blob, size_t size, off_t off)
{
	const struct zrfs_field *fd = &fs->fields[field];
	const uint8_t *bytes = blob + ((uint64_t)bsz + 1) * 8;
	struct raw_batch r = {.n = bsz};
	struct fuse_bufvec *bv = NULL;
	zr_slice *maps = NULL;
	int rc = npy_rows(fd, &r, (uint64_t)off, (uint64_t)off + size);

	if (rc == 0) {
		r.st = calloc(bsz ? bsz : 1, sizeof *r.st);
		maps = calloc(r.hi > r.lo ? (size_t)(r.hi - r.lo) : 1, sizeof *maps);
	}
	for (int64_t i = r.lo; r.st && maps && i < r.hi; i++) {
		uint64_t o0 = get_le64(blob + i * 8), len = get_le64(blob + (i + 1) * 8) - o0;
		/* a row is the record when it has the row's size, else zeros */
		r.st[i] = (zr_record_stat){.present = len == fd->record_size,
					   .physical_len = (uint32_t)len, .fd = -1};
		maps[i - r.lo] = (zr_slice){bytes + o0, len};
	}
	if (rc == 0 && r.st && maps)
		bv = raw_pieces(fd, &r, maps, 2, (uint64_t)off, (uint64_t)off + size);
	if (bv)
		zrfs_reply_bufvec(req, fs, bv, true);
	else
		fuse_reply_err(req, rc < 0 ? zrfs_errno(rc) : ENOMEM);
	free(bv);
	free(maps);
	raw_free(&r);
}

void zrfs_batches_read(fuse_req_t req, struct zrfs *fs, fuse_ino_t ino, size_t size, off_t off)
{
	struct where w = {0};
	struct zrfs_cached *e;
	const uint8_t *data;
	uint64_t len;
	uint32_t bsz;
	int rc;

	if (decode(fs, ino, &w) != N_STEP) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (w.kind == K_STEPDIR) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	bsz = zs_batch_size(w.s, w.step);
	if (off == 0 && fs->opts.drop_behind && w.step >= fs->opts.drop_behind)
		enqueue_drop(fs, &w);
	if (w.kind == K_IDS) {
		uint64_t *ids = malloc((size_t)zs_batch_max(w.s) * 8);
		uint8_t *le = malloc((size_t)bsz * 8 + 1);
		int64_t n = ids && le ? zs_batch(w.s, w.epoch, w.step, ids) : -1;
		if (n > 0)
			put_le64s(le, ids, (size_t)n);
		if (n < 0)
			fuse_reply_err(req, ENOMEM);
		else
			reply_part(req, le, (uint64_t)n * 8, size, off);
		free(ids);
		free(le);
		return;
	}
	if (w.kind == K_INFO) {
		char info[1024];
		int n = info_json(fs, &w, info, sizeof info);
		reply_part(req, (const uint8_t *)info, (uint64_t)n, size, off);
		return;
	}
	unsigned f = (w.kind - K_FIELD0) / 3, part = (w.kind - K_FIELD0) % 3;
	uint64_t head = ((uint64_t)bsz + 1) * 8;
	if (!fs->fields[f].flate) {
		if (fs->opts.prefetch > 0 && off == 0)
			enqueue_ahead(fs, &w, f);
		if (part != 1) {
			read_raw(req, fs, &w, f, part, size, off);
			return;
		}
		struct raw_batch r = {0};
		uint8_t *le;
		if ((rc = raw_layout(fs, &w, f, 1, 0, UINT64_MAX, &r)) < 0) {
			fuse_reply_err(req, zrfs_errno(rc));
			return;
		}
		le = malloc(head);
		if (le) {
			put_le64s(le, r.offs, (size_t)r.n + 1);
			reply_part(req, le, head, size, off);
		} else {
			fuse_reply_err(req, ENOMEM);
		}
		free(le);
		raw_free(&r);
		return;
	}
	if ((rc = get_blob(fs, &w, f, fs->opts.prefetch > 0 && off == 0, &e, &data, &len)) < 0) {
		fuse_reply_err(req, zrfs_errno(rc));
		return;
	}
	if (part == 0) {
		reply_part(req, data + head, len - head, size, off);
	} else if (part == 1) {
		reply_part(req, data, head, size, off);
	} else {
		reply_flate_npy(req, fs, f, bsz, data, size, off);
	}
	zrfs_cache_release(fs->cache, e);
}

/* ---- set-up ---- */

int zrfs_batches_create(struct zrfs *fs, const char *specs)
{
	struct zrfs_batches *b = calloc(1, sizeof *b);
	char *list = specs ? strdup(specs) : NULL, *save = NULL;
	int rc = 0;

	if (!b || (specs && !list))
		goto nomem;
	b->specs = calloc(SPECS_MAX, sizeof *b->specs);
	b->slots = calloc(SLOTS_MAX, sizeof *b->slots);
	b->qcap = 64;
	b->queue = calloc(b->qcap, sizeof *b->queue);
	if (!b->specs || !b->slots || !b->queue)
		goto nomem;
	pthread_mutex_init(&b->lock, NULL);
	pthread_cond_init(&b->cond, NULL);
	fs->batches = b;
	for (char *s = list ? strtok_r(list, ":", &save) : NULL; s && rc == 0;
	     s = strtok_r(NULL, ":", &save)) {
		if (spec_index(fs, s, true) < 0) {
			fprintf(stderr, "zrfs: -o batches: '%s': %s\n", s, zs_errmsg());
			rc = -EINVAL;
		}
	}
	if (rc == 0 && fs->n > 0)
		spec_index(fs, DEFAULT_SPEC, true);
	free(list);
	return rc;
nomem:
	free(list);
	if (b) {
		free(b->specs);
		free(b->slots);
		free(b->queue);
		free(b);
	}
	fs->batches = NULL;
	fprintf(stderr, "zrfs: out of memory\n");
	return -ENOMEM;
}

/* Start the background threads (one per CPU, at most THREADS_MAX and
 * prefetch, at least one): after fuse_daemonize(), whose fork() would leave
 * them behind in the parent (and their condition variable waited on). */
void zrfs_batches_start(struct zrfs *fs)
{
	struct zrfs_batches *b = fs->batches;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned want = cpus < 1 ? 1 : cpus > THREADS_MAX ? THREADS_MAX : (unsigned)cpus;

	if (!b || b->running || (fs->opts.prefetch == 0 && fs->opts.drop_behind == 0))
		return;
	if (want > fs->opts.prefetch)
		want = fs->opts.prefetch > 0 ? fs->opts.prefetch : 1;
	while (b->nthreads < want &&
	       pthread_create(&b->threads[b->nthreads], NULL, prefetcher, fs) == 0)
		b->nthreads++;
	b->running = b->nthreads > 0;
}

void zrfs_batches_destroy(struct zrfs *fs)
{
	struct zrfs_batches *b = fs->batches;

	if (!b)
		return;
	if (b->running) {
		pthread_mutex_lock(&b->lock);
		b->stop = true;
		pthread_cond_broadcast(&b->cond);
		pthread_mutex_unlock(&b->lock);
		for (unsigned i = 0; i < b->nthreads; i++)
			pthread_join(b->threads[i], NULL);
	}
	if (tl_reader) { /* this thread's: it may not exit before the dataset closes */
		pthread_setspecific(reader_key, NULL);
		zr_reader_close(tl_reader);
		tl_reader = NULL;
	}
	for (uint32_t i = 0; i < b->nspecs; i++)
		zs_sampler_destroy(b->specs[i].s);
	free(b->specs);
	free(b->slots);
	free(b->queue);
	pthread_mutex_destroy(&b->lock);
	pthread_cond_destroy(&b->cond);
	free(b);
	fs->batches = NULL;
}
