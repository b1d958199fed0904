/*
 * Description: the mount's bounded cache (fs/cache.c) without a mount:
 * entries are made once and shared, the bytes held (entries and buffers kept
 * for reuse) never pass the bound, dropped entries' buffers are reused, a
 * forgotten entry stays valid for the reply still using it, one dropped
 * while it is made is never cached, concurrent misses of one key run one
 * load, and a failed load reaches every waiter.
 */
#include "zrfs_i.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

TestSuite(cache, .timeout = T_TIMEOUT(30));

struct load {
	struct zrfs_cache *c;
	size_t size;
	uint8_t fill;
	int fail;              /* -errno to fail with */
	atomic_int calls;
	uint8_t *last;         /* the buffer the last load got */
	pthread_mutex_t *gate; /* held by the test to keep a load in progress */
};

static int loader(void *ctx, uint8_t **data, uint64_t *len)
{
	struct load *l = ctx;

	atomic_fetch_add(&l->calls, 1);
	if (l->gate) {
		pthread_mutex_lock(l->gate);
		pthread_mutex_unlock(l->gate);
	}
	if (l->fail)
		return l->fail;
	*data = zrfs_cache_alloc(l->c, l->size);
	if (!*data)
		return -ENOMEM;
	memset(*data, l->fill, l->size);
	*len = l->size;
	l->last = *data;
	return 0;
}

static void get(struct zrfs_cache *c, uint64_t key, struct load *l, uint8_t want)
{
	struct zrfs_cached *e;
	const uint8_t *data;
	uint64_t len;

	cr_assert_eq(zrfs_cache_get(c, key, 0, loader, l, &e, &data, &len), 0);
	cr_assert_eq(len, l->size);
	cr_assert(data[0] == want && data[len - 1] == want, "key %llu: wrong bytes",
		  (unsigned long long)key);
	zrfs_cache_release(c, e);
}

Test(cache, an_entry_is_made_once_and_evicted_past_the_bound)
{
	struct zrfs_cache *c;
	struct load l = {.size = 1 << 20, .fill = 7};

	cr_assert_eq(zrfs_cache_create(&c, 4 << 20), 0);
	l.c = c;
	get(c, 1, &l, 7);
	get(c, 1, &l, 7);
	cr_assert_eq(atomic_load(&l.calls), 1, "a cached key was loaded again");
	for (uint64_t k = 2; k <= 5; k++) /* 5 MiB in all: key 1, the oldest, goes */
		get(c, k, &l, 7);
	cr_assert(!zrfs_cache_has(c, 1, 0));
	cr_assert(zrfs_cache_has(c, 5, 0) && zrfs_cache_has(c, 2, 0));
	zrfs_cache_destroy(c);
}

Test(cache, dropped_buffers_are_reused_within_the_bound)
{
	struct zrfs_cache *c;
	struct load l = {.size = 1 << 20, .fill = 1};

	cr_assert_eq(zrfs_cache_create(&c, 3 << 20), 0);
	l.c = c;
	get(c, 1, &l, 1);
	uint8_t *first = l.last;
	get(c, 2, &l, 1);
	zrfs_cache_drop(c, 1);
	cr_assert(!zrfs_cache_has(c, 1, 0));
	l.fill = 2;
	get(c, 3, &l, 2); /* fits the buffer key 1 had */
	cr_assert_eq(l.last, first, "the dropped buffer was not reused");
	/* held: 2 and 3 (2 MiB); a kept buffer would make 3 MiB, still within */
	zrfs_cache_drop(c, 2);
	l.size = 3 << 20; /* too big for it: the kept buffer is freed to make room */
	get(c, 4, &l, 2);
	cr_assert(zrfs_cache_has(c, 4, 0) && !zrfs_cache_has(c, 3, 0));
	uint8_t *big = l.last;
	/* a buffer more than twice the size asked is not handed out */
	zrfs_cache_drop(c, 4);
	l.size = 1 << 20;
	get(c, 5, &l, 2);
	cr_assert_neq(l.last, big);
	zrfs_cache_destroy(c);
}

Test(cache, a_forgotten_entry_stays_valid_for_its_user)
{
	struct zrfs_cache *c;
	struct zrfs_cached *e;
	const uint8_t *data;
	uint64_t len;
	struct load l = {.size = 300 << 10, .fill = 9};

	cr_assert_eq(zrfs_cache_create(&c, 1 << 20), 0);
	l.c = c;
	cr_assert_eq(zrfs_cache_get(c, 1, 0, loader, &l, &e, &data, &len), 0);
	zrfs_cache_drop(c, 1);
	cr_assert(!zrfs_cache_has(c, 1, 0));
	l.fill = 3;
	get(c, 2, &l, 3); /* must not get the buffer still in use */
	cr_assert(data[0] == 9 && data[len - 1] == 9, "a buffer in use was reused");
	zrfs_cache_release(c, e);
	zrfs_cache_destroy(c);
}

/* A loader that makes the bytes of what its key named before, and sees
 * the key dropped while it does: a commit gave the key to other bytes. */
static int loader_overtaken(void *ctx, uint8_t **data, uint64_t *len)
{
	struct load *l = ctx;
	int rc = loader(ctx, data, len);

	zrfs_cache_drop(l->c, 7);
	return rc;
}

Test(cache, an_entry_dropped_while_it_is_made_is_never_cached)
{
	struct zrfs_cache *c;
	struct zrfs_cached *e;
	const uint8_t *data;
	uint64_t len;
	struct load l = {.size = 100, .fill = 1};

	cr_assert_eq(zrfs_cache_create(&c, 1 << 20), 0);
	l.c = c;
	cr_assert_eq(zrfs_cache_get(c, 7, 0, loader_overtaken, &l, &e, &data, &len), 0);
	cr_assert(len == 100 && data[0] == 1, "its maker gets what it made");
	cr_assert(!zrfs_cache_has(c, 7, 0), "the old bytes stayed under the dropped key");
	l.fill = 2;
	get(c, 7, &l, 2); /* made anew: the bytes the key names now */
	cr_assert_eq(atomic_load(&l.calls), 2);
	cr_assert(data[0] == 1 && data[99] == 1, "the first maker's bytes changed under it");
	zrfs_cache_release(c, e);
	zrfs_cache_destroy(c);
}

Test(cache, a_key_made_from_another_state_is_another_entry)
{
	struct zrfs_cache *c;
	struct zrfs_cached *e;
	const uint8_t *data;
	uint64_t len;
	struct load l = {.size = 4096, .fill = 1};

	cr_assert_eq(zrfs_cache_create(&c, 1 << 20), 0);
	l.c = c;
	cr_assert_eq(zrfs_cache_get(c, 7, 100, loader, &l, &e, &data, &len), 0);
	zrfs_cache_release(c, e);
	cr_assert(zrfs_cache_has(c, 7, 100) && !zrfs_cache_has(c, 7, 101));
	l.fill = 2; /* the same key of a later state: made again, never the old bytes */
	cr_assert_eq(zrfs_cache_get(c, 7, 101, loader, &l, &e, &data, &len), 0);
	cr_assert(data[0] == 2, "the state's own bytes");
	zrfs_cache_release(c, e);
	cr_assert_eq(atomic_load(&l.calls), 2);
	cr_assert(zrfs_cache_has(c, 7, 100) && zrfs_cache_has(c, 7, 101));
	zrfs_cache_drop(c, 7); /* every state's */
	cr_assert(!zrfs_cache_has(c, 7, 100) && !zrfs_cache_has(c, 7, 101));
	zrfs_cache_destroy(c);
}

struct racer {
	struct zrfs_cache *c;
	struct load *l;
	int rc;
};

static void *race(void *arg)
{
	struct racer *r = arg;
	struct zrfs_cached *e;
	const uint8_t *data;
	uint64_t len;

	r->rc = zrfs_cache_get(r->c, 42, 0, loader, r->l, &e, &data, &len);
	if (r->rc == 0)
		zrfs_cache_release(r->c, e);
	return NULL;
}

/* Eight threads miss key 42 while its first load is held: all eight get its
 * result, made once, or, when it fails, its error (a thread that arrives
 * after the failure tries again and fails the same way). */
static void concurrent_misses(int fail)
{
	pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
	struct zrfs_cache *c;
	struct load l = {.size = 1 << 20, .fill = 5, .fail = fail, .gate = &gate};
	struct racer r[8];
	pthread_t th[8];

	cr_assert_eq(zrfs_cache_create(&c, 8 << 20), 0);
	l.c = c;
	pthread_mutex_lock(&gate);
	for (int i = 0; i < 8; i++) {
		r[i] = (struct racer){c, &l, 1};
		cr_assert_eq(pthread_create(&th[i], NULL, race, &r[i]), 0);
	}
	/* every thread has either started the load or found its placeholder:
	 * the placeholder is in the table as soon as the load is called */
	while (atomic_load(&l.calls) == 0)
		sched_yield();
	pthread_mutex_unlock(&gate);
	for (int i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		cr_assert_eq(r[i].rc, fail, "thread %d: %d", i, r[i].rc);
	}
	if (fail == 0)
		cr_assert_eq(atomic_load(&l.calls), 1, "%d loads of one key", atomic_load(&l.calls));
	cr_assert_eq(zrfs_cache_has(c, 42, 0), fail == 0);
	zrfs_cache_destroy(c);
}

Test(cache, concurrent_misses_share_one_load)
{
	concurrent_misses(0);
}

Test(cache, a_failed_load_reaches_every_waiter)
{
	concurrent_misses(-EIO);
}
