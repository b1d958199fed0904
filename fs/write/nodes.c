/*
 * nodes.c - the write layer's nodes and the names and numbers it gives:
 * drafts (new files) by name and in creation order, record nodes by
 * (field, id), the inode numbers the kernel holds (drafts', and records'
 * moved by renames), and aliases. Every function here runs under
 * w->names_lock (write_i.h), except reference counting.
 *
 * Sections: nodes, drafts, inode numbers, aliases, records moving, what a
 * number is, the end.
 */
#include "write_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- nodes ---- */

struct wnode *zrfs_node_new(unsigned field, enum wnode_kind kind, uint64_t id)
{
	struct wnode *n = calloc(1, sizeof *n);

	if (!n)
		return NULL;
	atomic_init(&n->refs, 1);
	pthread_mutex_init(&n->lock, NULL);
	zrfs_value_init(&n->val);
	n->field = field;
	n->kind = kind;
	n->id = id;
	n->stored = NO_ID;
	return n;
}

struct wnode *zrfs_node_ref(struct wnode *n)
{
	atomic_fetch_add(&n->refs, 1);
	return n;
}

void zrfs_node_put(struct wnode *n)
{
	if (!n || atomic_fetch_sub(&n->refs, 1) != 1)
		return;
	zrfs_value_free(&n->val);
	pthread_mutex_destroy(&n->lock);
	free(n->name);
	free(n->dirpath);
	free(n);
}

static uint64_t record_hash(unsigned field, uint64_t id)
{
	return zrfs_hash_u64(id * ZR_FIELDS_MAX + field);
}

/* Draft @d in the table of targets as standing in for record @id, or out
 * of it (a table that cannot grow takes it in a longer chain: no failure);
 * w->ntargets follows, for readers without names_lock. */
static void target_add(struct zrfs_writes *w, struct wnode *d, uint64_t id)
{
	zrfs_table_add(&w->targets, &d->by_target, record_hash(d->field, id));
	atomic_store(&w->ntargets, w->targets.n);
}

static void target_del(struct zrfs_writes *w, struct wnode *d)
{
	zrfs_table_del(&w->targets, &d->by_target);
	atomic_store(&w->ntargets, w->targets.n);
}

static struct wnode *record_find(struct zrfs_writes *w, unsigned field, uint64_t id)
{
	for (struct zrfs_link *l = zrfs_table_first(&w->records, record_hash(field, id)); l;
	     l = zrfs_table_next(l)) {
		struct wnode *n = zrfs_container(l, struct wnode, by_record);
		if (n->field == field && n->id == id)
			return n;
	}
	return NULL;
}

struct wnode *zrfs_node_of_record(struct zrfs_writes *w, unsigned field, uint64_t id)
{
	struct wnode *n = record_find(w, field, id);

	if (n)
		return zrfs_node_ref(n);
	if (!(n = zrfs_node_new(field, WN_RECORD, id)))
		return NULL;
	if (zrfs_table_add(&w->records, &n->by_record, record_hash(field, id)) < 0) {
		zrfs_node_put(n);
		return NULL;
	}
	return zrfs_node_ref(n); /* one for the table, one for the caller */
}

void zrfs_node_release(struct zrfs_writes *w, struct wnode *n)
{
	if (n->kind != WN_RECORD || n->handles || n->detached || record_find(w, n->field, n->id) != n)
		return;
	zrfs_table_del(&w->records, &n->by_record);
	zrfs_node_put(n);
}

static void identity_drop(struct zrfs_writes *w, unsigned field, uint64_t id, bool gone);
static void inode_del(struct zrfs_writes *w, struct winode *i);

void zrfs_nodes_detach_record(struct zrfs_writes *w, unsigned field, uint64_t id)
{
	struct wnode *n = record_find(w, field, id);

	/* a file kept its number when it became the record: the record's
	 * value is another file's now */
	identity_drop(w, field, id, true);
	if (!n)
		return;
	n->detached = true;
	zrfs_table_del(&w->records, &n->by_record);
	if (n->handles && !atomic_load(&n->loaded) && !atomic_load(&n->keep)) {
		atomic_store(&n->keep, true); /* the table's reference, the list's now */
		n->keep_next = w->keep;
		w->keep = n;
		return;
	}
	zrfs_node_put(n);
}

/* Load @n's stored value, it being kept (zrfs_nodes_keep), and let it go. */
static void keep_load(struct zrfs *fs, struct wnode *n)
{
	int rc;

	pthread_mutex_lock(&n->lock);
	rc = zrfs_node_load(fs, n); /* (kept: a detached one loads too) */
	atomic_store(&n->keep, false); /* loaded, or never: its reads fail */
	pthread_mutex_unlock(&n->lock);
	if (rc < 0 && zrfs_log_admit())
		fuse_log(FUSE_LOG_ERR, "zrfs: %s: %s/%llu: a removed or replaced file still open "
			 "cannot keep its bytes (%s): reading it fails\n", fs->dataset,
			 fs->fields[n->field].name, (unsigned long long)n->id, strerror(-rc));
	zrfs_node_put(n);
}

void zrfs_nodes_keep(struct zrfs *fs, unsigned field, uint64_t id)
{
	struct zrfs_writes *w = fs->writes;
	struct wnode *n = NULL, *list;

	pthread_mutex_lock(&w->names_lock);
	list = w->keep;
	w->keep = NULL;
	if (id != NO_ID && (n = record_find(w, field, id)) != NULL &&
	    (!n->handles || atomic_load(&n->loaded)))
		n = NULL;
	if (n)
		zrfs_node_ref(n);
	pthread_mutex_unlock(&w->names_lock);
	while (list) {
		struct wnode *k = list;
		list = k->keep_next;
		keep_load(fs, k);
	}
	if (n)
		keep_load(fs, n);
}

/* ---- drafts ---- */

bool zrfs_drafts_in(struct zrfs_writes *w, fuse_ino_t dir)
{
	for (struct wnode *d = w->first; d; d = d->next)
		if (d->parent == dir)
			return true;
	return false;
}

static uint64_t dir_name_hash(fuse_ino_t parent, const char *name)
{
	return zrfs_hash(name, strlen(name), parent);
}

static struct winode *inode_add(struct zrfs_writes *w, fuse_ino_t ino)
{
	struct winode *i = calloc(1, sizeof *i);

	if (!i)
		return NULL;
	i->ino = ino;
	i->id = NO_ID;
	i->was_id = NO_ID;
	if (zrfs_table_add(&w->inodes, &i->link, zrfs_hash_u64(ino)) < 0) {
		free(i);
		return NULL;
	}
	return i;
}

/* Entry @l of table @t (in it: @*filed) is record (@field, @id)'s now, and
 * in @t by it, or in no table (@id NO_ID): whether it is (a table that
 * cannot grow takes it in a longer chain: only an empty one refuses). */
static bool record_file(struct zrfs_table *t, struct zrfs_link *l, bool *filed, unsigned field,
			uint64_t id)
{
	if (*filed)
		zrfs_table_del(t, l);
	*filed = id != NO_ID && zrfs_table_add(t, l, record_hash(field, id)) == 0;
	return *filed || id == NO_ID;
}

/* Winode @i, a record's file the kernel holds, is unlinked by the change
 * being made: the record it is in the view shown now, noted for
 * zrfs_winodes_unlinked_shown (short of memory: an open of it fails with
 * ESTALE, as before it was noted). */
static void note_unlinked(struct zrfs_writes *w, struct winode *i)
{
	uint64_t gen = w->shown_gen;

	i->was_id = zrfs_moved_at(&i->id_moved, i->id, gen);
	i->was_field = i->field;
	i->was_gen = gen;
	if (w->nunlinked == w->unlinked_cap) {
		size_t cap = w->unlinked_cap ? 2 * w->unlinked_cap : 16;
		fuse_ino_t *v = realloc(w->unlinked, cap * sizeof *v);
		if (!v)
			return;
		w->unlinked = v;
		w->unlinked_cap = cap;
	}
	w->unlinked[w->nunlinked++] = i->ino;
}

bool zrfs_number_current(struct zrfs *fs, fuse_ino_t ino)
{
	unsigned field, version;
	uint64_t id;

	return zrfs_rec_decode(fs, ino, &field, &id, &version) &&
	       zrfs_rec_version(fs, field, id) == version;
}

void zrfs_winodes_unlinked_shown(struct zrfs *fs, struct zrfs_view *old, uint64_t gen)
{
	struct zrfs_writes *w = fs->writes;
	size_t left = 0;

	for (size_t k = 0; k < w->nunlinked; k++) {
		struct winode *i = zrfs_winode_find(w, w->unlinked[k]);
		if (!i || i->was_id == NO_ID || (i->id != NO_ID && !i->kept))
			continue; /* forgotten, or shows a record again */
		if (i->was_gen != old->gen || i->was_id >= old->n) {
			i->was_id = NO_ID; /* another view's: none to show */
			continue;
		}
		if (i->kept && i->id != NO_ID && zrfs_number_current(fs, i->ino)) {
			/* its record's value changes with a commit to come */
			i->was_id = zrfs_moved_at(&i->id_moved, i->id, gen);
			i->was_gen = gen;
			w->unlinked[left++] = i->ino;
			continue;
		}
		/* the view it showed, in place of one pinned to it before (a
		 * record's own number kept, pinned at an earlier change) */
		zrfs_inode_unpin(fs, i->ino);
		if (zrfs_inode_pin(fs, i->ino, old) != 1)
			i->was_id = NO_ID; /* the kernel forgot it meanwhile */
	}
	w->nunlinked = left;
}

int zrfs_winode_was(struct zrfs_writes *w, fuse_ino_t ino, unsigned *field, uint64_t *id,
		    bool *text, uint64_t *gen)
{
	struct winode *i;
	int rc = -ESTALE;

	pthread_mutex_lock(&w->names_lock);
	if ((i = zrfs_winode_find(w, ino)) != NULL && !i->draft && i->was_id != NO_ID) {
		*field = i->was_field;
		*id = i->was_id;
		*text = i->text;
		*gen = i->was_gen;
		rc = 0;
	}
	pthread_mutex_unlock(&w->names_lock);
	return rc;
}

/* Winode @i shows record (@field, @id) from now on (NO_ID: none, ESTALE),
 * filed by it unless it is a draft's number (short of memory: none). Its
 * identity, if it has one, follows with identity_set. */
static void winode_place(struct zrfs_writes *w, struct winode *i, unsigned field, uint64_t id)
{
	if (id == NO_ID && i->id != NO_ID && !i->draft && zrfs_inode_held(w->fs, i->ino))
		note_unlinked(w, i);
	else if (id != NO_ID)
		i->was_id = NO_ID;
	i->field = field;
	i->id = id;
	if (!record_file(&w->record_files, &i->by_record, &i->filed, field, i->draft ? NO_ID : id))
		i->id = NO_ID;
}

/* The first winode filed under record (@field, @id) that is its identity
 * (@identity), or any. */
static struct winode *file_find(struct zrfs_writes *w, unsigned field, uint64_t id,
				bool identity)
{
	for (struct zrfs_link *l = zrfs_table_first(&w->record_files, record_hash(field, id)); l;
	     l = zrfs_table_next(l)) {
		struct winode *i = zrfs_container(l, struct winode, by_record);
		if (i->field == field && i->id == id && (i->identity || !identity))
			return i;
	}
	return NULL;
}

/* Winode @i is record (i->field, i->id)'s file from now on (i->id NO_ID:
 * no record's): its identity, the only one of that record. */
static void identity_set(struct zrfs_writes *w, struct winode *i)
{
	if (i->identity) {
		i->identity = false;
		atomic_fetch_sub(&w->nidentities, 1);
	}
	if (i->id != NO_ID)
		identity_drop(w, i->field, i->id, false); /* the newest file is the record's */
	i->identity = i->filed && !i->moved;
	if (i->identity)
		atomic_fetch_add(&w->nidentities, 1);
}

/* Record (@field, @id)'s files have no number of their own any more; one
 * the kernel does not hold means nothing now, nor, if the file is @gone
 * (the record's value is another file's), one it holds: an unlinked file's
 * (its last attributes for fstat, never the other file's), unless it is
 * the record's own number kept (it shows the record while the record's
 * version has it: number_shown). */
static void identity_drop(struct zrfs_writes *w, unsigned field, uint64_t id, bool gone)
{
	struct winode *i;

	if (!atomic_load(&w->nidentities))
		return;
	while ((i = file_find(w, field, id, true)) != NULL) {
		i->identity = false;
		atomic_fetch_sub(&w->nidentities, 1);
		if (!zrfs_inode_held(w->fs, i->ino))
			inode_del(w, i);
		else if (gone && !i->kept)
			winode_place(w, i, field, NO_ID);
		else if (gone) /* a kept one is its id's while its version is */
			note_unlinked(w, i);
	}
}

fuse_ino_t zrfs_winode_identity(struct zrfs_writes *w, unsigned field, uint64_t id, bool text,
				uint64_t gen)
{
	for (struct zrfs_link *l = zrfs_table_first(&w->record_files, record_hash(field, id)); l;
	     l = zrfs_table_next(l)) {
		struct winode *i = zrfs_container(l, struct winode, by_record);
		/* a file a delete moves into @id before view @gen has the move
		 * is another record's there: the one removed, still shown */
		if (i->identity && i->field == field && i->id == id && i->text == text &&
		    zrfs_moved_at(&i->id_moved, i->id, gen) == id)
			return i->ino;
	}
	return 0;
}

static void inode_del(struct zrfs_writes *w, struct winode *i)
{
	if (i->kept)
		atomic_fetch_sub(&w->nkept, 1);
	winode_place(w, i, i->field, NO_ID);
	identity_set(w, i); /* none any more */
	zrfs_table_del(&w->inodes, &i->link);
	if (i->moved) {
		*(i->older ? &i->older->newer : &w->moved_oldest) = i->newer;
		*(i->newer ? &i->newer->older : &w->moved_newest) = i->older;
		w->nmoved--;
	}
	zrfs_node_put(i->draft);
	free(i);
}

/* Whether @i is a record's own number kept as its file's (keep_number)
 * while that record is at another id now (a delete or a rename moved it):
 * once the kernel holds the number no more, versions.c may give it to the
 * record at the id it names, another file, whose number it must then be. */
static bool kept_elsewhere(struct zrfs_writes *w, const struct winode *i)
{
	unsigned field, version;
	uint64_t id;

	return i->kept && (!zrfs_rec_decode(w->fs, i->ino, &field, &id, &version) ||
			   field != i->field || id != i->id);
}

struct wnode *zrfs_node_dir(struct zrfs_writes *w, fuse_ino_t ino)
{
	struct winode *i = zrfs_winode_find(w, ino);

	return i && i->draft && i->draft->kind == WN_DIR && i->draft->listed ? i->draft : NULL;
}

/* One more (@by 1) or one less (-1) entry @d in its directory (and, @d a
 * directory, subdirectory: a directory's links are 2 and one a subdirectory). */
static void count_child(struct zrfs_writes *w, const struct wnode *d, int by)
{
	struct wnode *dir = zrfs_node_dir(w, d->parent);
	size_t sub = d->kind == WN_DIR ? (size_t)by : 0;

	if (dir) {
		dir->children += (size_t)by;
		dir->subdirs += sub;
	} else if (d->parent >= ZRFS_INO_DIR && d->parent < ZRFS_INO_DIR + w->fs->nfields) {
		w->dir_subdirs[d->parent - ZRFS_INO_DIR] += sub;
	}
}

int zrfs_draft_add(struct zrfs_writes *w, struct wnode *d)
{
	struct winode *i;

	d->seq = ++w->seq;
	d->ino = ZRFS_INO_STAGED | d->seq;
	if (!(i = inode_add(w, d->ino)))
		return -ENOMEM;
	if (zrfs_table_add(&w->drafts_by_name, &d->by_name, dir_name_hash(d->parent, d->name)) < 0) {
		inode_del(w, i);
		return -ENOMEM;
	}
	i->draft = zrfs_node_ref(d);
	i->field = d->field;
	i->text = d->text;
	if (d->id != NO_ID)
		target_add(w, d, d->id);
	d->prev = w->last;
	*(w->last ? &w->last->next : &w->first) = d;
	w->last = d;
	d->listed = true;
	count_child(w, d, 1);
	if (d->kind == WN_DIR)
		w->ndirs++;
	zrfs_node_ref(d); /* the tables' */
	return 0;
}

struct wnode *zrfs_draft_find(struct zrfs_writes *w, fuse_ino_t parent, const char *name,
			      uint64_t gen)
{
	for (struct zrfs_link *l = zrfs_table_first(&w->drafts_by_name, dir_name_hash(parent, name)); l;
	     l = zrfs_table_next(l)) {
		struct wnode *d = zrfs_container(l, struct wnode, by_name);
		if (d->parent == parent && strcmp(d->name, name) == 0)
			return gen && zrfs_draft_settled(d, gen) ? NULL : d;
	}
	return NULL;
}

int zrfs_draft_rename(struct zrfs_writes *w, struct wnode *d, fuse_ino_t parent, const char *name)
{
	char *copy = strdup(name);

	if (!copy)
		return -ENOMEM;
	zrfs_table_del(&w->drafts_by_name, &d->by_name);
	count_child(w, d, -1);
	free(d->name);
	d->name = copy;
	d->parent = parent;
	count_child(w, d, 1);
	/* the bucket array only grows: adding back what was there cannot fail */
	zrfs_table_add(&w->drafts_by_name, &d->by_name, dir_name_hash(d->parent, d->name));
	return 0;
}

bool zrfs_node_hidden(struct zrfs_writes *w, const struct wnode *d)
{
	if (d->fieldless || d->tree)
		return d->fieldless;
	for (int depth = 0; d && depth < ZRFS_NAME_MAX; depth++) {
		if (zrfs_name_hidden(d->name))
			return true;
		d = zrfs_node_dir(w, d->parent);
	}
	return false;
}

int zrfs_node_path(struct zrfs_writes *w, const struct wnode *d, char *buf, size_t cap)
{
	size_t at = cap - 1;

	if (d->tree) {
		int n = snprintf(buf, cap, "%s%s%s", d->dirpath, d->dirpath[0] ? "/" : "", d->name);
		return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
	}
	buf[at] = 0;
	for (int depth = 0; d; depth++) {
		size_t len = strlen(d->name);
		if (len + (at < cap - 1) > at || depth >= ZRFS_NAME_MAX)
			return -ENAMETOOLONG;
		if (at < cap - 1)
			buf[--at] = '/';
		at -= len;
		memcpy(buf + at, d->name, len);
		d = zrfs_node_dir(w, d->parent);
	}
	memmove(buf, buf + at, cap - at);
	return 0;
}

void zrfs_draft_target(struct zrfs_writes *w, struct wnode *d, uint64_t id)
{
	if (d->listed && d->id != NO_ID)
		target_del(w, d);
	d->id = id;
	d->id_moved = (struct wmoved){0}; /* in every view (a rename, a fill-in) */
	if (d->listed && id != NO_ID)
		target_add(w, d, id);
}

void zrfs_draft_stored(struct zrfs_writes *w, struct wnode *d, uint64_t id)
{
	if (d->listed && d->stored == NO_ID && id != NO_ID)
		w->nstored++;
	else if (d->listed && d->stored != NO_ID && id == NO_ID)
		w->nstored--;
	d->stored = id;
}

struct wnode *zrfs_draft_targeting(struct zrfs_writes *w, unsigned field, uint64_t id)
{
	if (!w->targets.n)
		return NULL;
	for (struct zrfs_link *l = zrfs_table_first(&w->targets, record_hash(field, id)); l;
	     l = zrfs_table_next(l)) {
		struct wnode *d = zrfs_container(l, struct wnode, by_target);
		if (d->field == field && d->id == id)
			return d;
	}
	return NULL;
}

void zrfs_draft_unlist(struct zrfs_writes *w, struct wnode *d)
{
	struct winode *i;

	if (!d->listed)
		return;
	if (d->id != NO_ID)
		target_del(w, d);
	if (d->stored != NO_ID)
		w->nstored--;
	count_child(w, d, -1);
	d->listed = false;
	zrfs_table_del(&w->drafts_by_name, &d->by_name);
	*(d->prev ? &d->prev->next : &w->first) = d->next;
	*(d->next ? &d->next->prev : &w->last) = d->prev;
	d->next = d->prev = NULL;
	if (d->kind == WN_DIR)
		w->ndirs--;
	/* its number, for as long as the kernel holds it: the record it became,
	 * or (removed, replaced) the bytes it has, as an unlinked file keeps
	 * them for whoever has it open */
	if ((i = zrfs_winode_find(w, d->ino)) != NULL) {
		if (d->stored != NO_ID) {
			zrfs_node_put(i->draft);
			i->draft = NULL;
		}
		winode_place(w, i, i->field, d->stored);
		i->id_moved = d->stored_moved; /* older views: where it was */
		/* the record's file keeps its number, held or not (while there
		 * is room for those not held) */
		bool held = zrfs_inode_held(w->fs, d->ino);
		if (!d->detached && (held || atomic_load(&w->nidentities) < IDENTITIES_MAX))
			identity_set(w, i);
		if (!held && !i->identity)
			inode_del(w, i);
	}
	zrfs_node_put(d); /* the tables' */
}

void zrfs_draft_settle(struct zrfs *fs, struct wnode *d, uint64_t id)
{
	struct zrfs_writes *w = fs->writes;
	char own[ZRFS_NAME_MAX + 1];

	/* in tree/ the name is the record's own; elsewhere, if it is not
	 * "ID.ext", an alias keeps it */
	zrfs_record_name_format(fs, d->field, id, own, sizeof own);
	if (!d->tree && (d->parent != ZRFS_INO_DIR + d->field || strcmp(own, d->name) != 0))
		zrfs_alias_set(w, d->parent, d->field, d->name, id);
	zrfs_draft_stored(w, d, id);
	/* its handles write the record from now on */
	zrfs_nodes_detach_record(w, d->field, id);
	zrfs_draft_unlist(w, d);
	d->kind = WN_RECORD;
	d->id = id;
	/* its mode and owner are the record's now, which a chmod or chown
	 * changes from here on (the draft's, shown over them, would hide it) */
	atomic_store(&d->mode_set, false);
	atomic_store(&d->owner_set, false);
	if (d->handles && zrfs_table_add(&w->records, &d->by_record, record_hash(d->field, id)) == 0)
		zrfs_node_ref(d);
}

/* ---- inode numbers ---- */

struct winode *zrfs_winode_find(struct zrfs_writes *w, fuse_ino_t ino)
{
	for (struct zrfs_link *l = zrfs_table_first(&w->inodes, zrfs_hash_u64(ino)); l;
	     l = zrfs_table_next(l)) {
		struct winode *i = zrfs_container(l, struct winode, link);
		if (i->ino == ino)
			return i;
	}
	return NULL;
}

void zrfs_winode_let_go(struct zrfs_writes *w, fuse_ino_t ino)
{
	struct winode *i = zrfs_winode_find(w, ino);

	/* a record's file keeps its number (while there is room): looked up
	 * again, it is that number; but not a record's own number kept by a
	 * record that is at another id now (kept_elsewhere) */
	if (i && !(i->draft && i->draft->listed) && !zrfs_inode_held(w->fs, ino) &&
	    !(i->identity && !kept_elsewhere(w, i) &&
	      atomic_load(&w->nidentities) <= IDENTITIES_MAX))
		inode_del(w, i);
}

void zrfs_winode_moved(struct zrfs_writes *w, fuse_ino_t ino, unsigned field, uint64_t id,
		       const struct zrfs_subtree *hook)
{
	struct winode *i = zrfs_winode_find(w, ino);

	if (!i) {
		/* a number the kernel does not hold: nothing writes through it */
		if (!zrfs_inode_adopt(w->fs, ino, hook))
			return;
		if (w->nmoved >= MOVED_MAX)
			inode_del(w, w->moved_oldest); /* its writes go to its old record */
		if (!(i = inode_add(w, ino)))
			return; /* short of memory: as if the kernel had forgotten it */
		i->moved = true;
		i->older = w->moved_newest;
		*(i->older ? &i->older->newer : &w->moved_oldest) = i;
		w->moved_newest = i;
		w->nmoved++;
	}
	winode_place(w, i, field, id);
	if (i->identity)
		identity_set(w, i); /* a kept number: the file is record @id's now */
	if (kept_elsewhere(w, i) && !zrfs_inode_held(w->fs, ino))
		inode_del(w, i);
}

/* ---- aliases ---- */

static struct walias *alias_find(struct zrfs_writes *w, fuse_ino_t parent, const char *name)
{
	for (struct zrfs_link *l = zrfs_table_first(&w->aliases, dir_name_hash(parent, name)); l;
	     l = zrfs_table_next(l)) {
		struct walias *a = zrfs_container(l, struct walias, link);
		if (a->parent == parent && strcmp(a->name, name) == 0)
			return a;
	}
	return NULL;
}

int zrfs_alias_find(struct zrfs_writes *w, fuse_ino_t parent, const char *name, uint64_t gen,
		    uint64_t *id)
{
	struct walias *a = alias_find(w, parent, name);
	uint64_t at = a ? zrfs_moved_at(&a->id_moved, a->id, gen) : NO_ID;

	if (at == NO_ID)
		return -ENOENT;
	*id = at;
	return 0;
}

static void alias_del(struct zrfs_writes *w, struct walias *a);

/* Alias @a names record @id from now on (NO_ID: none), filed by it (short
 * of memory: the name is forgotten, the record stays). */
static void alias_place(struct zrfs_writes *w, struct walias *a, uint64_t id)
{
	a->id = id;
	if (!record_file(&w->alias_records, &a->by_record, &a->filed, a->field, id))
		alias_del(w, a);
}

static void alias_del(struct zrfs_writes *w, struct walias *a)
{
	record_file(&w->alias_records, &a->by_record, &a->filed, a->field, NO_ID);
	*(a->older ? &a->older->newer : &w->alias_oldest) = a->newer;
	*(a->newer ? &a->newer->older : &w->alias_newest) = a->older;
	zrfs_table_del(&w->aliases, &a->link);
	w->naliases--;
	free(a);
}

/* The first alias of record (@field, @id). */
static struct walias *alias_of(struct zrfs_writes *w, unsigned field, uint64_t id)
{
	for (struct zrfs_link *l = zrfs_table_first(&w->alias_records, record_hash(field, id)); l;
	     l = zrfs_table_next(l)) {
		struct walias *a = zrfs_container(l, struct walias, by_record);
		if (a->field == field && a->id == id)
			return a;
	}
	return NULL;
}

void zrfs_alias_set(struct zrfs_writes *w, fuse_ino_t parent, unsigned field, const char *name,
		    uint64_t id)
{
	struct walias *a = alias_find(w, parent, name);
	size_t len = strlen(name);

	if (a) {
		a->id_moved = (struct wmoved){0};
		alias_place(w, a, id);
		return;
	}
	if (w->naliases >= ALIASES_MAX)
		alias_del(w, w->alias_oldest);
	if (!(a = malloc(sizeof *a + len + 1)))
		return; /* short of memory: the name is forgotten, the record stays */
	a->parent = parent;
	a->field = field;
	a->id = NO_ID;
	a->filed = false;
	a->id_moved = (struct wmoved){0};
	a->newer = NULL;
	a->older = w->alias_newest;
	memcpy(a->name, name, len + 1);
	if (zrfs_table_add(&w->aliases, &a->link, dir_name_hash(parent, name)) < 0) {
		free(a);
		return;
	}
	*(w->alias_newest ? &w->alias_newest->newer : &w->alias_oldest) = a;
	w->alias_newest = a;
	w->naliases++;
	alias_place(w, a, id);
}

void zrfs_alias_drop(struct zrfs_writes *w, fuse_ino_t parent, const char *name)
{
	struct walias *a = alias_find(w, parent, name);

	if (a)
		alias_del(w, a);
}

void zrfs_aliases_drop_in(struct zrfs_writes *w, fuse_ino_t parent)
{
	for (struct walias *a = w->alias_oldest, *next; a; a = next) {
		next = a->newer;
		if (a->parent == parent)
			alias_del(w, a);
	}
}

/* ---- removals waiting ---- */

static bool gone_is(const struct wgone *g, unsigned field, uint64_t id)
{
	return g->field == field && g->id == id;
}

static struct wgone *gone_find(const struct zrfs_writes *w, unsigned field, uint64_t id)
{
	for (struct zrfs_link *l = zrfs_table_first(&w->gone, record_hash(field, id)); l;
	     l = zrfs_table_next(l)) {
		struct wgone *g = zrfs_container(l, struct wgone, link);
		if (gone_is(g, field, id))
			return g;
	}
	return NULL;
}

int zrfs_gone_add(struct zrfs_writes *w, unsigned field, uint64_t id, unsigned version,
		  bool by_name, uint64_t gen)
{
	struct wgone *g = gone_find(w, field, id);

	if (g)
		return 0;
	if (!(g = malloc(sizeof *g)))
		return -ENOMEM;
	*g = (struct wgone){.field = field, .id = id, .version = version, .gen = gen,
			    .by_name = by_name};
	if (zrfs_table_add(&w->gone, &g->link, record_hash(field, id)) < 0) {
		free(g);
		return -ENOMEM;
	}
	atomic_store(&w->ngone, w->gone.n);
	return 0;
}

bool zrfs_gone_has(const struct zrfs_writes *w, unsigned field, uint64_t id, unsigned version,
		   uint64_t gen)
{
	const struct wgone *g;

	return atomic_load(&w->ngone) && (g = gone_find(w, field, id)) != NULL &&
	       g->version == version && gen <= g->gen;
}

struct wgone **zrfs_gone_all(const struct zrfs_writes *w, size_t *count)
{
	struct wgone **all = malloc((w->gone.n + 1) * sizeof *all);
	size_t n = 0;

	for (size_t b = 0; all && b < w->gone.cap; b++)
		for (struct zrfs_link *l = w->gone.buckets[b]; l; l = l->next)
			all[n++] = zrfs_container(l, struct wgone, link);
	*count = n;
	return all;
}

static void gone_free(struct zrfs_link *l)
{
	free(zrfs_container(l, struct wgone, link));
}

void zrfs_gone_clear(struct zrfs_writes *w)
{
	zrfs_table_drain(&w->gone, gone_free);
	atomic_store(&w->ngone, 0);
}

/* ---- records moving ---- */

/* @*id of @m moves to @to with the commit of generation @gen: views before
 * it keep the id they have (a second move before that commit keeps the
 * first one's id before). */
static void move_id(uint64_t *id, struct wmoved *m, uint64_t to, uint64_t gen)
{
	if (m->since != gen) {
		m->was = *id;
		m->since = gen;
	}
	*id = to;
}

void zrfs_nodes_retarget(struct zrfs_writes *w, unsigned field, uint64_t from, uint64_t to)
{
	uint64_t gen = zr_generation(w->ds) + 1; /* the commit that moves it */
	unsigned f0 = field == ZR_FIELDS_MAX ? 0 : field;
	unsigned f1 = field == ZR_FIELDS_MAX ? w->fs->nfields : field + 1;

	if (from == to)
		return;
	/* each found by the record it shows, never by a walk of them all: a
	 * removal costs the same in a directory of a million files */
	for (unsigned f = f0; f < f1; f++) {
		struct wnode *n = record_find(w, f, from), *d;
		struct winode *i;
		struct walias *a;

		if (n) {
			zrfs_table_del(&w->records, &n->by_record);
			if (to == NO_ID || record_find(w, f, to)) {
				n->detached = true; /* its record is gone, or another writer has the place */
				zrfs_node_put(n);
			} else {
				n->id = to;
				zrfs_table_add(&w->records, &n->by_record, record_hash(f, to));
			}
		}
		while ((d = zrfs_draft_targeting(w, f, from)) != NULL) {
			/* NO_ID: the draft becomes a new record; older views
			 * have the record it replaces where it was */
			struct wmoved m = d->id_moved;
			zrfs_draft_target(w, d, to);
			d->id_moved = m.since == gen ? m : (struct wmoved){from, gen};
		}
		while ((i = file_find(w, f, from, false)) != NULL) {
			uint64_t id = i->id;
			move_id(&id, &i->id_moved, to, gen);
			winode_place(w, i, f, id);
			if (i->identity)
				identity_set(w, i);
			if ((to == NO_ID || kept_elsewhere(w, i)) && !zrfs_inode_held(w->fs, i->ino))
				inode_del(w, i); /* a file removed, or moved, that nobody holds */
		}
		while ((a = alias_of(w, f, from)) != NULL) {
			uint64_t id = a->id;
			move_id(&id, &a->id_moved, to, gen);
			alias_place(w, a, id);
		}
	}
	/* drafts stored and not committed yet: few, and only after a commit
	 * failed or while a group stores them */
	for (struct wnode *d = w->nstored ? w->first : NULL; d; d = d->next)
		if (d->stored == from && (field == ZR_FIELDS_MAX || d->field == field)) {
			uint64_t id = d->stored;
			move_id(&id, &d->stored_moved, to, gen);
			zrfs_draft_stored(w, d, id);
		}
}

/* ---- what a number is ---- */

void zrfs_node_links_attr(struct zrfs *fs, struct wnode *n, struct stat *st)
{
	uint64_t id;

	pthread_mutex_lock(&fs->writes->names_lock);
	id = n->kind == WN_RECORD ? n->id : n->stored;
	pthread_mutex_unlock(&fs->writes->names_lock);
	if (id != NO_ID)
		zrfs_tree_links_attr(fs, n->field, id, st);
}

int zrfs_node_stat(struct zrfs *fs, struct wnode *n, fuse_ino_t ino, struct stat *st)
{
	struct zrfs_writes *w = fs->writes;
	struct zrfs_view *v = zrfs_names_begin(fs);
	bool draft;
	uint64_t id;
	int rc;

	pthread_mutex_lock(&w->names_lock);
	draft = n->kind == WN_DRAFT;
	id = n->id;
	pthread_mutex_unlock(&w->names_lock);
	if (draft)
		zrfs_file_attr(fs, v, ino, atomic_load(&n->val.size), st);
	rc = draft ? 0 : zrfs_record_attr(fs, v, ino, n->field, id, st);
	if (rc == 0) /* what it shows, as a listing reads it: under the names lock */
		zrfs_node_meta(n, st);
	zrfs_names_end(fs);
	return rc;
}

bool zrfs_dir_field(struct zrfs *fs, fuse_ino_t ino, unsigned *field)
{
	struct wnode *dir;

	if (ino >= ZRFS_INO_DIR && ino < ZRFS_INO_DIR + fs->nfields) {
		*field = (unsigned)(ino - ZRFS_INO_DIR);
		return true;
	}
	if ((dir = zrfs_node_dir(fs->writes, ino)) != NULL) {
		*field = dir->field;
		return true;
	}
	return false;
}

bool zrfs_dir_tree(struct zrfs *fs, fuse_ino_t ino)
{
	return fs->writes && zrfs_tree_dir(fs, ino);
}

const char *zrfs_node_top(const struct zrfs *fs, const struct wnode *n)
{
	return n->tree ? ZRFS_TREE_NAME : fs->fields[n->field].name;
}

uint64_t zrfs_node_max(const struct zrfs *fs, const struct wnode *n)
{
	return n->fieldless ? ZR_RECORD_MAX
	       : n->text    ? VALUE_TEXT_MAX
			    : zrfs_value_max(&fs->fields[n->field]);
}

/* Record (@field, @id)'s file, opened for writing through its number
 * @ino, keeps that number when what is written gives the record a new
 * version (a program compares its descriptor's number with its name's:
 * sqlite): @ino becomes the file's identity, the overlay's to show. Short
 * of memory or of room, the number changes as before. */
static void keep_number(struct zrfs_writes *w, fuse_ino_t ino, unsigned field, uint64_t id)
{
	struct winode *i;

	if (atomic_load(&w->nidentities) >= IDENTITIES_MAX ||
	    !zrfs_inode_adopt(w->fs, ino, &zrfs_writing) || !(i = inode_add(w, ino)))
		return;
	winode_place(w, i, field, id);
	i->kept = true;
	atomic_fetch_add(&w->nkept, 1);
	identity_set(w, i);
}

struct wnode *zrfs_node_of_ino(struct zrfs *fs, fuse_ino_t ino, bool handle, bool settled,
			       int *rc)
{
	struct zrfs_writes *w = fs->writes;
	struct wnode *n = NULL;
	struct winode *i;
	unsigned field = 0, version;
	uint64_t id = NO_ID;

	/* a number is the view's: with removals waiting, a group may be
	 * moving records' ids this moment (publish.c) */
	pthread_mutex_lock(&w->names_lock);
	if (!settled && atomic_load(&w->ngone)) {
		pthread_mutex_unlock(&w->names_lock);
		*rc = -EAGAIN;
		return NULL;
	}
	*rc = -ESTALE; /* a number that shows nothing any more */
	if ((i = zrfs_winode_find(w, ino)) != NULL) {
		if (i->draft && !i->draft->detached && i->draft->kind != WN_DIR)
			n = zrfs_node_ref(i->draft);
		else if (i->draft && i->draft->kind == WN_DIR)
			*rc = -EISDIR;
		field = i->field;
		id = i->id;
	} else if (!zrfs_rec_decode(fs, ino, &field, &id, &version)) {
		*rc = -EPERM;
	} else if (atomic_load(&w->ngone) && gone_find(w, field, id)) {
		id = NO_ID; /* removed, its commit failed: nothing writes to it */
	} else if (handle && zrfs_is_rec_ino(ino) && id < zr_length(w->ds)) {
		keep_number(w, ino, field, id);
	}
	if (!n && id != NO_ID && id < zr_length(w->ds) && !(n = zrfs_node_of_record(w, field, id)))
		*rc = -ENOMEM;
	if (n && handle)
		n->handles++; /* the handle's, made next */
	pthread_mutex_unlock(&w->names_lock);
	return n;
}

int zrfs_node_load(struct zrfs *fs, struct wnode *n)
{
	int rc;

	if (n->kind != WN_RECORD || n->loaded)
		return 0;
	/* removed or replaced, its value not kept: its id is another's now */
	if (n->detached && !atomic_load(&n->keep))
		return -ESTALE;
	if ((rc = zrfs_value_load(&n->val, fs->writes->dirfd, fs->writes->ds, n->field, n->id)) < 0)
		return rc;
	n->loaded = true;
	return 0;
}

/* ---- the end ---- */

void zrfs_nodes_free_all(struct zrfs *fs)
{
	struct zrfs_writes *w = fs->writes;
	char esc[ZRFS_LOG_NAME_MAX];

	while (w->first) {
		struct wnode *d = w->first;
		char path[ZRFS_PATH_MAX];
		if (d->kind != WN_DIR && d->stored == NO_ID &&
		    zrfs_node_path(w, d, path, sizeof path) == 0)
			fuse_log(FUSE_LOG_WARNING, "zrfs: %s: %s/%s: %s at unmount, never stored\n",
				 fs->dataset, zrfs_node_top(fs, d),
				 zrfs_log_name(path, esc, sizeof esc),
				 d->handles ? "still being written" : "a temporary file");
		zrfs_draft_unlist(w, d);
	}
	while (w->keep) {
		struct wnode *k = w->keep;
		w->keep = k->keep_next;
		zrfs_node_put(k);
	}
	for (size_t b = 0; b < w->records.cap; b++)
		while (w->records.buckets[b]) {
			struct wnode *n = zrfs_container(w->records.buckets[b], struct wnode, by_record);
			if (n->changed && !n->error)
				fuse_log(FUSE_LOG_WARNING, "zrfs: %s: %s/%llu: still being written at "
					 "unmount, not stored: it keeps its value\n", fs->dataset,
					 fs->fields[n->field].name, (unsigned long long)n->id);
			zrfs_table_del(&w->records, &n->by_record);
			zrfs_node_put(n);
		}
	for (size_t b = 0; b < w->inodes.cap; b++)
		while (w->inodes.buckets[b])
			inode_del(w, zrfs_container(w->inodes.buckets[b], struct winode, link));
	while (w->alias_oldest)
		alias_del(w, w->alias_oldest);
	zrfs_table_free(&w->drafts_by_name);
	zrfs_table_free(&w->targets);
	zrfs_table_free(&w->records);
	zrfs_table_free(&w->inodes);
	zrfs_table_free(&w->aliases);
	zrfs_table_free(&w->record_files);
	zrfs_table_free(&w->alias_records);
	zrfs_gone_clear(w);
	free(w->unlinked);
	w->unlinked = NULL;
	w->nunlinked = w->unlinked_cap = 0;
}
