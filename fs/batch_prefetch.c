/*
 * batch_prefetch.c - batch steps made ready ahead of a reader of
 * /.batches, and dropped behind it, by background threads.
 *
 * Every read at offset 0 of step k of a field queues steps k+1 ..
 * k+prefetch of the same field: flate batches are assembled ahead into the
 * cache, raw ones have their records read ahead by the kernel
 * (POSIX_FADV_WILLNEED, in -o readaround windows; a read of a raw step no
 * prefetch reached asks for its own records first), so a cold epoch
 * streams; a step made ready ahead is made from the view it will show (the
 * one a lookup pinned it to, else the current one) and pins nothing. It
 * also queues the drop
 * of step k - drop_behind: its files leave the kernel's page cache
 * (FUSE_NOTIFY_INVAL_INODE), its name the kernel's cache of names (so that
 * the kernel forgets the step and its view's pin with it), and its flate
 * batches the cache, whose buffers are then reused. Batch files are read once per
 * epoch; keeping them would double the memory the records take, and on
 * virtual machines every fresh page of page cache costs a host fault on
 * first touch (~10 us per 4 KiB on the machine of BENCHMARKS.md) that
 * recycled pages do not. The default drop_behind, 16, stays above the
 * batches a DataLoader holds in flight (workers x prefetch_factor + 1),
 * whose files a training process may map (np.load with mmap_mode): a mapped
 * page dropped under it is read again on its next access.
 *
 * The steps pinned to a view (batches.c: a step shows the view current at
 * its first lookup) are bounded: past STEP_PINS_MAX, the kernel is told to
 * forget the oldest (its name, its files' pages), and its FORGET unpins it;
 * a step whose file is open stays, with its view, so no reader sees a step
 * change under it. A pinned view is an older state the writer must keep a
 * journal for; a reader of random steps or of step 0 of every epoch would
 * otherwise pin one per step for as long as the kernel keeps its names (a
 * year, -o timeout). The latest STEP_PINS_MAX keep their views when the
 * kernel forgets them of itself (memory pressure, a pass over the tables
 * that drops the names under /.batches): a reader of a step's ids, then
 * its offsets, then its data, each opened in turn, sees one state. Such a
 * step, once older, is unpinned at once, unless the kernel has looked it
 * up again since (its FORGET does it then). The kernel has forgotten a
 * step when it has forgotten every lookup of its directory, which is
 * counted here: the FORGET of an inode it dropped can come after the reply
 * that handed it the same step again.
 */
#include "batch_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define THREADS_MAX 4
#define QUEUE_MAX 64
#define HINTS 256
#define STEP_PINS_MAX 64 /* above the steps a reader has in flight (drop_behind 16) */
#define PINNED_CAP 4096  /* steps tracked, those past the bound waiting for room in the queue */

enum job_kind {
	JOB_AHEAD,            /* make a step of a field ready */
	JOB_DROP,             /* drop a step's files from the page cache and its pin */
	JOB_LET_GO,           /* ... its pin left to the kernel's FORGET */
	JOB_PASS,             /* a pass over the spec and epoch tables */
};

/* A job on a step holds its slot (the tables keep it open). */
struct job {
	enum job_kind kind;
	struct batch_step at; /* not for JOB_PASS */
	struct zrfs_view *v;  /* held: the view the step shows (JOB_AHEAD) */
	unsigned field;
};

/* The lookups of a step directory that the kernel holds: those handed less
 * those it forgot (below 0 for a moment when a FORGET is heard before the
 * reply it counts is settled). None: 0. */
struct step_held {
	struct zrfs_link link; /* in holds, by number */
	fuse_ino_t ino;
	int64_t n;
};

struct zrfs_prefetch {
	pthread_mutex_t lock;     /* everything below */
	pthread_cond_t cond;      /* a job was queued, or stop */
	pthread_t threads[THREADS_MAX];
	unsigned nthreads;
	bool stop;
	struct job queue[QUEUE_MAX];
	unsigned qhead, qlen;
	/* raw batches whose records a prefetch asked the kernel to read
	 * ahead (batch keys, direct-mapped): reads of these need not ask */
	uint64_t hinted[HINTS];
	/* the steps pinned, oldest first: past STEP_PINS_MAX the oldest are
	 * let go as soon as the queue takes them */
	struct batch_step pinned[PINNED_CAP];
	unsigned npinned;
	struct zrfs_table holds; /* of step directories: struct step_held */
};

static unsigned hint_slot(uint64_t key)
{
	return (unsigned)(zrfs_hash_u64(key) % HINTS);
}

bool zrfs_prefetch_hinted(struct zrfs *fs, const struct batch_step *at, unsigned field)
{
	struct zrfs_prefetch *q = fs->prefetch;
	uint64_t key = batch_key(at->slot, at->step, field);
	bool yes;

	if (!q || q->nthreads == 0)
		return false;
	pthread_mutex_lock(&q->lock);
	yes = q->hinted[hint_slot(key)] == key;
	pthread_mutex_unlock(&q->lock);
	return yes;
}

/* Queue @j (under the lock) unless full; false if it was not queued. */
static bool push(struct zrfs *fs, const struct job *j)
{
	struct zrfs_prefetch *q = fs->prefetch;

	if (q->qlen == QUEUE_MAX)
		return false;
	if (j->kind != JOB_PASS)
		zrfs_batch_slot_hold(fs, j->at.slot);
	q->queue[(q->qhead + q->qlen++) % QUEUE_MAX] = *j;
	return true;
}

/* Job @j ran, or never will: what it held goes. */
static void job_done(struct zrfs *fs, const struct job *j)
{
	zrfs_view_put(j->v);
	if (j->kind != JOB_PASS)
		zrfs_batch_slot_put(fs, j->at.slot);
}

void zrfs_prefetch_ahead(struct zrfs *fs, const struct batch_step *at, unsigned field)
{
	struct zrfs_prefetch *q = fs->prefetch;

	if (!q || q->nthreads == 0)
		return;
	for (uint64_t k = at->step + 1; k <= at->step + fs->opts.prefetch && k < zs_steps(at->s);
	     k++) {
		struct job j = {JOB_AHEAD, *at, NULL, field};
		bool queued;
		j.at.step = k;
		/* the view the step will show: the one a lookup pinned it to, else
		 * the current one, which a lookup now would pin. Nothing is pinned
		 * here: a step never looked up holds no view, and what is made
		 * from a view the step does not show is another cache entry
		 * (tagged with its generation), never served for it. */
		if (!(j.v = zrfs_pinned_view(fs, step_dir_ino(&j.at))))
			j.v = zrfs_view_hold(fs);
		queued = zrfs_cache_has(fs->cache, batch_key(at->slot, k, field), j.v->gen);
		pthread_mutex_lock(&q->lock);
		for (unsigned i = 0; i < q->qlen && !queued; i++) {
			const struct job *o = &q->queue[(q->qhead + i) % QUEUE_MAX];
			queued = o->kind == JOB_AHEAD && o->at.slot == at->slot &&
				 o->at.step == k && o->field == field;
		}
		pthread_mutex_unlock(&q->lock);
		if (queued) {
			zrfs_view_put(j.v);
			continue;
		}
		pthread_mutex_lock(&q->lock);
		bool pushed = push(fs, &j);
		pthread_cond_broadcast(&q->cond);
		pthread_mutex_unlock(&q->lock);
		if (!pushed) {
			zrfs_view_put(j.v);
			break;
		}
	}
}

/* Queue job @kind, on step @at (not for JOB_PASS), under the lock; false
 * if the queue is full. */
static bool push_job(struct zrfs *fs, enum job_kind kind, const struct batch_step *at)
{
	struct job j = {kind, at ? *at : (struct batch_step){0}, NULL, 0};

	if (!push(fs, &j))
		return false;
	pthread_cond_signal(&fs->prefetch->cond);
	return true;
}

bool zrfs_prefetch_pass(struct zrfs *fs)
{
	struct zrfs_prefetch *q = fs->prefetch;
	bool queued;

	if (!q || q->nthreads == 0)
		return false;
	pthread_mutex_lock(&q->lock);
	queued = push_job(fs, JOB_PASS, NULL);
	pthread_mutex_unlock(&q->lock);
	return queued;
}

/* Where step directory @ino is in the pinned steps (under the lock), the
 * latest first; -1 if not there. */
static int find_pinned(const struct zrfs_prefetch *q, fuse_ino_t ino)
{
	for (unsigned i = q->npinned; i-- > 0;)
		if (step_dir_ino(&q->pinned[i]) == ino)
			return (int)i;
	return -1;
}

/* Take the pinned step at @i out of the list (under the lock). */
static void remove_pinned(struct zrfs_prefetch *q, unsigned i)
{
	memmove(q->pinned + i, q->pinned + i + 1, (--q->npinned - i) * sizeof *q->pinned);
}

static struct step_held *held_of(const struct zrfs_prefetch *q, fuse_ino_t ino)
{
	for (struct zrfs_link *l = zrfs_table_first(&q->holds, zrfs_hash_u64(ino)); l;
	     l = zrfs_table_next(l)) {
		struct step_held *h = zrfs_container(l, struct step_held, link);
		if (h->ino == ino)
			return h;
	}
	return NULL;
}

/* Count @d more lookups of step directory @ino the kernel holds (under the
 * lock): whether it holds one. Out of memory, the count starts at 0. */
static bool count_held(struct zrfs_prefetch *q, fuse_ino_t ino, int64_t d)
{
	struct step_held *h = held_of(q, ino);
	int64_t n = (h ? h->n : 0) + d;

	if (h && n == 0) {
		zrfs_table_del(&q->holds, &h->link);
		free(h);
	} else if (h) {
		h->n = n;
	} else if (n != 0 && (h = malloc(sizeof *h)) != NULL) {
		*h = (struct step_held){.ino = ino, .n = n};
		if (zrfs_table_add(&q->holds, &h->link, zrfs_hash_u64(ino)) < 0)
			free(h);
	}
	return n > 0;
}

static bool held(const struct zrfs_prefetch *q, fuse_ino_t ino)
{
	const struct step_held *h = held_of(q, ino);
	return h && h->n > 0;
}

void zrfs_prefetch_pinned(struct zrfs *fs, const struct batch_step *at)
{
	struct zrfs_prefetch *q = fs->prefetch;
	struct batch_step unpinned[8];
	unsigned k = 0, n = 0;

	if (!q)
		return;
	/* a step the kernel holds no lookup of is unpinned under the lock, so
	 * that a lookup of it settled meanwhile finds it pinned or not, never
	 * a pin going */
	pthread_mutex_lock(&q->lock);
	if (q->npinned == PINNED_CAP) { /* the oldest is left to its FORGET */
		fuse_ino_t ino = step_dir_ino(&q->pinned[0]);
		if (!held(q, ino) && zrfs_unpin(fs, ino))
			unpinned[n++] = q->pinned[0];
		memmove(q->pinned, q->pinned + 1, --q->npinned * sizeof *q->pinned);
	}
	q->pinned[q->npinned++] = *at;
	/* the oldest past the bound are let go, or unpinned if the kernel
	 * forgot them; those the queue has no room for (a prefetch fills it)
	 * wait for the next pin */
	for (; q->npinned - k > STEP_PINS_MAX && n < sizeof unpinned / sizeof *unpinned; k++) {
		fuse_ino_t ino = step_dir_ino(&q->pinned[k]);
		if (!held(q, ino)) {
			if (zrfs_unpin(fs, ino))
				unpinned[n++] = q->pinned[k];
		} else if (!push_job(fs, JOB_LET_GO, &q->pinned[k])) {
			break;
		}
	}
	if (k)
		memmove(q->pinned, q->pinned + k, (q->npinned -= k) * sizeof *q->pinned);
	pthread_mutex_unlock(&q->lock);
	for (unsigned i = 0; i < n; i++)
		zrfs_batch_forget(fs, &unpinned[i]); /* its next view may be another */
}

void zrfs_prefetch_unpinned(struct zrfs *fs, const struct batch_step *at)
{
	struct zrfs_prefetch *q = fs->prefetch;
	int i;

	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	if ((i = find_pinned(q, step_dir_ino(at))) >= 0)
		remove_pinned(q, (unsigned)i);
	pthread_mutex_unlock(&q->lock);
}

void zrfs_prefetch_forgot(struct zrfs *fs, const struct batch_step *at, uint64_t nlookup)
{
	struct zrfs_prefetch *q = fs->prefetch;
	fuse_ino_t ino = step_dir_ino(at);
	int64_t d = -(int64_t)(nlookup < INT32_MAX ? nlookup : INT32_MAX);
	bool gone;
	int i = -1;

	if (!q) {
		gone = zrfs_unpin(fs, ino);
	} else {
		/* held still (looked up again), or of the latest pinned: it
		 * keeps its view; else it goes, under the lock as above */
		pthread_mutex_lock(&q->lock);
		gone = !count_held(q, ino, d) &&
		       ((i = find_pinned(q, ino)) < 0 ||
			q->npinned - (unsigned)i > STEP_PINS_MAX) &&
		       zrfs_unpin(fs, ino);
		if (gone && i >= 0)
			remove_pinned(q, (unsigned)i);
		pthread_mutex_unlock(&q->lock);
	}
	if (gone)
		zrfs_batch_forget(fs, at); /* its next view may be another */
}

void zrfs_prefetch_handed(struct zrfs *fs, fuse_ino_t ino)
{
	struct zrfs_prefetch *q = fs->prefetch;

	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	count_held(q, ino, 1);
	pthread_mutex_unlock(&q->lock);
}

void zrfs_prefetch_drop_behind(struct zrfs *fs, const struct batch_step *at)
{
	struct zrfs_prefetch *q = fs->prefetch;
	struct batch_step behind = *at;

	if (!q || q->nthreads == 0 || fs->opts.drop_behind == 0 ||
	    at->step < fs->opts.drop_behind)
		return;
	behind.step -= fs->opts.drop_behind;
	pthread_mutex_lock(&q->lock);
	push_job(fs, JOB_DROP, &behind);
	pthread_mutex_unlock(&q->lock);
}

/* Slots given back, as a bitmap. */
struct gone {
	uint64_t bits[SLOTS_MAX / 64];
};

static bool is_gone(const struct gone *g, uint32_t slot)
{
	return g->bits[slot / 64] >> (slot % 64) & 1;
}

/* Whether cache or hint key @key is of a step of a slot given back. */
static bool key_gone(uint64_t key, const void *g)
{
	return key >> 63 && is_gone(g, (uint32_t)(key >> 40) & (SLOTS_MAX - 1));
}

/* Drop the counts of step directories of slots @g (NULL: all). */
static void drop_holds(struct zrfs_prefetch *q, const struct gone *g)
{
	for (size_t i = 0; i < q->holds.cap; i++)
		for (struct zrfs_link *l = q->holds.buckets[i], *next; l; l = next) {
			struct step_held *h = zrfs_container(l, struct step_held, link);
			next = l->next;
			if (!g || is_gone(g, ino_slot(h->ino))) {
				zrfs_table_del(&q->holds, l);
				free(h);
			}
		}
}

/* Slots @slots[0, n) were given back: forget what was made of their steps
 * (cached batches, hints, pinned steps) before another epoch takes them. */
static void forget_gone(struct zrfs *fs, const uint32_t *slots, uint32_t n)
{
	struct zrfs_prefetch *q = fs->prefetch;
	struct gone g = {{0}};
	unsigned k = 0;

	for (uint32_t i = 0; i < n; i++)
		g.bits[slots[i] / 64] |= UINT64_C(1) << (slots[i] % 64);
	zrfs_cache_forget_if(fs->cache, key_gone, &g);
	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	for (unsigned i = 0; i < HINTS; i++)
		if (key_gone(q->hinted[i], &g))
			q->hinted[i] = 0;
	/* the kernel holds no number of a slot given back: its steps' pins
	 * left are those kept after their FORGETs */
	for (unsigned i = 0; i < q->npinned; i++)
		if (!is_gone(&g, q->pinned[i].slot))
			q->pinned[k++] = q->pinned[i];
		else
			zrfs_unpin(fs, step_dir_ino(&q->pinned[i]));
	q->npinned = k;
	/* nor a lookup of their steps (none is counted but one the kernel
	 * did not tell, or miscounted) */
	drop_holds(q, &g);
	pthread_mutex_unlock(&q->lock);
}

void zrfs_prefetch_pass_now(struct zrfs *fs)
{
	const uint32_t *gone;
	uint32_t n = zrfs_batch_tables_sweep(fs, &gone);

	if (n)
		forget_gone(fs, gone, n);
	zrfs_batch_tables_finish(fs, n);
}

static void run(struct zrfs *fs, const struct job *j)
{
	struct zrfs_prefetch *q = fs->prefetch;

	if (j->kind == JOB_PASS) {
		zrfs_prefetch_pass_now(fs);
	} else if (j->kind != JOB_AHEAD) {
		char name[32];
		for (unsigned kind = STEP_IDS; kind < step_kinds(fs); kind++)
			fuse_lowlevel_notify_inval_inode(fs->se, step_ino(j->at.slot, j->at.step, kind),
							 0, 0);
		/* the kernel may forget the step now, and the view it showed */
		snprintf(name, sizeof name, "%llu", (unsigned long long)j->at.step);
		fuse_lowlevel_notify_inval_entry(fs->se, epoch_ino(j->at.slot), name, strlen(name));
		/* a step let go keeps its view while the kernel keeps the step
		 * (a file of it open): its FORGET unpins it */
		if (j->kind == JOB_DROP && zrfs_unpin(fs, step_dir_ino(&j->at)))
			zrfs_prefetch_unpinned(fs, &j->at);
		zrfs_batch_forget(fs, &j->at);
	} else if (fs->fields[j->field].flate) {
		zrfs_batch_assemble(fs, j->v, &j->at, j->field);
	} else {
		/* raw: start the disk on the records; the kernel caches them */
		uint64_t key = batch_key(j->at.slot, j->at.step, j->field);
		zrfs_batch_read_ahead(fs, j->v, &j->at, j->field);
		pthread_mutex_lock(&q->lock);
		q->hinted[hint_slot(key)] = key;
		pthread_mutex_unlock(&q->lock);
	}
}

static void *prefetcher(void *arg)
{
	struct zrfs *fs = arg;
	struct zrfs_prefetch *q = fs->prefetch;

	pthread_mutex_lock(&q->lock);
	while (!q->stop) {
		if (q->qlen == 0) {
			pthread_cond_wait(&q->cond, &q->lock);
			continue;
		}
		struct job j = q->queue[q->qhead];
		q->qhead = (q->qhead + 1) % QUEUE_MAX;
		q->qlen--;
		pthread_mutex_unlock(&q->lock);
		run(fs, &j);
		job_done(fs, &j);
		pthread_mutex_lock(&q->lock);
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

int zrfs_prefetch_create(struct zrfs *fs)
{
	struct zrfs_prefetch *q = calloc(1, sizeof *q);

	if (!q)
		return -ENOMEM;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->cond, NULL);
	fs->prefetch = q;
	return 0;
}

void zrfs_prefetch_start(struct zrfs *fs)
{
	struct zrfs_prefetch *q = fs->prefetch;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned want = cpus < 1 ? 1 : cpus > THREADS_MAX ? THREADS_MAX : (unsigned)cpus;

	if (!q || q->nthreads) /* one at least: the drops of pinned steps */
		return;
	if (want > fs->opts.prefetch)
		want = fs->opts.prefetch > 0 ? fs->opts.prefetch : 1;
	while (q->nthreads < want &&
	       pthread_create(&q->threads[q->nthreads], NULL, prefetcher, fs) == 0)
		q->nthreads++;
}

void zrfs_prefetch_destroy(struct zrfs *fs)
{
	struct zrfs_prefetch *q = fs->prefetch;

	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	q->stop = true;
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
	for (unsigned i = 0; i < q->nthreads; i++)
		pthread_join(q->threads[i], NULL);
	while (q->qlen) { /* jobs never run hold views and slots */
		job_done(fs, &q->queue[q->qhead]);
		q->qhead = (q->qhead + 1) % QUEUE_MAX;
		q->qlen--;
	}
	drop_holds(q, NULL);
	zrfs_table_free(&q->holds);
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->cond);
	free(q);
	fs->prefetch = NULL;
}
