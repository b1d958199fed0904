/*
 * view.c - what the mount shows: one committed state at a time, as a view,
 * and the older views inodes the kernel still holds belong to.
 *
 * A view is immutable once published: the dataset handle of one generation
 * (opened with zr_reopen, so views share chunk files), its length, meta.json
 * as served, the .npy views' headers. Requests hold the view they answer
 * from (counted), so a view lives while any request, inode or batch step
 * uses it.
 *
 * Content never changes under an inode number. A record file's, a .npy
 * view's and meta.json's inode numbers carry a version; when a commit
 * changes one, follow.c gives it the next version and pins the old number
 * to the old view, which serves it until the kernel forgets it (FORGET):
 * like a file replaced by rename, a program that has it open reads the old
 * bytes whole, and a new lookup finds the new ones, so no page the kernel
 * caches is ever wrong and none needs invalidating. Batch step directories
 * pin the view current when they are first looked up, which fixes every
 * file of the step (batches.c).
 *
 * Sections: views, the current view and versions, pins.
 */
#include "zrfs_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PINS_MAX (1u << 20) /* a bound on memory; beyond it, old numbers are ESTALE */

/* ---- views ---- */

static int load_meta(struct zrfs_view *v, const char *dataset)
{
	char path[4096];
	struct stat st;
	int fd, rc = -EIO;

	snprintf(path, sizeof path, "%s/meta.json", dataset);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= (16 << 20) &&
	    (v->meta = malloc((size_t)st.st_size + 1)) != NULL &&
	    read(fd, v->meta, (size_t)st.st_size) == st.st_size) {
		v->meta_len = (size_t)st.st_size;
		v->mtime = st.st_mtim;
		rc = 0;
	}
	close(fd);
	return rc;
}

int zrfs_view_make(struct zrfs *fs, zr_dataset *ds, struct zrfs_view **out)
{
	struct zrfs_view *v = calloc(1, sizeof *v + fs->nfields * sizeof v->npy[0]);
	int rc;

	*out = NULL;
	if (!v)
		return -ENOMEM;
	atomic_init(&v->refs, 1);
	v->ds = ds;
	v->gen = zr_generation(ds);
	v->n = zr_length(ds);
	/* meta.json as it was when the handle was opened: a commit may have
	 * replaced it since, and then the next view serves that one */
	if ((rc = load_meta(v, fs->dataset)) < 0) {
		free(v);
		return rc;
	}
	for (unsigned f = 0; f < fs->nfields; f++)
		if (fs->fields[f].has_npy &&
		    (rc = zrfs_npy_header(fs->fields[f].spec, v->n, fs->fields[f].record_size,
					  &v->npy[f])) < 0) {
			free(v->meta);
			free(v);
			return rc;
		}
	*out = v;
	return 0;
}

struct zrfs_view *zrfs_view_ref(struct zrfs_view *v)
{
	atomic_fetch_add(&v->refs, 1);
	return v;
}

void zrfs_view_put(struct zrfs_view *v)
{
	if (!v || atomic_fetch_sub(&v->refs, 1) != 1)
		return;
	zr_close(v->ds);
	free(v->meta);
	free(v);
}

/* ---- the current view and versions ---- */

/* (field, id) -> version of record files that changed since the mount:
 * one entry per record ever changed, never dropped; and which versions'
 * numbers the kernel was handed and has not forgotten, which no newer
 * version may take (a late FORGET of the older inode would unpin the
 * newer one under its reader: ESTALE). */
struct version {
	struct zrfs_link link;    /* in s->versions, by key */
	uint64_t key;             /* id * ZR_FIELDS_MAX + field */
	uint8_t version;
	atomic_uint_fast64_t handed[ZRFS_VERSIONS / 64];
};

/* inode number -> the older view it shows (a pin) */
struct pin {
	struct zrfs_link link;    /* in s->pins, by number */
	fuse_ino_t ino;
	struct zrfs_view *v;
};

struct zrfs_state {
	pthread_rwlock_t lock;    /* the current view, versions, npy versions:
				   * held for reading by lookups and listings */
	struct zrfs_view *view;
	struct zrfs_table versions;
	uint64_t *npy_version;    /* per field: the generation its .npy last changed */
	pthread_mutex_t pins_lock; /* the pins */
	struct zrfs_table pins;
	atomic_ullong pin_count;  /* read without the lock: FORGET's fast path */
};

int zrfs_state_create(struct zrfs *fs, struct zrfs_view *first)
{
	struct zrfs_state *s = calloc(1, sizeof *s);

	if (!s || !(s->npy_version = calloc(fs->nfields + 1, sizeof *s->npy_version))) {
		free(s);
		return -ENOMEM;
	}
	pthread_rwlock_init(&s->lock, NULL);
	pthread_mutex_init(&s->pins_lock, NULL);
	s->view = first;
	for (unsigned f = 0; f < fs->nfields; f++)
		s->npy_version[f] = first->gen;
	fs->state = s;
	return 0;
}

void zrfs_state_destroy(struct zrfs *fs)
{
	struct zrfs_state *s = fs->state;

	if (!s)
		return;
	for (size_t i = 0; i < s->pins.cap; i++)
		for (struct zrfs_link *l = s->pins.buckets[i], *next; l; l = next) {
			struct pin *p = zrfs_container(l, struct pin, link);
			next = l->next;
			zrfs_view_put(p->v);
			free(p);
		}
	for (size_t i = 0; i < s->versions.cap; i++)
		for (struct zrfs_link *l = s->versions.buckets[i], *next; l; l = next) {
			next = l->next;
			free(zrfs_container(l, struct version, link));
		}
	zrfs_view_put(s->view);
	zrfs_table_free(&s->pins);
	zrfs_table_free(&s->versions);
	free(s->npy_version);
	pthread_rwlock_destroy(&s->lock);
	pthread_mutex_destroy(&s->pins_lock);
	free(s);
	fs->state = NULL;
}

struct zrfs_view *zrfs_view_hold(struct zrfs *fs)
{
	struct zrfs_view *v;

	pthread_rwlock_rdlock(&fs->state->lock);
	v = zrfs_view_ref(fs->state->view);
	pthread_rwlock_unlock(&fs->state->lock);
	return v;
}

struct zrfs_view *zrfs_names_begin(struct zrfs *fs)
{
	pthread_rwlock_rdlock(&fs->state->lock);
	return fs->state->view;
}

void zrfs_names_end(struct zrfs *fs)
{
	pthread_rwlock_unlock(&fs->state->lock);
}

static struct version *version_find(const struct zrfs_state *s, uint64_t key)
{
	for (struct zrfs_link *l = zrfs_table_first(&s->versions, zrfs_hash_u64(key)); l;
	     l = zrfs_table_next(l)) {
		struct version *e = zrfs_container(l, struct version, link);
		if (e->key == key)
			return e;
	}
	return NULL;
}

unsigned zrfs_rec_version(const struct zrfs *fs, unsigned field, uint64_t id)
{
	const struct version *e;

	if (!fs->state || fs->state->versions.n == 0)
		return 0;
	e = version_find(fs->state, id * ZR_FIELDS_MAX + field);
	return e ? e->version : 0;
}

uint64_t zrfs_npy_version(const struct zrfs *fs, unsigned field)
{
	return fs->state ? fs->state->npy_version[field] : 0;
}

/* ---- publishing (follow.c, under the write lock) ---- */

void zrfs_state_lock(struct zrfs *fs)
{
	pthread_rwlock_wrlock(&fs->state->lock);
}

void zrfs_state_unlock(struct zrfs *fs)
{
	pthread_rwlock_unlock(&fs->state->lock);
}

int zrfs_rec_version_bump(struct zrfs *fs, unsigned field, uint64_t id)
{
	struct zrfs_state *s = fs->state;
	uint64_t key = id * ZR_FIELDS_MAX + field;
	struct version *e = version_find(s, key);

	if (!e) {
		if (!(e = calloc(1, sizeof *e)))
			return -ENOMEM;
		e->key = key;
		/* version 0, shown before anything was counted, may be held */
		atomic_store(&e->handed[0], 1);
		if (zrfs_table_add(&s->versions, &e->link, zrfs_hash_u64(key)) < 0) {
			free(e);
			return -ENOMEM;
		}
	}
	/* the next version whose number no pin holds and the kernel was not
	 * handed (a version comes round again after 256 changes of one
	 * record); if none, the next one no pin holds; if none, the oldest:
	 * the kernel keeps an inode it was handed, unused, until memory is
	 * short, and with it the pin of its older bytes */
	uint8_t from = e->version, free_one = from;
	for (int k = 1; k < ZRFS_VERSIONS; k++) {
		uint8_t v = (uint8_t)(from + k);
		if (zrfs_pinned(fs, zrfs_rec_ino(field, id, v)))
			continue;
		if (free_one == from)
			free_one = v;
		if (!(atomic_load(&e->handed[v / 64]) & UINT64_C(1) << (v % 64))) {
			free_one = v;
			break;
		}
	}
	e->version = free_one != from ? free_one : (uint8_t)(from + 1);
	return free_one == from;
}

/* The version entry of record file @ino, or NULL (never changed). */
static struct version *version_of_ino(const struct zrfs *fs, fuse_ino_t ino, unsigned *v)
{
	unsigned field;
	uint64_t id;

	if (!fs->state || fs->state->versions.n == 0 || !zrfs_rec_decode(fs, ino, &field, &id, v))
		return NULL;
	return version_find(fs->state, id * ZR_FIELDS_MAX + field);
}

void zrfs_rec_handed(struct zrfs *fs, fuse_ino_t ino)
{
	unsigned v;
	struct version *e = version_of_ino(fs, ino, &v);

	if (e)
		atomic_fetch_or(&e->handed[v / 64], UINT64_C(1) << (v % 64));
}

void zrfs_rec_forgotten(struct zrfs *fs, fuse_ino_t ino)
{
	struct version *e;
	unsigned v;

	zrfs_names_begin(fs);
	if ((e = version_of_ino(fs, ino, &v)) != NULL)
		atomic_fetch_and(&e->handed[v / 64], ~(UINT64_C(1) << (v % 64)));
	zrfs_names_end(fs);
}

void zrfs_npy_version_set(struct zrfs *fs, unsigned field, uint64_t version)
{
	fs->state->npy_version[field] = version;
}

struct zrfs_view *zrfs_view_publish(struct zrfs *fs, struct zrfs_view *v)
{
	struct zrfs_view *old = fs->state->view;

	fs->state->view = v;
	return old;
}

/* ---- pins ---- */

static struct pin *pin_find(const struct zrfs_state *s, fuse_ino_t ino)
{
	for (struct zrfs_link *l = zrfs_table_first(&s->pins, zrfs_hash_u64(ino)); l;
	     l = zrfs_table_next(l)) {
		struct pin *p = zrfs_container(l, struct pin, link);
		if (p->ino == ino)
			return p;
	}
	return NULL;
}

int zrfs_pin(struct zrfs *fs, fuse_ino_t ino, struct zrfs_view *v)
{
	struct zrfs_state *s = fs->state;
	struct pin *p;
	int rc = 0;

	pthread_mutex_lock(&s->pins_lock);
	if (pin_find(s, ino))
		goto out; /* pinned already: the first view it showed stays */
	if (s->pins.n >= PINS_MAX) {
		rc = -ENOSPC;
		goto out;
	}
	if (!(p = malloc(sizeof *p))) {
		rc = -ENOMEM;
		goto out;
	}
	p->ino = ino;
	p->v = zrfs_view_ref(v);
	if ((rc = zrfs_table_add(&s->pins, &p->link, zrfs_hash_u64(ino))) < 0) {
		zrfs_view_put(p->v);
		free(p);
		goto out;
	}
	atomic_store(&s->pin_count, s->pins.n);
	rc = 1;
out:
	pthread_mutex_unlock(&s->pins_lock);
	return rc;
}

bool zrfs_pinned(struct zrfs *fs, fuse_ino_t ino)
{
	struct zrfs_state *s = fs->state;
	bool yes;

	if (!atomic_load(&s->pin_count))
		return false;
	pthread_mutex_lock(&s->pins_lock);
	yes = pin_find(s, ino) != NULL;
	pthread_mutex_unlock(&s->pins_lock);
	return yes;
}

struct zrfs_view *zrfs_pinned_view(struct zrfs *fs, fuse_ino_t ino)
{
	struct zrfs_state *s = fs->state;
	struct zrfs_view *v = NULL;
	struct pin *p;

	if (!atomic_load(&s->pin_count))
		return NULL;
	pthread_mutex_lock(&s->pins_lock);
	if ((p = pin_find(s, ino)) != NULL)
		v = zrfs_view_ref(p->v);
	pthread_mutex_unlock(&s->pins_lock);
	return v;
}

bool zrfs_unpin(struct zrfs *fs, fuse_ino_t ino)
{
	struct zrfs_state *s = fs->state;
	struct pin *p = NULL;

	if (!s || !atomic_load(&s->pin_count))
		return false;
	pthread_mutex_lock(&s->pins_lock);
	if ((p = pin_find(s, ino)) != NULL) {
		zrfs_table_del(&s->pins, &p->link);
		atomic_store(&s->pin_count, s->pins.n);
	}
	pthread_mutex_unlock(&s->pins_lock);
	if (!p)
		return false;
	zrfs_view_put(p->v);
	free(p);
	return true;
}
