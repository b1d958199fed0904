/*
 * overlay.c - the overlay: uncommitted changes to committed entries (store_i.h
 * (c)). A hash map from (field, id) to the entry a writer set, consulted by
 * every entry read while it is non-empty (offset.c), journalled and applied
 * by zr_commit() (commit.c) once no reader holds an older state. It calls
 * nothing of the store's, so reads and writes both lean on it, one way.
 */
#include "store_i.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void zr_overlay_init(zr_overlay *o)
{
	pthread_rwlock_init(&o->lock, NULL);
	atomic_init(&o->count, 0);
	o->cap = 0;
	o->slots = NULL;
}

void zr_overlay_destroy(zr_overlay *o)
{
	free(o->slots);
	o->slots = NULL;
	pthread_rwlock_destroy(&o->lock);
}

static uint64_t overlay_key(const zr_dataset *ds, unsigned field, uint64_t id)
{
	return id * ds->nfields + field + 1;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

/* The slot holding @key, or the free slot where it would go. */
static zr_overlay_slot *overlay_slot(zr_overlay *o, uint64_t key)
{
	uint64_t i = mix(key) & (o->cap - 1);

	while (o->slots[i].key && o->slots[i].key != key)
		i = (i + 1) & (o->cap - 1);
	return &o->slots[i];
}

bool zr_overlay_find(zr_dataset *ds, unsigned field, uint64_t id, zr_entry *e)
{
	zr_overlay *o = &ds->overlay;
	zr_overlay_slot *s;
	bool found = false;

	pthread_rwlock_rdlock(&o->lock);
	if (o->cap) {
		s = overlay_slot(o, overlay_key(ds, field, id));
		if (s->key) {
			*e = s->e;
			found = true;
		}
	}
	pthread_rwlock_unlock(&o->lock);
	return found;
}

int zr_overlay_set(zr_dataset *ds, unsigned field, uint64_t id, const zr_entry *e,
		   uint64_t generation)
{
	zr_overlay *o = &ds->overlay;
	uint64_t key = overlay_key(ds, field, id);
	zr_overlay_slot *s;
	int rc = 0;

	pthread_rwlock_wrlock(&o->lock);
	if ((atomic_load(&o->count) + 1) * 2 > o->cap) {
		uint64_t cap = o->cap ? o->cap * 2 : 1024;
		zr_overlay_slot *old = o->slots, *slots = calloc(cap, sizeof *slots);
		uint64_t old_cap = o->cap;
		if (!slots) {
			rc = zr_err(-ENOMEM, "out of memory");
			goto out;
		}
		o->slots = slots;
		o->cap = cap;
		for (uint64_t i = 0; i < old_cap; i++)
			if (old[i].key)
				*overlay_slot(o, old[i].key) = old[i];
		free(old);
	}
	s = overlay_slot(o, key);
	if (!s->key) {
		s->key = key;
		atomic_fetch_add_explicit(&o->count, 1, memory_order_release);
	}
	s->e = *e;
	s->gen = generation;
out:
	pthread_rwlock_unlock(&o->lock);
	return rc;
}

int zr_overlay_copy(zr_dataset *dst, zr_dataset *src)
{
	zr_overlay *o = &src->overlay, *d = &dst->overlay;
	zr_overlay_slot *slots = NULL;
	int rc = 0;

	pthread_rwlock_rdlock(&o->lock);
	if (o->cap && !(slots = malloc(o->cap * sizeof *slots)))
		rc = zr_err(-ENOMEM, "out of memory");
	if (rc == 0) {
		if (o->cap)
			memcpy(slots, o->slots, o->cap * sizeof *slots);
		pthread_rwlock_wrlock(&d->lock);
		free(d->slots);
		d->slots = slots;
		d->cap = o->cap;
		atomic_store(&d->count, atomic_load(&o->count));
		pthread_rwlock_unlock(&d->lock);
	}
	pthread_rwlock_unlock(&o->lock);
	return rc;
}

int zr_overlay_keep_after(zr_dataset *ds, uint64_t generation)
{
	zr_overlay *o = &ds->overlay;
	zr_overlay_slot *slots = NULL;
	uint64_t kept = 0, cap = 0;

	/* into a new table: linear probing leaves no slot to free in place */
	pthread_rwlock_rdlock(&o->lock);
	for (uint64_t i = 0; i < o->cap; i++)
		kept += o->slots[i].key && o->slots[i].gen > generation;
	pthread_rwlock_unlock(&o->lock);
	if (kept) {
		for (cap = 1024; cap < kept * 2; cap *= 2)
			;
		if (!(slots = calloc(cap, sizeof *slots)))
			return zr_err(-ENOMEM, "out of memory");
	}
	pthread_rwlock_wrlock(&o->lock);
	zr_overlay_slot *old = o->slots;
	uint64_t old_cap = o->cap;
	o->slots = slots;
	o->cap = cap;
	for (uint64_t i = 0; i < old_cap; i++)
		if (old[i].key && old[i].gen > generation)
			*overlay_slot(o, old[i].key) = old[i];
	atomic_store(&o->count, kept);
	pthread_rwlock_unlock(&o->lock);
	free(old);
	return 0;
}

void zr_overlay_clear(zr_dataset *ds)
{
	zr_overlay *o = &ds->overlay;

	pthread_rwlock_wrlock(&o->lock);
	free(o->slots);
	o->slots = NULL;
	o->cap = 0;
	atomic_store(&o->count, 0);
	pthread_rwlock_unlock(&o->lock);
}
