/*
 * write_staged.c - the files of a writable mount created and not yet
 * committed ("staged", see write_names.c), under the writer's lock: on a
 * list (w->staged), and in two tables, by name while not placed (what
 * lookups and creates ask) and by inode number (what every request on a
 * file of theirs asks, and every FORGET).
 *
 * Sections: finding, adding and changing, settling and dropping.
 */
#include "write_i.h"

#include <stdlib.h>
#include <string.h>

/* ---- finding ---- */

static size_t name_bucket(unsigned field, const char *name)
{
	uint64_t h = 14695981039346656037u ^ field; /* FNV-1a */

	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 1099511628211u;
	return (size_t)(h % STAGED_BUCKETS);
}

static struct staged **ino_bucket(struct zrfs_writes *w, fuse_ino_t ino)
{
	return &w->inos[(ino ^ (ino >> 32)) % STAGED_BUCKETS];
}

struct staged *zrfs_staged_by_name(struct zrfs_writes *w, unsigned field, const char *name)
{
	for (struct staged *s = w->names[name_bucket(field, name)]; s; s = s->name_next)
		if (s->field == field && strcmp(s->name, name) == 0)
			return s;
	return NULL;
}

struct staged *zrfs_staged_by_ino(struct zrfs_writes *w, fuse_ino_t ino)
{
	for (struct staged *s = *ino_bucket(w, ino); s; s = s->ino_next)
		if (s->ino == ino)
			return s;
	return NULL;
}

/* ---- adding and changing ---- */

static void name_add(struct zrfs_writes *w, struct staged *s)
{
	struct staged **b = &w->names[name_bucket(s->field, s->name)];

	s->name_next = *b;
	*b = s;
}

/* @s is placed or goes: its name is no longer found. */
static void name_remove(struct zrfs_writes *w, struct staged *s)
{
	for (struct staged **p = &w->names[name_bucket(s->field, s->name)]; *p;
	     p = &(*p)->name_next)
		if (*p == s) {
			*p = s->name_next;
			return;
		}
}

void zrfs_staged_add(struct zrfs_writes *w, struct staged *s)
{
	struct staged **b = ino_bucket(w, s->ino);

	s->next = w->staged;
	if (s->next)
		s->next->prevp = &s->next;
	s->prevp = &w->staged;
	w->staged = s;
	name_add(w, s);
	s->ino_next = *b;
	*b = s;
	w->nstaged++;
}

void zrfs_staged_rename(struct zrfs_writes *w, struct staged *s, char *name)
{
	name_remove(w, s);
	free(s->name);
	s->name = name;
	name_add(w, s);
}

void zrfs_staged_placed(struct zrfs_writes *w, struct staged *s)
{
	name_remove(w, s);
	s->placed = true;
}

/* ---- settling and dropping ---- */

void zrfs_staged_settle(struct zrfs *fs, struct staged *s)
{
	struct zrfs_writes *w = fs->writes;

	zrfs_follow_note_entry(fs, ZRFS_INO_DIR + s->field, s->name);
	s->pending = false;
	zrfs_staged_placed(w, s);
	zrfs_wfile_put(s->f);
	s->f = NULL;
	w->nstaged--;
}

void zrfs_staged_drop(struct zrfs_writes *w, struct staged *s)
{
	*s->prevp = s->next;
	if (s->next)
		s->next->prevp = s->prevp;
	for (struct staged **p = ino_bucket(w, s->ino); *p; p = &(*p)->ino_next)
		if (*p == s) {
			*p = s->ino_next;
			break;
		}
	if (!s->placed)
		name_remove(w, s);
	if (s->f) {
		s->f->staged = NULL;
		zrfs_wfile_put(s->f);
		w->nstaged--;
	}
	free(s->name);
	free(s);
}

void zrfs_staged_free_all(struct zrfs *fs)
{
	struct zrfs_writes *w = fs->writes;

	while (w->staged) {
		if (!w->staged->placed)
			fuse_log(FUSE_LOG_WARNING, "zrfs: %s: %s/%s: never stored, dropped\n",
				 fs->dataset, fs->fields[w->staged->field].name, w->staged->name);
		zrfs_staged_drop(w, w->staged);
	}
}

void zrfs_staged_drop_failed(struct zrfs *fs, struct wfile *f)
{
	struct zrfs_writes *w = fs->writes;

	pthread_mutex_lock(&w->lock);
	if (f->staged && f->staged->f == f) {
		fuse_log(FUSE_LOG_WARNING, "zrfs: %s: %s/%s: not stored, removed\n", fs->dataset,
			 fs->fields[f->staged->field].name, f->staged->name);
		zrfs_staged_drop(w, f->staged);
	}
	pthread_mutex_unlock(&w->lock);
}
