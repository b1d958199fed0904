/*
 * batch_tables.c - the two tables of /.batches: the specs looked up by name
 * and the epochs of them opened (slots), each bounded, with a way back down.
 *
 * A spec directory is ZRFS_INO_SPEC + its index in the spec table; an
 * epoch directory, its steps and their files carry the epoch's slot (see
 * batch_i.h). A number names one thing for as long as anything may use it,
 * so an entry is given back, and its index to another, only when
 *   - nothing refers to it: each number of it that a lookup or a listing
 *     found holds a reference until the number is let go (subtree_i.h:
 *     at once if the kernel is not handed it, else when the kernel
 *     forgets it; inodes.c counts its lookups);
 *   - no prefetch job holds its slot.
 * The kernel keeps names for -o timeout (a year), so entries are asked
 * back: past half a table, a pass (run by a prefetch thread, which drops
 * what was made of the steps of the slots given back in between its
 * sweep and its finish) picks the least recently used entries down to a
 * quarter and tells the kernel to forget the name /.batches: every name
 * under it not in use goes, and their FORGETs bring the next pass, which
 * gives the entries asked back; the others stay, and are found again by
 * name. Where the kernel has FUSE_NOTIFY_INC_EPOCH (notify.c) that is an
 * epoch: the next path through /.batches drops what is under it (the one
 * a full table holds waiting is past it, and its FORGETs come with the
 * next lookup there); else FUSE_NOTIFY_INVAL_ENTRY in the root, which
 * waits for the root's lock. A name in use (a file of it open, a
 * directory someone is in) stays, with its entry. One notification does,
 * where one per name would take the kernel ~40 us each while lookups fill
 * the table; and one in the root
 * never waits for a lookup in /.batches, which holds that directory until
 * it is answered: so a lookup that finds a table full waits (up to a
 * second) for a pass to give something back. The steps a reader has just
 * read keep their views, and their epochs (batch_prefetch.c: a step's pin
 * holds its slot as a number does). The specs -o batches lists
 * never go. An epoch given back and opened again is ordered over the
 * records there are then, as after a remount.
 *
 * Sections: the tables, counts, the pass, set-up.
 */
#include "batch_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* past HIGH of a table's entries a pass asks the oldest back, down to LOW:
 * the room above is the lookups the kernel's FORGETs may lag behind */
#define HIGH(max) ((max) / 2)
#define LOW(max) ((max) / 4)
#define FULL_WAIT_MS 1000 /* a lookup waits this long for a full table */

/* What either table keeps of an entry's use. */
struct use {
	atomic_uint_least64_t refs;  /* numbers of it found and not let go */
	atomic_uint_least64_t stamp; /* the clock at its last lookup */
	atomic_uint jobs;     /* prefetch jobs holding it (slots only) */
	bool asked;           /* the kernel was asked to forget its name */
};

struct spec_entry {
	char name[ZS_SPEC_MAX + 1];
	zs_spec spec;
	struct use use;
	struct zrfs_link link; /* in by_name while live */
	uint32_t nslots;       /* open epochs of it */
	bool live;
};

/* An epoch of a spec, opened: its order over the records there were then. */
struct slot {
	uint32_t spec;
	uint64_t epoch;
	zs_sampler *s;         /* NULL: a free slot */
	struct use use;
	struct zrfs_link link; /* in by_epoch while open */
};

/* Which entries of a table are taken. */
struct tally {
	uint32_t top;          /* [0, top) have been used */
	uint32_t live, asked;  /* taken; of them, asked back */
	uint32_t *free;        /* indices below top given back */
	uint32_t nfree, max;
};

/* An entry's index and its last use (with its epochs', for a spec). */
struct aged {
	uint64_t stamp;
	uint32_t index;
};

/* An entry is written while taken, under the lock, before its number is
 * handed out, and stays unchanged until given back: while a number of it
 * is referenced or a job holds its slot, it may be read without the lock.
 * A count rises under the lock (a lookup by name), or for a number of an
 * entry referenced already (a step of an epoch the kernel holds). */
struct zrfs_batch_tables {
	pthread_mutex_t lock;      /* the tables and tallies, but entries' atomics */
	pthread_cond_t freed;      /* a pass gave entries back */
	pthread_mutex_t pass_lock; /* one pass at a time; the arrays below */
	struct spec_entry *specs;
	struct slot *slots;
	struct tally spec_tally, slot_tally;
	struct zrfs_table by_name, by_epoch;
	uint32_t nlisted;          /* specs [0, nlisted) are listed and stay */
	atomic_uint_least64_t clock; /* lookups by name so far (written under lock) */
	bool (*queue_pass)(struct zrfs *fs); /* the owner's: false if not queued */
	bool pass_queued;
	struct aged *aged;         /* the pass's: SLOTS_MAX */
	uint64_t *spec_stamp;      /* the pass's: SPECS_MAX */
	uint32_t *gone;            /* the pass's: SLOTS_MAX slots given back */
	struct why {               /* .why files (batches.c), by number % WHY_KEPT */
		fuse_ino_t ino;
		char text[WHY_TEXT_MAX];
	} *whys;
	uint64_t nwhys;            /* made so far */
};

/* ---- the tables ---- */

static uint64_t spec_hash(const char *name)
{
	return zrfs_hash(name, strlen(name), 0);
}

static uint64_t epoch_hash(uint32_t spec, uint64_t epoch)
{
	return zrfs_hash(&epoch, sizeof epoch, spec);
}

static int find_spec(struct zrfs_batch_tables *b, const char *name)
{
	uint64_t h = spec_hash(name);

	for (struct zrfs_link *l = zrfs_table_first(&b->by_name, h); l; l = zrfs_table_next(l)) {
		struct spec_entry *e = zrfs_container(l, struct spec_entry, link);
		if (strcmp(e->name, name) == 0)
			return (int)(e - b->specs);
	}
	return -ENOENT;
}

static int find_slot(struct zrfs_batch_tables *b, uint32_t spec, uint64_t epoch)
{
	uint64_t h = epoch_hash(spec, epoch);

	for (struct zrfs_link *l = zrfs_table_first(&b->by_epoch, h); l; l = zrfs_table_next(l)) {
		struct slot *e = zrfs_container(l, struct slot, link);
		if (e->spec == spec && e->epoch == epoch)
			return (int)(e - b->slots);
	}
	return -ENOENT;
}

/* Queue a pass unless one is (under the lock): threads that may wait for
 * the lock never hold the queue's. */
static void want_pass(struct zrfs *fs)
{
	struct zrfs_batch_tables *b = fs->batches;

	if (!b->pass_queued)
		b->pass_queued = b->queue_pass(fs); /* none: the next lookup asks again */
}

/* Whether @t has a free index (under the lock), after waiting for a pass
 * to give one back if it is full. */
static bool room(struct zrfs *fs, struct tally *t)
{
	struct zrfs_batch_tables *b = fs->batches;
	struct timespec until;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += FULL_WAIT_MS / 1000;
	while (t->nfree == 0 && t->top == t->max) {
		want_pass(fs);
		if (pthread_cond_timedwait(&b->freed, &b->lock, &until) == ETIMEDOUT)
			return t->nfree > 0;
	}
	return true;
}

/* A free index of @t, which has room (under the lock). */
static uint32_t take(struct tally *t)
{
	t->live++;
	return t->nfree ? t->free[--t->nfree] : t->top++;
}

/* A lookup found or made entry @u of @t (under the lock): it is in use
 * again, and its number found (a reference). A pass is due past HIGH,
 * counting out what was asked back. */
static void touch(struct zrfs *fs, struct tally *t, struct use *u)
{
	struct zrfs_batch_tables *b = fs->batches;

	atomic_fetch_add(&u->refs, 1);
	atomic_store_explicit(&u->stamp, atomic_fetch_add(&b->clock, 1) + 1,
			      memory_order_relaxed);
	if (u->asked) {
		u->asked = false;
		t->asked--;
	}
	if (t->live - t->asked > HIGH(t->max))
		want_pass(fs);
}

static void log_full(const char *what, const char *name, unsigned max)
{
	char esc[ZRFS_LOG_NAME_MAX];

	if (zrfs_log_admit())
		fuse_log(FUSE_LOG_ERR, "zrfs: %s/%s: %u %s in use at once (names or files of each "
			 "held): not opened\n", ZRFS_BATCHES_NAME,
			 zrfs_log_name(name, esc, sizeof esc), max, what);
}

int64_t zrfs_batch_spec_check(const char *name, uint64_t n, zs_spec *spec)
{
	zs_sampler *s = NULL;
	int64_t steps;

	if (zs_spec_parse(name, spec) < 0 || zs_sampler_create(&s, spec, n) < 0)
		return -1;
	steps = (int64_t)zs_steps(s);
	zs_sampler_destroy(s); /* each epoch has its own */
	return steps;
}

int zrfs_batch_spec_index(struct zrfs *fs, uint64_t n, const char *name, bool listed)
{
	struct zrfs_batch_tables *b = fs->batches;
	zs_spec spec;
	int idx;

	pthread_mutex_lock(&b->lock);
	if ((idx = find_spec(b, name)) >= 0)
		touch(fs, &b->spec_tally, &b->specs[idx].use);
	pthread_mutex_unlock(&b->lock);
	if (idx >= 0)
		return idx;
	if (zrfs_batch_spec_check(name, n, &spec) < 0) {
		char esc[ZRFS_LOG_NAME_MAX], why[ZRFS_LOG_NAME_MAX];
		if (!listed && zrfs_log_admit()) /* the reason may quote the name;
						    * -o batches says it itself */
			fuse_log(FUSE_LOG_ERR, "zrfs: %s/%s: %s\n", ZRFS_BATCHES_NAME,
				 zrfs_log_name(name, esc, sizeof esc),
				 zrfs_log_name(zs_errmsg(), why, sizeof why));
		return -ENOENT;
	}
	pthread_mutex_lock(&b->lock);
	/* another thread may have been first, also while this one waited for room */
	if ((idx = find_spec(b, name)) < 0 && room(fs, &b->spec_tally) &&
	    (idx = find_spec(b, name)) < 0) {
		struct spec_entry *e = &b->specs[idx = (int)take(&b->spec_tally)];
		snprintf(e->name, sizeof e->name, "%s", name);
		e->spec = spec;
		e->nslots = 0;
		e->live = true;
		zrfs_table_add(&b->by_name, &e->link, spec_hash(name));
		if (listed) /* set up makes them first */
			b->nlisted = (uint32_t)idx + 1;
	}
	if (idx >= 0)
		touch(fs, &b->spec_tally, &b->specs[idx].use);
	pthread_mutex_unlock(&b->lock);
	if (idx < 0)
		log_full("specs", name, SPECS_MAX);
	return idx < 0 ? -ENOENT : idx;
}

int zrfs_batch_slot_of(struct zrfs *fs, uint32_t spec, uint64_t epoch, uint64_t n)
{
	struct zrfs_batch_tables *b = fs->batches;
	zs_sampler *s = NULL;
	bool full = false;
	int idx;

	pthread_mutex_lock(&b->lock);
	if ((idx = find_slot(b, spec, epoch)) < 0) {
		full = !room(fs, &b->slot_tally);
		/* another thread may have opened it while this one waited */
		if (!full && (idx = find_slot(b, spec, epoch)) < 0 &&
		    zs_sampler_create(&s, &b->specs[spec].spec, n) == 0) {
			struct slot *e = &b->slots[idx = (int)take(&b->slot_tally)];
			*e = (struct slot){.spec = spec, .epoch = epoch, .s = s};
			zrfs_table_add(&b->by_epoch, &e->link, epoch_hash(spec, epoch));
			b->specs[spec].nslots++;
		}
	}
	if (idx >= 0)
		touch(fs, &b->slot_tally, &b->slots[idx].use);
	pthread_mutex_unlock(&b->lock);
	if (full) {
		char name[ZS_SPEC_MAX + 32];
		snprintf(name, sizeof name, "%s/epoch-%llu", b->specs[spec].name,
			 (unsigned long long)epoch);
		log_full("epochs", name, SLOTS_MAX);
	} else if (idx < 0 && zrfs_log_admit()) {
		fuse_log(FUSE_LOG_ERR, "zrfs: %s/%s/epoch-%llu: %s\n", ZRFS_BATCHES_NAME,
			 b->specs[spec].name, (unsigned long long)epoch, zs_errmsg());
	}
	return idx < 0 ? -ENOENT : idx;
}

fuse_ino_t zrfs_batch_why_keep(struct zrfs *fs, const char *text)
{
	struct zrfs_batch_tables *b = fs->batches;
	struct why *e;
	fuse_ino_t ino;

	pthread_mutex_lock(&b->lock);
	/* numbers go round in 32 bits: one comes back after 4 billion */
	ino = ZRFS_INO_WHY_FILE | (++b->nwhys & UINT32_MAX);
	e = &b->whys[ino % WHY_KEPT];
	e->ino = ino;
	snprintf(e->text, sizeof e->text, "%s", text);
	pthread_mutex_unlock(&b->lock);
	return ino;
}

int zrfs_batch_why_text(struct zrfs *fs, fuse_ino_t ino, char *buf)
{
	struct zrfs_batch_tables *b = fs->batches;
	const struct why *e = &b->whys[ino % WHY_KEPT];
	int rc = -ENOENT;

	pthread_mutex_lock(&b->lock);
	if (e->ino == ino) {
		memcpy(buf, e->text, WHY_TEXT_MAX);
		rc = (int)strlen(buf);
	}
	pthread_mutex_unlock(&b->lock);
	return rc;
}

const char *zrfs_batch_spec_name(struct zrfs *fs, uint32_t spec)
{
	struct zrfs_batch_tables *b = fs->batches;
	bool live;

	pthread_mutex_lock(&b->lock);
	live = spec < b->spec_tally.top && b->specs[spec].live;
	pthread_mutex_unlock(&b->lock);
	return live ? b->specs[spec].name : NULL;
}

const char *zrfs_batch_listed(struct zrfs *fs, uint32_t i)
{
	struct zrfs_batch_tables *b = fs->batches;
	bool listed;

	pthread_mutex_lock(&b->lock);
	listed = i < b->nlisted;
	pthread_mutex_unlock(&b->lock);
	return listed ? b->specs[i].name : NULL;
}

bool zrfs_batch_slot(struct zrfs *fs, uint32_t slot, struct batch_step *at, uint32_t *spec)
{
	struct zrfs_batch_tables *b = fs->batches;
	const struct slot *e = &b->slots[slot];
	bool open;

	pthread_mutex_lock(&b->lock);
	open = slot < b->slot_tally.top && e->s;
	pthread_mutex_unlock(&b->lock);
	if (!open)
		return false;
	*spec = e->spec;
	at->slot = slot;
	at->epoch = e->epoch;
	at->s = e->s;
	at->spec = b->specs[e->spec].name;
	return true;
}

/* ---- counts ---- */

/* The use of the entry node @ino is of (not the top directory). */
static struct use *use_of(struct zrfs_batch_tables *b, fuse_ino_t ino)
{
	if ((ino & (UINT64_C(3) << 60)) < ZRFS_INO_EPOCH)
		return &b->specs[(ino - ZRFS_INO_SPEC) & (SPECS_MAX - 1)].use;
	return &b->slots[ino_slot(ino)].use;
}

void zrfs_batch_ref(struct zrfs *fs, fuse_ino_t ino)
{
	struct zrfs_batch_tables *b = fs->batches;
	struct use *u = use_of(b, ino);

	atomic_fetch_add(&u->refs, 1);
	atomic_store_explicit(&u->stamp, atomic_load_explicit(&b->clock, memory_order_relaxed),
			      memory_order_relaxed);
}

void zrfs_batch_unref(struct zrfs *fs, fuse_ino_t ino)
{
	struct zrfs_batch_tables *b = fs->batches;
	struct use *u = use_of(b, ino);

	if (atomic_fetch_sub(&u->refs, 1) != 1)
		return;
	/* the last reference of an entry asked back: the next pass gives it back */
	pthread_mutex_lock(&b->lock);
	if (u->asked)
		want_pass(fs);
	pthread_mutex_unlock(&b->lock);
}

void zrfs_batch_slot_ref(struct zrfs *fs, uint32_t slot)
{
	atomic_fetch_add(&fs->batches->slots[slot].use.jobs, 1);
}

void zrfs_batch_slot_put(struct zrfs *fs, uint32_t slot)
{
	atomic_fetch_sub(&fs->batches->slots[slot].use.jobs, 1);
}

/* ---- the pass ---- */

/* Whether entry @u, asked back, is referenced by nothing (under the lock,
 * so that no lookup finds it meanwhile: see struct zrfs_batch_tables). */
static bool unheld(const struct use *u)
{
	return u->asked && atomic_load(&u->refs) == 0 && atomic_load(&u->jobs) == 0;
}

/* An entry of @t, of use @u, is free (under the lock); its index is not
 * free to take yet. */
static void give_back(struct tally *t, struct use *u)
{
	t->asked--;
	atomic_store(&u->stamp, 0);
	u->asked = false;
	t->live--;
}

/* Give back what was asked back and is unheld (under the lock). The slots
 * given back are b->gone[0, return), not yet free to take: what was made
 * of their steps is forgotten first. */
static uint32_t sweep(struct zrfs_batch_tables *b)
{
	uint32_t ngone = 0;
	bool specs = false;

	for (uint32_t i = 0; i < b->slot_tally.top; i++) {
		struct slot *e = &b->slots[i];
		if (!e->s || !unheld(&e->use))
			continue;
		zrfs_table_del(&b->by_epoch, &e->link);
		zs_sampler_destroy(e->s);
		e->s = NULL;
		b->specs[e->spec].nslots--;
		give_back(&b->slot_tally, &e->use);
		b->gone[ngone++] = i;
	}
	for (uint32_t i = b->nlisted; i < b->spec_tally.top; i++) {
		struct spec_entry *e = &b->specs[i];
		if (!e->live || e->nslots || !unheld(&e->use))
			continue;
		zrfs_table_del(&b->by_name, &e->link);
		e->live = false;
		give_back(&b->spec_tally, &e->use);
		b->spec_tally.free[b->spec_tally.nfree++] = i;
		specs = true;
	}
	if (specs)
		pthread_cond_broadcast(&b->freed);
	return ngone;
}

static uint64_t stamp_of(const struct use *u)
{
	return atomic_load_explicit(&u->stamp, memory_order_relaxed);
}

static int by_age(const void *x, const void *y)
{
	const struct aged *a = x, *c = y;

	return a->stamp < c->stamp ? -1 : a->stamp > c->stamp;
}

/* The entries of @t to ask back (past HIGH, down to LOW), oldest first,
 * from the @n in b->aged; 0 if none. */
static uint32_t to_ask(struct zrfs_batch_tables *b, const struct tally *t, uint32_t n)
{
	uint32_t want = t->live - t->asked - LOW(t->max);

	qsort(b->aged, n, sizeof *b->aged, by_age);
	return want < n ? want : n;
}

static void ask_back(struct tally *t, struct use *u)
{
	if (!u->asked) {
		u->asked = true;
		t->asked++;
	}
}

/* Ask back the least recently used slots past HIGH, down to LOW (under the
 * lock); whether any was. An epoch not asked back keeps its slot when
 * looked up again. */
static bool ask_slots(struct zrfs_batch_tables *b)
{
	struct tally *t = &b->slot_tally;
	uint32_t n = 0, want;

	if (t->live - t->asked <= HIGH(t->max))
		return false;
	for (uint32_t i = 0; i < t->top; i++)
		if (b->slots[i].s && !b->slots[i].use.asked)
			b->aged[n++] = (struct aged){stamp_of(&b->slots[i].use), i};
	want = to_ask(b, t, n);
	for (uint32_t k = 0; k < want; k++)
		ask_back(t, &b->slots[b->aged[k].index].use);
	return want > 0;
}

/* The same for specs; a spec's last use is that of its epochs too, and
 * its epochs are asked back with it. */
static bool ask_specs(struct zrfs_batch_tables *b)
{
	struct tally *t = &b->spec_tally;
	uint32_t n = 0, want;

	if (t->live - t->asked <= HIGH(t->max))
		return false;
	for (uint32_t i = 0; i < t->top; i++)
		b->spec_stamp[i] = stamp_of(&b->specs[i].use);
	for (uint32_t i = 0; i < b->slot_tally.top; i++) {
		const struct slot *e = &b->slots[i];
		if (e->s && b->spec_stamp[e->spec] < stamp_of(&e->use))
			b->spec_stamp[e->spec] = stamp_of(&e->use);
	}
	for (uint32_t i = b->nlisted; i < t->top; i++)
		if (b->specs[i].live && !b->specs[i].use.asked)
			b->aged[n++] = (struct aged){b->spec_stamp[i], i};
	want = to_ask(b, t, n);
	for (uint32_t k = 0; k < want; k++)
		ask_back(t, &b->specs[b->aged[k].index].use);
	for (uint32_t i = 0; i < b->slot_tally.top; i++)
		if (b->slots[i].s && b->specs[b->slots[i].spec].use.asked)
			ask_back(&b->slot_tally, &b->slots[i].use);
	return want > 0;
}

uint32_t zrfs_batch_tables_sweep(struct zrfs *fs, const uint32_t **gone)
{
	struct zrfs_batch_tables *b = fs->batches;
	uint32_t ngone;

	pthread_mutex_lock(&b->pass_lock);
	pthread_mutex_lock(&b->lock);
	b->pass_queued = false;
	ngone = sweep(b);
	pthread_mutex_unlock(&b->lock);
	*gone = b->gone;
	return ngone;
}

void zrfs_batch_tables_finish(struct zrfs *fs, uint32_t ngone)
{
	struct zrfs_batch_tables *b = fs->batches;
	bool tell;

	pthread_mutex_lock(&b->lock);
	memcpy(b->slot_tally.free + b->slot_tally.nfree, b->gone, ngone * sizeof *b->gone);
	b->slot_tally.nfree += ngone;
	if (ngone)
		pthread_cond_broadcast(&b->freed);
	/* those asked back now and unheld go at the next pass; the others'
	 * FORGETs bring it */
	tell = ask_specs(b);
	tell |= ask_slots(b);
	if (tell)
		want_pass(fs);
	pthread_mutex_unlock(&b->lock);
	pthread_mutex_unlock(&b->pass_lock);
	/* a name in use stays; an epoch where the kernel has it (the root's
	 * lock, which the old notification takes, is held by a request to us
	 * while a lookup, create or rename there waits for its answer) */
	if (fs->se && tell && !zrfs_notify_epoch(fs))
		fuse_lowlevel_notify_inval_entry(fs->se, ZRFS_INO_ROOT, ZRFS_BATCHES_NAME,
						 strlen(ZRFS_BATCHES_NAME));
}

/* ---- set-up ---- */

static int tally_init(struct tally *t, uint32_t max)
{
	t->max = max;
	return (t->free = calloc(max, sizeof *t->free)) ? 0 : -ENOMEM;
}

int zrfs_batch_tables_create(struct zrfs *fs, bool (*queue_pass)(struct zrfs *fs))
{
	struct zrfs_batch_tables *b = calloc(1, sizeof *b);
	pthread_condattr_t attr;

	if (!b)
		return -ENOMEM;
	fs->batches = b;
	b->queue_pass = queue_pass;
	pthread_mutex_init(&b->lock, NULL);
	pthread_mutex_init(&b->pass_lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&b->freed, &attr);
	pthread_condattr_destroy(&attr);
	if (!(b->specs = calloc(SPECS_MAX, sizeof *b->specs)) ||
	    !(b->slots = calloc(SLOTS_MAX, sizeof *b->slots)) ||
	    !(b->aged = calloc(SLOTS_MAX, sizeof *b->aged)) ||
	    !(b->spec_stamp = calloc(SPECS_MAX, sizeof *b->spec_stamp)) ||
	    !(b->gone = calloc(SLOTS_MAX, sizeof *b->gone)) ||
	    !(b->whys = calloc(WHY_KEPT, sizeof *b->whys)) ||
	    tally_init(&b->spec_tally, SPECS_MAX) < 0 || tally_init(&b->slot_tally, SLOTS_MAX) < 0)
		return -ENOMEM;
	return 0;
}

void zrfs_batch_tables_destroy(struct zrfs *fs)
{
	struct zrfs_batch_tables *b = fs->batches;

	if (!b)
		return;
	for (uint32_t i = 0; b->slots && i < b->slot_tally.top; i++)
		zs_sampler_destroy(b->slots[i].s);
	zrfs_table_free(&b->by_name);
	zrfs_table_free(&b->by_epoch);
	free(b->specs);
	free(b->slots);
	free(b->aged);
	free(b->spec_stamp);
	free(b->gone);
	free(b->whys);
	free(b->spec_tally.free);
	free(b->slot_tally.free);
	pthread_mutex_destroy(&b->lock);
	pthread_mutex_destroy(&b->pass_lock);
	pthread_cond_destroy(&b->freed);
	free(b);
	fs->batches = NULL;
}
