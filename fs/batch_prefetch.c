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
 * A step shows one view, for all its files: the view current when a number
 * of one of its files was first found (a lookup, a listing), which the
 * step's pin keeps (struct step_pin), referenced by every number of its
 * files found and not let go (the kernel holds it, or a reply is on its
 * way) and by its hold. A step is held from its first lookup until nobody
 * looked up a file of it for -o hold_ms (5 s): held, it keeps its view when
 * the kernel forgets its files of itself (memory pressure, a pass over the
 * tables that drops the names under /.batches), so a reader of a step's
 * ids, then its offsets, then its data, each opened in turn, sees one
 * state however many other steps are read meanwhile (a reader opens a
 * step's files in turn within milliseconds; one that waits longer keeps
 * one of them open). A pin holds its epoch's slot as a number of it does
 * (an epoch given back and opened again is ordered and shown anew). A
 * step let go is told to the kernel to forget (its name and its files'
 * pages), and the pin goes with the last of its files; a step whose file
 * is open stays, with its view, so no reader sees a step change under it
 * (and is told again every second: once closed, it goes). A view held is
 * an older state the writer must keep a journal for, so what is held is
 * bounded by states, not by steps: the steps held show HELD_STATES_MAX
 * states at most, and past that those of the first state held are let go
 * (a reader of step 0 of every epoch with a commit between each holds 64
 * states, not one per epoch); and HELD_STEPS_MAX steps at most, past which
 * the one used least recently goes. So readers at work on many steps at
 * once never make a step go from under one of them; 64 commits, or 4,096
 * other steps read, within hold_ms can.
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
#define HELD_STATES_MAX 64   /* older states the steps held keep alive */
#define HELD_STEPS_MAX 4096  /* steps held (each keeps its epoch: well under a table) */
#define ASK_MAX 64           /* steps let go asked to be forgotten again at a time */
#define PRUNE_AGAIN_MS 1000 /* a step let go and held is asked back this often */

enum job_kind {
	JOB_AHEAD,            /* make a step of a field ready */
	JOB_DROP,             /* drop a step's files from the page cache, and its pin */
	JOB_LET_GO,           /* ... its pin left to the kernel's FORGETs */
	JOB_PASS,             /* a pass over the spec and epoch tables */
};

/* A job on a step holds its slot (the tables keep it open). */
struct job {
	enum job_kind kind;
	struct batch_step at; /* not for JOB_PASS */
	struct zrfs_view *v;  /* referenced: the view the step shows (JOB_AHEAD) */
	unsigned field;
};

/* The view a step shows (see the top). */
struct step_pin {
	struct zrfs_link link;    /* in pins, by the step directory's number */
	uint32_t slot;
	uint64_t step;
	struct zrfs_view *v;      /* referenced */
	unsigned refs;            /* numbers of its files found, and its hold */
	bool held;
	struct zrfs_node use;     /* among the held, by last use */
	struct step_pin *gone;    /* the next in a list of pins dropped */
	uint64_t used_ms;         /* the last lookup of one of its files (zrfs_now_ms) */
};

/* A state steps held show, and how many of them. */
struct held_state {
	const struct zrfs_view *v; /* the held steps' pins reference it */
	unsigned steps;
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
	struct zrfs_table pins;   /* struct step_pin */
	struct zrfs_list held;    /* the steps held, least recently used first */
	unsigned nheld;
	struct held_state states[HELD_STATES_MAX]; /* theirs, the first held first */
	unsigned nstates;
	uint64_t asked_ms;        /* steps let go and held were last asked back then, */
	size_t asked_from;        /* ... those after this many of them */
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
		zrfs_batch_slot_ref(fs, j->at.slot);
	q->queue[(q->qhead + q->qlen++) % QUEUE_MAX] = *j;
	return true;
}

/* Job @j ran, or never will: what it referenced is put. */
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
		/* the view the step will show: the one it is pinned to, else the
		 * current one, which a lookup now would pin. Nothing is pinned
		 * here: a step never looked up holds no view, and what is made
		 * from a view the step does not show is another cache entry
		 * (tagged with its generation), never served for it. */
		if (!(j.v = zrfs_step_view(fs, &j.at)))
			j.v = zrfs_view_current(fs);
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

/* ---- step pins ---- */

static struct step_pin *pin_find(const struct zrfs_prefetch *q, uint32_t slot, uint64_t step)
{
	fuse_ino_t ino = step_ino(slot, step, STEP_DIR);

	for (struct zrfs_link *l = zrfs_table_first(&q->pins, zrfs_hash_u64(ino)); l;
	     l = zrfs_table_next(l)) {
		struct step_pin *p = zrfs_container(l, struct step_pin, link);
		if (p->slot == slot && p->step == step)
			return p;
	}
	return NULL;
}

/* One reference less to pin @p (under the lock): whether it goes (the
 * caller frees it, after the lock: pin_free). */
static bool pin_drop(struct zrfs_prefetch *q, struct step_pin *p)
{
	if (--p->refs)
		return false;
	zrfs_table_del(&q->pins, &p->link);
	return true;
}

/* Free pin @p, dropped (not under the lock: its slot's reference goes last,
 * which may let the slot go). */
static void pin_free(struct zrfs *fs, struct step_pin *p)
{
	struct batch_step at = {.slot = p->slot, .step = p->step};

	zrfs_view_put(p->v);
	zrfs_batch_uncache(fs, &at); /* its next view may be another */
	free(p);
	zrfs_batch_unref(fs, epoch_ino(at.slot));
}

/* Free the pins of list @gone, dropped. */
static void pins_free(struct zrfs *fs, struct step_pin *gone)
{
	while (gone) {
		struct step_pin *p = gone;
		gone = p->gone;
		pin_free(fs, p);
	}
}

static struct step_pin *held_pin(struct zrfs_node *n)
{
	return n ? zrfs_container(n, struct step_pin, use) : NULL;
}

static unsigned state_place(const struct zrfs_prefetch *q, const struct zrfs_view *v)
{
	unsigned i = 0;

	while (i < q->nstates && q->states[i].v != v)
		i++;
	return i;
}

/* Let go of held step @p (under the lock): it goes, onto list @gone
 * (pins_free after the lock), if nothing else refers to it; else, with
 * @ask, the kernel is told to forget its files (a full queue leaves that
 * to let_go_again). */
static void unhold(struct zrfs *fs, struct step_pin *p, bool ask, struct step_pin **gone)
{
	struct zrfs_prefetch *q = fs->prefetch;
	unsigned i = state_place(q, p->v);
	struct batch_step at = {.slot = p->slot, .step = p->step};

	zrfs_list_del(&q->held, &p->use);
	p->held = false;
	q->nheld--;
	if (--q->states[i].steps == 0)
		memmove(q->states + i, q->states + i + 1,
			(--q->nstates - i) * sizeof *q->states);
	if (pin_drop(q, p)) {
		p->gone = *gone;
		*gone = p;
	} else if (ask) {
		push_job(fs, JOB_LET_GO, &at);
	}
}

/* Hold new step @p (under the lock). Past HELD_STATES_MAX states, the
 * steps of the first held are let go; past HELD_STEPS_MAX steps, the one
 * used least recently. */
static void hold(struct zrfs *fs, struct step_pin *p, struct step_pin **gone)
{
	struct zrfs_prefetch *q = fs->prefetch;
	unsigned i = state_place(q, p->v);

	if (i == q->nstates && q->nstates == HELD_STATES_MAX) {
		const struct zrfs_view *first = q->states[0].v;
		for (struct zrfs_node *n = q->held.first, *next; n; n = next) {
			next = n->next;
			if (held_pin(n)->v == first)
				unhold(fs, held_pin(n), true, gone);
		}
		i = q->nstates; /* the first state went with its last step */
	}
	if (i == q->nstates)
		q->states[q->nstates++] = (struct held_state){p->v, 0};
	q->states[i].steps++;
	if (q->nheld == HELD_STEPS_MAX)
		unhold(fs, held_pin(q->held.first), true, gone);
	zrfs_list_append(&q->held, &p->use);
	p->held = true;
	if (q->nheld++ == 0) /* a waiting thread learns when it is due */
		pthread_cond_signal(&q->cond);
}

int zrfs_step_pin(struct zrfs *fs, const struct batch_step *at, struct zrfs_view *v)
{
	struct zrfs_prefetch *q = fs->prefetch;
	struct step_pin *p, *gone = NULL;
	int rc = 0;

	pthread_mutex_lock(&q->lock);
	if ((p = pin_find(q, at->slot, at->step)) != NULL) {
		p->refs++;
		p->used_ms = zrfs_now_ms();
		if (p->held) { /* now the most recently used */
			zrfs_list_del(&q->held, &p->use);
			zrfs_list_append(&q->held, &p->use);
		}
	} else if (!(p = malloc(sizeof *p))) {
		rc = -ENOMEM;
	} else {
		*p = (struct step_pin){.slot = at->slot, .step = at->step, .refs = 2,
				       .used_ms = zrfs_now_ms()};
		if (zrfs_table_add(&q->pins, &p->link, zrfs_hash_u64(step_dir_ino(at))) < 0) {
			free(p);
			rc = -ENOMEM;
		} else {
			p->v = zrfs_view_ref(v);
			/* the epoch stays while the pin does: given back, it would
			 * be ordered again, and the step show the view of then */
			zrfs_batch_ref(fs, epoch_ino(at->slot));
			hold(fs, p, &gone);
		}
	}
	pthread_mutex_unlock(&q->lock);
	pins_free(fs, gone);
	return rc;
}

void zrfs_step_unpin(struct zrfs *fs, uint32_t slot, uint64_t step)
{
	struct zrfs_prefetch *q = fs->prefetch;
	struct step_pin *p;
	bool gone = false;

	pthread_mutex_lock(&q->lock);
	if ((p = pin_find(q, slot, step)) != NULL)
		gone = pin_drop(q, p);
	pthread_mutex_unlock(&q->lock);
	if (gone)
		pin_free(fs, p);
}

struct zrfs_view *zrfs_step_view(struct zrfs *fs, const struct batch_step *at)
{
	struct zrfs_prefetch *q = fs->prefetch;
	struct zrfs_view *v = NULL;
	struct step_pin *p;

	pthread_mutex_lock(&q->lock);
	if ((p = pin_find(q, at->slot, at->step)) != NULL)
		v = zrfs_view_ref(p->v);
	pthread_mutex_unlock(&q->lock);
	return v;
}

/* ---- jobs ---- */

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

/* Slots @slots[0, n) were given back: drop what was made of their steps
 * (cached batches, hints) before another epoch takes them. None has a
 * pinned step: a pin holds its slot. */
static void drop_gone(struct zrfs *fs, const uint32_t *slots, uint32_t n)
{
	struct zrfs_prefetch *q = fs->prefetch;
	struct gone g = {{0}};

	for (uint32_t i = 0; i < n; i++)
		g.bits[slots[i] / 64] |= UINT64_C(1) << (slots[i] % 64);
	zrfs_cache_drop_if(fs->cache, key_gone, &g);
	pthread_mutex_lock(&q->lock);
	for (unsigned i = 0; i < HINTS; i++)
		if (key_gone(q->hinted[i], &g))
			q->hinted[i] = 0;
	pthread_mutex_unlock(&q->lock);
}

void zrfs_prefetch_pass_now(struct zrfs *fs)
{
	const uint32_t *gone;
	uint32_t n = zrfs_batch_tables_sweep(fs, &gone);

	if (n)
		drop_gone(fs, gone, n);
	zrfs_batch_tables_finish(fs, n);
}

/* Have the kernel forget step @at, and so the view it showed: its files'
 * names, inodes and pages and its directory's name, those in use but. Where
 * it can be asked to drop numbers (notify.c), the files first: a directory
 * goes only once nothing under it is cached. That takes no lock a request
 * holds; the names told one by one take the epoch directory's lock. */
static void forget_step(struct zrfs *fs, const struct batch_step *at)
{
	unsigned kinds = step_kinds(fs);
	fuse_ino_t *ino = malloc(kinds * sizeof *ino);
	char name[32];
	bool dropped = false;

	if (ino) {
		for (unsigned kind = STEP_IDS; kind < kinds; kind++)
			ino[kind - STEP_IDS] = step_ino(at->slot, at->step, kind);
		ino[kinds - 1] = step_dir_ino(at);
		dropped = zrfs_notify_prune(fs, ino, kinds);
		free(ino);
	}
	if (dropped)
		return;
	for (unsigned kind = STEP_IDS; kind < kinds; kind++)
		fuse_lowlevel_notify_inval_inode(fs->se, step_ino(at->slot, at->step, kind), 0, 0);
	snprintf(name, sizeof name, "%llu", (unsigned long long)at->step);
	fuse_lowlevel_notify_inval_entry(fs->se, epoch_ino(at->slot), name, strlen(name));
}

/* Steps let go and held, ASK_MAX at most, after the first @skip. */
struct let_go {
	struct batch_step at[ASK_MAX];
	unsigned n;
	size_t skip;
};

static int let_go_add(struct zrfs_link *l, void *ctx)
{
	struct step_pin *p = zrfs_container(l, struct step_pin, link);
	struct let_go *g = ctx;

	if (p->held)
		return 0;
	if (g->skip) {
		g->skip--;
		return 0;
	}
	g->at[g->n++] = (struct batch_step){.slot = p->slot, .step = p->step};
	return g->n == ASK_MAX;
}

/* Steps let go that the kernel still holds a file of (one open then may be
 * closed now): asked to be forgotten again every PRUNE_AGAIN_MS, up to
 * ASK_MAX at a time in turn, where the kernel can be asked to drop
 * numbers (it would keep an unused name until memory is short, and the
 * step its view). Under the lock, which it lets go and takes again if it
 * asks; the time the next ask is due, or 0. */
static uint64_t let_go_again(struct zrfs *fs, uint64_t now)
{
	struct zrfs_prefetch *q = fs->prefetch;
	struct let_go g;

	if (q->pins.n <= q->nheld || !atomic_load(&fs->prunes))
		return 0;
	if (now - q->asked_ms < PRUNE_AGAIN_MS)
		return q->asked_ms + PRUNE_AGAIN_MS;
	q->asked_ms = now;
	g.n = 0;
	g.skip = q->asked_from; /* those after the ones asked last time, in turn */
	zrfs_table_each(&q->pins, let_go_add, &g);
	q->asked_from = g.n == ASK_MAX ? q->asked_from + g.n : 0;
	pthread_mutex_unlock(&q->lock);
	for (unsigned i = 0; i < g.n; i++)
		forget_step(fs, &g.at[i]);
	pthread_mutex_lock(&q->lock);
	return now + PRUNE_AGAIN_MS;
}

static void run(struct zrfs *fs, const struct job *j)
{
	struct zrfs_prefetch *q = fs->prefetch;

	if (j->kind == JOB_PASS) {
		zrfs_prefetch_pass_now(fs);
	} else if (j->kind != JOB_AHEAD) {
		forget_step(fs, &j->at);
		/* a step dropped behind the reader is held no longer; a step
		 * keeps its view while the kernel holds a file of it */
		struct step_pin *p, *gone = NULL;
		if (j->kind == JOB_DROP) {
			pthread_mutex_lock(&q->lock);
			if ((p = pin_find(q, j->at.slot, j->at.step)) != NULL && p->held)
				unhold(fs, p, false, &gone);
			pthread_mutex_unlock(&q->lock);
		}
		if (gone)
			pins_free(fs, gone);
		else
			zrfs_batch_uncache(fs, &j->at);
	} else if (fs->fields[j->field].whole) {
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

/* Let go of the steps held idle for -o hold_ms at @now (under the lock):
 * the kernel is told to forget those it holds, the others go now, onto
 * list @gone (pins_free after the lock). The time the next one is due, or
 * 0: none is held. */
static uint64_t let_go_idle(struct zrfs *fs, uint64_t now, struct step_pin **gone)
{
	struct zrfs_prefetch *q = fs->prefetch;
	struct step_pin *p;

	while ((p = held_pin(q->held.first)) != NULL && now - p->used_ms >= fs->opts.hold_ms) {
		struct batch_step at = {.slot = p->slot, .step = p->step};
		if (p->refs > 1 && !push_job(fs, JOB_LET_GO, &at))
			return now + 100; /* the queue is full: a look again soon */
		unhold(fs, p, false, gone);
	}
	return p ? p->used_ms + fs->opts.hold_ms : 0;
}

/* Wait on @q->cond (its lock held) until signalled, or until @due_ms
 * (zrfs_now_ms's clock; 0: no time). */
static void wait_until(struct zrfs_prefetch *q, uint64_t due_ms)
{
	struct timespec ts;
	uint64_t now = zrfs_now_ms();

	if (!due_ms) {
		pthread_cond_wait(&q->cond, &q->lock);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t ns = (uint64_t)ts.tv_nsec + (due_ms > now ? due_ms - now : 0) * 1000000;
	ts.tv_sec += (time_t)(ns / 1000000000);
	ts.tv_nsec = (long)(ns % 1000000000);
	pthread_cond_timedwait(&q->cond, &q->lock, &ts);
}

static void *prefetcher(void *arg)
{
	struct zrfs *fs = arg;
	struct zrfs_prefetch *q = fs->prefetch;

	pthread_mutex_lock(&q->lock);
	while (!q->stop) {
		if (q->qlen == 0) {
			struct step_pin *gone = NULL;
			uint64_t due = let_go_idle(fs, zrfs_now_ms(), &gone);
			if (gone) {
				pthread_mutex_unlock(&q->lock);
				pins_free(fs, gone);
				pthread_mutex_lock(&q->lock);
				continue;
			}
			uint64_t again = let_go_again(fs, zrfs_now_ms());
			if (again && (!due || again < due))
				due = again;
			if (q->qlen == 0) /* a job pushed by let_go_idle runs first */
				wait_until(q, due);
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
	       zrfs_thread_start(&q->threads[q->nthreads], prefetcher, fs) == 0)
		q->nthreads++;
}

static void pin_drop_all(struct zrfs_link *l)
{
	struct step_pin *p = zrfs_container(l, struct step_pin, link);

	zrfs_view_put(p->v);
	free(p);
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
	/* the pins left are those held (the kernel holds no file any more) */
	zrfs_table_drain(&q->pins, pin_drop_all);
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->cond);
	free(q);
	fs->prefetch = NULL;
}
