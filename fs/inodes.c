/*
 * inodes.c - the one table of inode numbers the kernel holds.
 *
 * The kernel counts the lookups of each inode it holds (every reply that
 * hands it a number: LOOKUP, CREATE, MKDIR, each entry of READDIRPLUS but
 * "." and "..") and gives them back with FORGET. This table counts the same
 * lookups, and nothing else in the daemon counts them: a number is counted
 * here before the reply that hands it is sent (reply.c; a reply that cannot
 * be sent is counted back), so a FORGET never arrives for a lookup not
 * counted yet, and a number found under the names lock (view.c) is counted
 * before a commit can be published: whoever holds the names lock written
 * knows every number the kernel may hold. The root is never counted.
 *
 * An entry keeps alive what its number needs, for as long as the kernel
 * holds it:
 *   - a view: an old number whose bytes a commit replaced shows the view it
 *     showed (a pin, follow.c); content never changes under a number;
 *   - a reference its subtree took when a lookup or a listing gave the
 *     number (subtree_i.h, let_go): the table keeps the first one, and
 *     tells the subtree to let it go when the kernel forgets the number;
 *     those of later lookups of a number held it lets go at once.
 *
 * A pinned number keeps an older state alive (and the writer's journal of
 * it), but the kernel keeps a name and an inode it does not use until
 * memory is short: each pinned number is remembered, and the follower asks
 * the kernel to drop the new ones after each commit and the others again
 * every second, 4,096 at a time in turn (zrfs_inodes_prune), until their
 * FORGET unpins them.
 *
 * The numbers of one record (every version, and its twin in tree/ showing
 * a class as text) hash alike, so that whether the kernel holds any of them
 * is one chain to walk (view.c gives a record's versions back with that).
 *
 * Entries are spread over shards by hash, each with its own lock: a lookup
 * and a FORGET take one shard's lock for a few instructions, and threads
 * serving different numbers rarely meet. Thread-safe.
 *
 * Sections: the table, counts, pins, set-up.
 */
#include "zrfs_i.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SHARDS 64 /* a power of 2 */
#define PRUNE_AGAIN_MS 1000
#define PRUNE_AGAIN_MAX 4096

/* One number the kernel holds. */
struct entry {
	struct zrfs_link link;    /* in its shard, by the hash of its family */
	fuse_ino_t ino;
	uint64_t nlookup;         /* lookups the kernel holds */
	struct zrfs_view *view;   /* the view it shows (referenced), or NULL: its owner says */
	const struct zrfs_subtree *hook; /* told to let go at the last FORGET, or NULL */
};

struct shard {
	pthread_mutex_t lock;     /* the table */
	struct zrfs_table t;
} __attribute__((aligned(64)));

/* The numbers pinned, for the kernel to be asked to drop (notify.c):
 * those from @fresh on not asked yet; every PRUNE_AGAIN_MS, up to
 * PRUNE_AGAIN_MAX more from @cursor on (a file open then may be closed
 * now), those unpinned since taken out. */
struct stale {
	pthread_mutex_t lock;
	fuse_ino_t *v;
	size_t n, cap, fresh, cursor;
	uint64_t asked_ms;
};

struct zrfs_inodes {
	struct shard shards[SHARDS];
	atomic_uint_least64_t held;   /* entries, all shards */
	atomic_uint_least64_t pinned; /* of them, showing a view of their own */
	struct stale stale;
};

/* ---- the table ---- */

static uint64_t hash_of(fuse_ino_t ino)
{
	return zrfs_hash_u64(zrfs_ino_family(ino));
}

static struct entry *entry_find(const struct shard *s, fuse_ino_t ino, uint64_t hash)
{
	for (struct zrfs_link *l = zrfs_table_first(&s->t, hash); l; l = zrfs_table_next(l)) {
		struct entry *e = zrfs_container(l, struct entry, link);
		if (e->ino == ino)
			return e;
	}
	return NULL;
}

/* The shard of @ino, locked (the caller unlocks it), and @ino's entry in
 * *e (NULL: not held). */
static struct shard *shard_lock(struct zrfs_inodes *t, fuse_ino_t ino, struct entry **e)
{
	uint64_t hash = hash_of(ino);
	/* the top bits: the table's buckets use the bottom ones */
	struct shard *s = &t->shards[hash >> 58 & (SHARDS - 1)];

	pthread_mutex_lock(&s->lock);
	*e = entry_find(s, ino, hash);
	return s;
}

/* ---- counts ---- */

/* Tell @hook's subtree to let go of the reference it took for @ino. */
static void tell_let_go(struct zrfs *fs, fuse_ino_t ino, const struct zrfs_subtree *hook)
{
	if (hook && hook->let_go)
		hook->let_go(fs, ino);
}

int zrfs_inode_hand(struct zrfs *fs, fuse_ino_t ino, const struct zrfs_subtree *hook)
{
	struct zrfs_inodes *t = fs->inodes;
	struct shard *s;
	struct entry *e;
	int rc = 0;
	bool kept = false;

	if (ino == ZRFS_INO_ROOT) {
		tell_let_go(fs, ino, hook);
		return 0;
	}
	s = shard_lock(t, ino, &e);
	if (e) {
		e->nlookup++;
	} else if (!(e = malloc(sizeof *e))) {
		rc = -ENOMEM;
	} else {
		*e = (struct entry){.ino = ino, .nlookup = 1, .hook = hook};
		if (zrfs_table_add(&s->t, &e->link, hash_of(ino)) < 0) {
			free(e);
			rc = -ENOMEM;
		} else {
			atomic_fetch_add(&t->held, 1);
			kept = true;
		}
	}
	pthread_mutex_unlock(&s->lock);
	if (!kept) /* the entry has one already, or none could be made */
		tell_let_go(fs, ino, hook);
	return rc;
}

bool zrfs_inode_again(struct zrfs *fs, fuse_ino_t ino)
{
	struct entry *e;
	struct shard *s = shard_lock(fs->inodes, ino, &e);

	if (e)
		e->nlookup++;
	pthread_mutex_unlock(&s->lock);
	return e != NULL;
}

bool zrfs_inode_forget(struct zrfs *fs, fuse_ino_t ino, uint64_t nlookup)
{
	struct zrfs_inodes *t = fs->inodes;
	struct shard *s;
	struct entry *e;

	s = shard_lock(t, ino, &e);
	if (e && e->nlookup > nlookup) {
		e->nlookup -= nlookup;
		e = NULL;
	} else if (e) { /* the last lookup (never below 0, whatever the kernel says) */
		zrfs_table_del(&s->t, &e->link);
	}
	pthread_mutex_unlock(&s->lock);
	if (!e)
		return false;
	atomic_fetch_sub(&t->held, 1);
	if (e->view) {
		atomic_fetch_sub(&t->pinned, 1);
		zrfs_view_put(e->view);
	}
	tell_let_go(fs, ino, e->hook);
	free(e);
	return true;
}

bool zrfs_inode_held(struct zrfs *fs, fuse_ino_t ino)
{
	struct entry *e;
	struct shard *s = shard_lock(fs->inodes, ino, &e);

	pthread_mutex_unlock(&s->lock);
	return e != NULL;
}

bool zrfs_inode_family_held(struct zrfs *fs, fuse_ino_t ino)
{
	fuse_ino_t family = zrfs_ino_family(ino);
	uint64_t hash = hash_of(ino); /* the family's */
	struct entry *e;
	struct shard *s = shard_lock(fs->inodes, ino, &e);
	bool yes = e != NULL;

	for (struct zrfs_link *l = zrfs_table_first(&s->t, hash); l && !yes; l = zrfs_table_next(l))
		yes = zrfs_ino_family(zrfs_container(l, struct entry, link)->ino) == family;
	pthread_mutex_unlock(&s->lock);
	return yes;
}

bool zrfs_inode_adopt(struct zrfs *fs, fuse_ino_t ino, const struct zrfs_subtree *hook)
{
	struct zrfs_inodes *t = fs->inodes;
	struct shard *s;
	struct entry *e;

	s = shard_lock(t, ino, &e);
	if (e)
		e->hook = hook;
	pthread_mutex_unlock(&s->lock);
	return e != NULL;
}

uint64_t zrfs_inodes_held(struct zrfs *fs)
{
	return atomic_load(&fs->inodes->held);
}

/* ---- pins ---- */

/* Remember pinned @ino to be dropped (short of memory: it waits for the
 * kernel's own FORGET, as without the notification). */
static void stale_add(struct stale *st, fuse_ino_t ino)
{
	pthread_mutex_lock(&st->lock);
	if (st->n == st->cap) {
		size_t cap = st->cap ? st->cap * 2 : 64;
		fuse_ino_t *v = realloc(st->v, cap * sizeof *v);
		if (v) {
			st->v = v;
			st->cap = cap;
		}
	}
	if (st->n < st->cap)
		st->v[st->n++] = ino;
	pthread_mutex_unlock(&st->lock);
}

int zrfs_inode_pin(struct zrfs *fs, fuse_ino_t ino, struct zrfs_view *v)
{
	struct zrfs_inodes *t = fs->inodes;
	struct shard *s;
	struct entry *e;
	int rc = 0;

	s = shard_lock(t, ino, &e);
	if (e && !e->view) {
		e->view = zrfs_view_ref(v);
		atomic_fetch_add(&t->pinned, 1);
		rc = 1;
	}
	pthread_mutex_unlock(&s->lock);
	if (rc == 1 && atomic_load(&fs->prunes))
		stale_add(&t->stale, ino);
	return rc;
}

bool zrfs_inode_pinned(struct zrfs *fs, fuse_ino_t ino)
{
	struct zrfs_inodes *t = fs->inodes;
	struct shard *s;
	struct entry *e;
	bool yes;

	if (!atomic_load(&t->pinned))
		return false;
	s = shard_lock(t, ino, &e);
	yes = e && e->view;
	pthread_mutex_unlock(&s->lock);
	return yes;
}

struct zrfs_view *zrfs_inode_view(struct zrfs *fs, fuse_ino_t ino)
{
	struct zrfs_inodes *t = fs->inodes;
	struct shard *s;
	struct zrfs_view *v = NULL;
	struct entry *e;

	if (!atomic_load(&t->pinned))
		return NULL;
	s = shard_lock(t, ino, &e);
	if (e && e->view)
		v = zrfs_view_ref(e->view);
	pthread_mutex_unlock(&s->lock);
	return v;
}

bool zrfs_inode_unpin(struct zrfs *fs, fuse_ino_t ino)
{
	struct zrfs_inodes *t = fs->inodes;
	struct shard *s;
	struct zrfs_view *v = NULL;
	struct entry *e;

	s = shard_lock(t, ino, &e);
	if (e && e->view) {
		v = e->view;
		e->view = NULL;
		atomic_fetch_sub(&t->pinned, 1);
	}
	pthread_mutex_unlock(&s->lock);
	zrfs_view_put(v);
	return v != NULL;
}

void zrfs_inodes_prune(struct zrfs *fs, uint64_t now_ms)
{
	struct stale *st = &fs->inodes->stale;
	fuse_ino_t *ask;
	size_t k = 0;

	pthread_mutex_lock(&st->lock);
	bool again = now_ms - st->asked_ms >= PRUNE_AGAIN_MS && st->n > 0;
	if ((st->fresh == st->n && !again) ||
	    !(ask = malloc((st->n - st->fresh + PRUNE_AGAIN_MAX) * sizeof *ask))) {
		pthread_mutex_unlock(&st->lock);
		return;
	}
	for (size_t i = st->fresh; i < st->n; i++)
		ask[k++] = st->v[i];
	st->fresh = st->n;
	for (size_t looked = 0; again && looked < PRUNE_AGAIN_MAX && st->n > 0; looked++) {
		if (st->cursor >= st->n)
			st->cursor = 0;
		if (zrfs_inode_pinned(fs, st->v[st->cursor])) {
			ask[k++] = st->v[st->cursor++];
		} else { /* forgotten, or its pin taken back: out */
			st->v[st->cursor] = st->v[--st->n];
			st->fresh = st->n;
		}
	}
	if (again)
		st->asked_ms = now_ms;
	pthread_mutex_unlock(&st->lock);
	if (k)
		zrfs_notify_prune(fs, ask, k);
	free(ask);
}

/* ---- set-up ---- */

int zrfs_inodes_create(struct zrfs *fs)
{
	struct zrfs_inodes *t = aligned_alloc(_Alignof(struct zrfs_inodes), sizeof *t);

	if (!t)
		return -ENOMEM;
	memset(t, 0, sizeof *t);
	for (unsigned i = 0; i < SHARDS; i++)
		pthread_mutex_init(&t->shards[i].lock, NULL);
	pthread_mutex_init(&t->stale.lock, NULL);
	fs->inodes = t;
	return 0;
}

static void entry_free(struct zrfs_link *l)
{
	struct entry *e = zrfs_container(l, struct entry, link);

	zrfs_view_put(e->view);
	free(e);
}

void zrfs_inodes_destroy(struct zrfs *fs)
{
	struct zrfs_inodes *t = fs->inodes;

	if (!t)
		return;
	for (unsigned i = 0; i < SHARDS; i++) {
		struct shard *s = &t->shards[i];
		zrfs_table_drain(&s->t, entry_free);
		pthread_mutex_destroy(&s->lock);
	}
	pthread_mutex_destroy(&t->stale.lock);
	free(t->stale.v);
	free(t);
	fs->inodes = NULL;
}
