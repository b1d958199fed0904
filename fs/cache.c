/*
 * cache.c - a bounded cache of file contents that are expensive to make:
 * inflated flate records and assembled batch files.
 *
 * The kernel asks for a file in pieces (up to max_read), and a flate record
 * can only be inflated whole, a batch file only assembled whole: without a
 * cache, reading a 1 MiB record would inflate it eight times. Entries are
 * keyed by a 64-bit key chosen by the caller, made by the caller's loader on
 * a miss, reference-counted while a reply is being sent, and evicted least
 * recently used first once the bytes held exceed the bound. A key is made
 * once however many threads ask for it at the same time: the first miss
 * puts a placeholder in the table and loads without the lock held, later
 * askers wait for it (and get its error if the load fails). So the memory
 * in use is at most the bound plus, per thread, the entry it is loading or
 * sending.
 *
 * Buffers of dropped entries are kept for reuse (a few, counted in the
 * bound): a reader streaming through batch files would otherwise have
 * every new batch land in fresh pages, each faulted in and zeroed by the
 * kernel (and on a virtual machine often by the host too).
 */
#include "zrfs_i.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define POOL_MAX 8               /* buffers kept for reuse */
#define POOL_MIN (256u << 10)    /* smaller ones are malloc's business */

/* Every buffer made by zrfs_cache_alloc() starts with its capacity. */
struct buf_head {
	size_t cap;
	size_t pad;              /* keeps the data 16-byte aligned */
};

struct zrfs_cached {
	uint64_t key;                    /* the user's: a record's, a batch step's */
	uint64_t tag;                    /* ... and of which state (0: any) */
	uint64_t len;
	unsigned refs;                   /* replies using it, + 1 while cached */
	bool loading;                    /* in the table, not yet in the LRU list */
	bool dropped;                    /* ... dropped meanwhile: its bytes may be of what
					  * the key named before, for its waiters only */
	int err;                         /* the failed load's -errno, for waiters */
	struct zrfs_link link;           /* in c->table, by key */
	struct zrfs_node lru;            /* in c->lru */
	uint8_t *data;                   /* from the loader; freed with the entry */
};

struct zrfs_cache {
	pthread_mutex_t lock;            /* everything below */
	pthread_cond_t loaded;           /* some placeholder was filled or failed */
	uint64_t bytes, limit;
	struct zrfs_table table;         /* entries by key, loading ones too */
	struct zrfs_list lru;            /* cached entries, the least recently used first */
	struct buf_head *pool[POOL_MAX]; /* counted in bytes */
	unsigned npool;
};

int zrfs_cache_create(struct zrfs_cache **out, uint64_t bytes)
{
	struct zrfs_cache *c = calloc(1, sizeof *c);

	if (!c)
		return -ENOMEM;
	c->limit = bytes;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->loaded, NULL);
	*out = c;
	return 0;
}

static struct zrfs_cached *lru_entry(struct zrfs_node *n)
{
	return zrfs_container(n, struct zrfs_cached, lru);
}

static struct buf_head *head_of(uint8_t *data)
{
	return (struct buf_head *)(void *)data - 1;
}

uint8_t *zrfs_cache_alloc(struct zrfs_cache *c, size_t n)
{
	struct buf_head *h = NULL;
	unsigned best = POOL_MAX;

	pthread_mutex_lock(&c->lock);
	for (unsigned i = 0; i < c->npool; i++) /* the smallest that fits, not twice too big */
		if (c->pool[i]->cap >= n && c->pool[i]->cap / 2 <= n &&
		    (best == POOL_MAX || c->pool[i]->cap < c->pool[best]->cap))
			best = i;
	if (best < POOL_MAX) {
		h = c->pool[best];
		c->pool[best] = c->pool[--c->npool];
		c->bytes -= h->cap;
	}
	pthread_mutex_unlock(&c->lock);
	if (!h && n <= SIZE_MAX - sizeof *h && (h = malloc(sizeof *h + n)) != NULL)
		h->cap = n;
	return h ? (uint8_t *)(h + 1) : NULL;
}

/* Keep @data's buffer for reuse if it is worth it and fits under the bound. */
static void buf_free_locked(struct zrfs_cache *c, uint8_t *data)
{
	if (!data)
		return;
	struct buf_head *h = head_of(data);
	if (h->cap >= POOL_MIN && c->npool < POOL_MAX && c->bytes + h->cap <= c->limit) {
		c->pool[c->npool++] = h;
		c->bytes += h->cap;
	} else {
		free(h);
	}
}

void zrfs_cache_free(struct zrfs_cache *c, uint8_t *data)
{
	pthread_mutex_lock(&c->lock);
	buf_free_locked(c, data);
	pthread_mutex_unlock(&c->lock);
}

void zrfs_cache_destroy(struct zrfs_cache *c)
{
	if (!c)
		return;
	while (c->lru.first) {
		struct zrfs_cached *e = lru_entry(c->lru.first);
		zrfs_list_del(&c->lru, &e->lru);
		if (e->data)
			free(head_of(e->data));
		free(e);
	}
	while (c->npool)
		free(c->pool[--c->npool]);
	zrfs_table_free(&c->table);
	pthread_cond_destroy(&c->loaded);
	pthread_mutex_destroy(&c->lock);
	free(c);
}


/* The entry of @key and @tag; with @any_tag, of @key and any tag. */
static struct zrfs_cached *cache_find(struct zrfs_cache *c, uint64_t key, uint64_t tag, bool any_tag)
{
	for (struct zrfs_link *l = zrfs_table_first(&c->table, zrfs_hash_u64(key)); l;
	     l = zrfs_table_next(l)) {
		struct zrfs_cached *e = zrfs_container(l, struct zrfs_cached, link);
		if (e->key == key && (any_tag || e->tag == tag))
			return e;
	}
	return NULL;
}

static void unhash(struct zrfs_cache *c, struct zrfs_cached *e)
{
	zrfs_table_del(&c->table, &e->link);
}

static void unref(struct zrfs_cache *c, struct zrfs_cached *e)
{
	if (--e->refs == 0) {
		buf_free_locked(c, e->data);
		free(e);
	}
}

static void drop(struct zrfs_cache *c, struct zrfs_cached *e)
{
	unhash(c, e);
	zrfs_list_del(&c->lru, &e->lru);
	c->bytes -= e->len;
	unref(c, e);
}

/* Free kept buffers, then evict from the old end, until under the limit
 * (entries in use just lose their cache reference and are freed by their
 * last user). */
static void shrink(struct zrfs_cache *c)
{
	while (c->bytes > c->limit && c->npool) {
		c->bytes -= c->pool[--c->npool]->cap;
		free(c->pool[c->npool]);
	}
	while (c->bytes > c->limit && c->lru.first)
		drop(c, lru_entry(c->lru.first));
}

int zrfs_cache_get(struct zrfs_cache *c, uint64_t key, uint64_t tag, zrfs_loader load, void *ctx,
		   struct zrfs_cached **out, const uint8_t **data, uint64_t *len)
{
	struct zrfs_cached *e;
	int rc;

	pthread_mutex_lock(&c->lock);
	e = cache_find(c, key, tag, false);
	if (e) {
		e->refs++;
		while (e->loading)
			pthread_cond_wait(&c->loaded, &c->lock);
		if (e->err) {
			rc = e->err;
			unref(c, e);
			pthread_mutex_unlock(&c->lock);
			return rc;
		}
		if (zrfs_list_has(&c->lru, &e->lru)) { /* still cached: now the most recent */
			zrfs_list_del(&c->lru, &e->lru);
			zrfs_list_append(&c->lru, &e->lru);
		}
		pthread_mutex_unlock(&c->lock);
		goto found;
	}
	e = calloc(1, sizeof *e);
	if (!e) {
		pthread_mutex_unlock(&c->lock);
		return -ENOMEM;
	}
	e->key = key;
	e->tag = tag;
	e->refs = 2; /* the table's and this caller's */
	e->loading = true;
	if (zrfs_table_add(&c->table, &e->link, zrfs_hash_u64(key)) < 0) {
		pthread_mutex_unlock(&c->lock);
		free(e);
		return -ENOMEM;
	}
	pthread_mutex_unlock(&c->lock);

	rc = load(ctx, &e->data, &e->len);
	if (rc < 0) { /* a failing loader has freed what it made */
		e->data = NULL;
		e->len = 0;
	}

	pthread_mutex_lock(&c->lock);
	e->loading = false;
	if (rc < 0 || e->len > c->limit || e->dropped) {
		/* failed, larger than the whole cache, or dropped while it was
		 * made (zrfs_cache_drop): out of the table, kept only by this
		 * caller and any waiters */
		e->err = rc < 0 ? rc : 0;
		if (!e->dropped)
			unhash(c, e);
		e->refs--;
	} else {
		zrfs_list_append(&c->lru, &e->lru);
		c->bytes += e->len;
		shrink(c);
	}
	pthread_cond_broadcast(&c->loaded);
	if (rc < 0) {
		unref(c, e);
		pthread_mutex_unlock(&c->lock);
		return rc;
	}
	pthread_mutex_unlock(&c->lock);
found:
	*out = e;
	*data = e->data;
	*len = e->len;
	return 0;
}

bool zrfs_cache_has(struct zrfs_cache *c, uint64_t key, uint64_t tag)
{
	bool has;

	pthread_mutex_lock(&c->lock);
	has = cache_find(c, key, tag, false) != NULL;
	pthread_mutex_unlock(&c->lock);
	return has;
}

void zrfs_cache_release(struct zrfs_cache *c, struct zrfs_cached *e)
{
	pthread_mutex_lock(&c->lock);
	unref(c, e);
	pthread_mutex_unlock(&c->lock);
}

void zrfs_cache_drop(struct zrfs_cache *c, uint64_t key)
{
	pthread_mutex_lock(&c->lock);
	for (struct zrfs_link *l = zrfs_table_first(&c->table, zrfs_hash_u64(key)), *next; l;
	     l = next) {
		struct zrfs_cached *e = zrfs_container(l, struct zrfs_cached, link);
		next = zrfs_table_next(l);
		if (e->key != key)
			continue;
		if (e->loading && !e->dropped) {
			/* being made, perhaps from what the key named before: its
			 * maker's and waiters' only (a later asker makes it anew) */
			e->dropped = true;
			unhash(c, e);
		} else if (!e->loading && zrfs_list_has(&c->lru, &e->lru)) {
			drop(c, e);
		}
	}
	pthread_mutex_unlock(&c->lock);
}

void zrfs_cache_drop_if(struct zrfs_cache *c, bool (*match)(uint64_t key, const void *ctx),
			  const void *ctx)
{
	pthread_mutex_lock(&c->lock);
	for (struct zrfs_node *n = c->lru.first, *next; n; n = next) {
		struct zrfs_cached *e = lru_entry(n);
		next = n->next;
		if (match(e->key, ctx))
			drop(c, e);
	}
	pthread_mutex_unlock(&c->lock);
}

int zrfs_too_big(const struct zrfs *fs, uint64_t bytes)
{
	if (zrfs_log_admit()) /* a reader of such a file, in a loop */
		fuse_log(FUSE_LOG_ERR,
			 "zrfs: %s: a file of %llu bytes to make in memory (records inflated, a "
			 "batch assembled or its offsets) is larger than the cache (-o cache=%llu "
			 "bytes): not served (EFBIG); mount with a larger cache\n",
			 fs->dataset, (unsigned long long)bytes,
			 (unsigned long long)fs->opts.cache_bytes);
	return -EFBIG;
}
