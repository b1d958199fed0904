/*
 * versions.c - the versions of files whose bytes commits change: a record
 * file's (8 bits of its number) and FIELD.npy's (the generation it last
 * changed in).
 *
 * A record changed since the mount has an entry while the kernel holds any
 * number of it (any version, or its twin in tree/). At each change follow.c
 * gives it the next version, one none of whose numbers the kernel holds
 * (inodes.c), and zrfs_versions_trim() gives entries back once it holds
 * none, the oldest looked at first: the table is as large as the changed
 * records whose files the kernel still holds. A record without an entry is
 * at version 0, as if it had never changed.
 *
 * Everything here is read under the names lock (view.c) and changed under
 * it, written.
 *
 * Sections: the table, changes, set-up.
 */
#include "zrfs_i.h"

#include <errno.h>
#include <stdlib.h>

/* (field, id) -> version of a record file that changed since the mount,
 * while the kernel holds a number of it; the oldest checked first. */
struct version {
	struct zrfs_link link;    /* in s->t, by key */
	uint64_t key;             /* id * ZR_FIELDS_MAX + field */
	uint8_t version;
	struct version *older, *newer; /* in s->oldest .. s->newest */
};

struct zrfs_versions {
	struct zrfs_table t;      /* struct version, by key */
	struct version *oldest, *newest; /* by when last changed or looked at */
	uint64_t *npy;            /* per field: the generation its .npy last changed */
};

/* ---- the table ---- */

static struct version *version_find(const struct zrfs_versions *s, uint64_t key)
{
	for (struct zrfs_link *l = zrfs_table_first(&s->t, zrfs_hash_u64(key)); l;
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

	if (!fs->versions || fs->versions->t.n == 0)
		return 0;
	e = version_find(fs->versions, id * ZR_FIELDS_MAX + field);
	return e ? e->version : 0;
}

uint64_t zrfs_npy_version(const struct zrfs *fs, unsigned field)
{
	return fs->versions ? fs->versions->npy[field] : 0;
}

/* ---- changes ---- */

/* Take @e out of the order of versions, and put it back as the newest. */
static void version_unlink(struct zrfs_versions *s, struct version *e)
{
	*(e->older ? &e->older->newer : &s->oldest) = e->newer;
	*(e->newer ? &e->newer->older : &s->newest) = e->older;
	e->older = e->newer = NULL;
}

static void version_link(struct zrfs_versions *s, struct version *e)
{
	e->older = s->newest;
	*(e->older ? &e->older->newer : &s->oldest) = e;
	s->newest = e;
}

/* Whether the kernel holds number @v of record @id of @field, or its twin
 * in tree/ (held only where tree/ shows the field as text); or pinned. */
static bool version_held(struct zrfs *fs, unsigned field, uint64_t id, uint8_t v, bool pinned)
{
	fuse_ino_t ino = zrfs_rec_ino(field, id, v), text = zrfs_rec_text_ino(ino);

	if (pinned)
		return zrfs_inode_pinned(fs, ino) || zrfs_inode_pinned(fs, text);
	return zrfs_inode_held(fs, ino) || zrfs_inode_held(fs, text);
}

int zrfs_rec_version_bump(struct zrfs *fs, unsigned field, uint64_t id)
{
	struct zrfs_versions *s = fs->versions;
	uint64_t key = id * ZR_FIELDS_MAX + field;
	struct version *e = version_find(s, key);

	if (!e) {
		if (!(e = calloc(1, sizeof *e)))
			return -ENOMEM;
		e->key = key;
		if (zrfs_table_add(&s->t, &e->link, zrfs_hash_u64(key)) < 0) {
			free(e);
			return -ENOMEM;
		}
	} else {
		version_unlink(s, e);
	}
	version_link(s, e);
	/* the next version none of whose numbers the kernel holds (a version
	 * comes round again after 256 changes of one record); if none, the
	 * next one none of whose numbers is pinned; if none, the oldest: the
	 * kernel keeps an inode it was handed, unused, until memory is short,
	 * and with it the pin of its older bytes */
	uint8_t from = e->version, free_one = from;
	for (int k = 1; k < ZRFS_VERSIONS; k++) {
		uint8_t v = (uint8_t)(from + k);
		if (version_held(fs, field, id, v, true))
			continue;
		if (free_one == from)
			free_one = v;
		if (!version_held(fs, field, id, v, false)) {
			free_one = v;
			break;
		}
	}
	e->version = free_one != from ? free_one : (uint8_t)(from + 1);
	return free_one == from;
}

size_t zrfs_versions_trim(struct zrfs *fs, size_t budget)
{
	struct zrfs_versions *s = fs->versions;

	for (; budget && s->oldest; budget--) {
		struct version *e = s->oldest;
		unsigned field = (unsigned)(e->key % ZR_FIELDS_MAX);
		uint64_t id = e->key / ZR_FIELDS_MAX;
		fuse_ino_t ino = zrfs_rec_ino(field, id, e->version);
		version_unlink(s, e);
		if (zrfs_inode_family_held(fs, ino)) {
			version_link(s, e); /* looked at again after the others */
			continue;
		}
		/* numbered as before its first change from now on: what the
		 * cache made of either number is of other bytes */
		zrfs_cache_drop(fs->cache, zrfs_rec_cache_key(ino));
		zrfs_cache_drop(fs->cache, zrfs_rec_cache_key(zrfs_rec_ino(field, id, 0)));
		zrfs_table_del(&s->t, &e->link);
		free(e);
	}
	return s->t.n;
}

void zrfs_npy_version_set(struct zrfs *fs, unsigned field, uint64_t version)
{
	fs->versions->npy[field] = version;
}

/* ---- set-up ---- */

int zrfs_versions_create(struct zrfs *fs, uint64_t gen)
{
	struct zrfs_versions *s = calloc(1, sizeof *s);

	if (!s || !(s->npy = calloc(fs->nfields + 1, sizeof *s->npy))) {
		free(s);
		return -ENOMEM;
	}
	for (unsigned f = 0; f < fs->nfields; f++)
		s->npy[f] = gen;
	fs->versions = s;
	return 0;
}

void zrfs_versions_destroy(struct zrfs *fs)
{
	struct zrfs_versions *s = fs->versions;

	if (!s)
		return;
	while (s->oldest) {
		struct version *e = s->oldest;
		s->oldest = e->newer;
		free(e);
	}
	zrfs_table_free(&s->t);
	free(s->npy);
	free(s);
	fs->versions = NULL;
}
