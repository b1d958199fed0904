/*
 * table.c - one small hash table for the daemon's own tables: intrusive
 * chains (an entry embeds a struct zrfs_link and lives where its owner puts
 * it), keyed by a 64-bit hash its owner computes with zrfs_hash(), matched
 * by the owner while walking a bucket. The table doubles when it holds as
 * many entries as buckets, so a lookup reads about one entry; it never
 * shrinks (its entries are bounded by whoever fills it). Not thread-safe:
 * each table is guarded by its owner's lock. And a list (intrusive too,
 * struct zrfs_node) for what is kept in order of use, least recent first.
 *
 * Sections: hashing, the table, lists.
 */
#include "zrfs_i.h"

#include <errno.h>
#include <stdlib.h>

/* ---- hashing ---- */

uint64_t zrfs_hash_u64(uint64_t x)
{
	/* the finaliser of MurmurHash3: every input bit reaches every output bit */
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

uint64_t zrfs_hash(const void *p, size_t n, uint64_t seed)
{
	uint64_t h = 14695981039346656037ULL ^ zrfs_hash_u64(seed); /* FNV-1a */

	for (const unsigned char *b = p; n--; b++)
		h = (h ^ *b) * 1099511628211ULL;
	return zrfs_hash_u64(h);
}

/* ---- the table ---- */

static int grow(struct zrfs_table *t)
{
	size_t cap = t->cap ? t->cap * 2 : 64;
	struct zrfs_link **b = calloc(cap, sizeof *b);

	if (!b)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++)
		for (struct zrfs_link *l = t->buckets[i], *next; l; l = next) {
			next = l->next;
			l->next = b[l->hash & (cap - 1)];
			b[l->hash & (cap - 1)] = l;
		}
	free(t->buckets);
	t->buckets = b;
	t->cap = cap;
	return 0;
}

int zrfs_table_add(struct zrfs_table *t, struct zrfs_link *l, uint64_t hash)
{
	/* a table that cannot grow takes the entry anyway, in a longer chain */
	if (t->n >= t->cap && grow(t) < 0 && t->cap == 0)
		return -ENOMEM;
	l->hash = hash;
	l->next = t->buckets[hash & (t->cap - 1)];
	t->buckets[hash & (t->cap - 1)] = l;
	t->n++;
	return 0;
}

void zrfs_table_del(struct zrfs_table *t, struct zrfs_link *l)
{
	for (struct zrfs_link **p = &t->buckets[l->hash & (t->cap - 1)]; *p; p = &(*p)->next)
		if (*p == l) {
			*p = l->next;
			t->n--;
			return;
		}
}

struct zrfs_link *zrfs_table_first(const struct zrfs_table *t, uint64_t hash)
{
	struct zrfs_link *l = t->cap ? t->buckets[hash & (t->cap - 1)] : NULL;

	while (l && l->hash != hash)
		l = l->next;
	return l;
}

struct zrfs_link *zrfs_table_next(const struct zrfs_link *l)
{
	uint64_t hash = l->hash;

	for (l = l->next; l && l->hash != hash; l = l->next)
		;
	return (struct zrfs_link *)l;
}

void zrfs_table_drain(struct zrfs_table *t, void (*drop)(struct zrfs_link *l))
{
	for (size_t i = 0; i < t->cap; i++)
		for (struct zrfs_link *l = t->buckets[i], *next; l; l = next) {
			next = l->next;
			drop(l);
		}
	zrfs_table_free(t);
}

int zrfs_table_each(const struct zrfs_table *t, int (*fn)(struct zrfs_link *l, void *ctx),
		    void *ctx)
{
	int rc = 0;

	for (size_t i = 0; i < t->cap && rc == 0; i++)
		for (struct zrfs_link *l = t->buckets[i], *next; l && rc == 0; l = next) {
			next = l->next; /* (@fn may remove @l) */
			rc = fn(l, ctx);
		}
	return rc;
}

void zrfs_table_free(struct zrfs_table *t)
{
	free(t->buckets);
	t->buckets = NULL;
	t->cap = t->n = 0;
}

/* ---- lists ---- */

void zrfs_list_append(struct zrfs_list *l, struct zrfs_node *n)
{
	n->prev = l->last;
	n->next = NULL;
	if (l->last)
		l->last->next = n;
	else
		l->first = n;
	l->last = n;
}

void zrfs_list_del(struct zrfs_list *l, struct zrfs_node *n)
{
	if (n->prev)
		n->prev->next = n->next;
	else
		l->first = n->next;
	if (n->next)
		n->next->prev = n->prev;
	else
		l->last = n->prev;
	n->prev = n->next = NULL;
}
