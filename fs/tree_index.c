/*
 * tree_index.c - tree/'s index (tree_i.h): built once at mount from the
 * field of names, kept up to date with each commit's records (follow.c),
 * and the names it gives records' files by id (zrfs_tree_leaf). The
 * subtree that shows it is tree.c.
 *
 * Sections: the index, building and following.
 */
#include "tree_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the index ---- */

static uint64_t tree_name_hash(uint64_t dir, const char *name, size_t len)
{
	return zrfs_hash(name, len, dir);
}

struct tent *tree_ent_find(const struct zrfs_tree_index *t, const struct tdir *d, const char *name,
			   size_t len)
{
	uint64_t h = tree_name_hash(d->no, name, len);

	for (struct zrfs_link *l = zrfs_table_first(&t->names, h); l; l = zrfs_table_next(l)) {
		struct tent *e = zrfs_container(l, struct tent, link);
		if (e->dir == d && e->len == len && memcmp(e->name, name, len) == 0)
			return e;
	}
	return NULL;
}

struct tdir *tree_dir_find(const struct zrfs_tree_index *t, uint64_t no)
{
	for (struct zrfs_link *l = zrfs_table_first(&t->dirs, zrfs_hash_u64(no)); l;
	     l = zrfs_table_next(l)) {
		struct tdir *d = zrfs_container(l, struct tdir, link);
		if (d->no == no)
			return d;
	}
	return NULL;
}

struct tdir *tree_dir_new(struct zrfs_tree_index *t, struct tent *self)
{
	struct tdir *d = calloc(1, sizeof *d);

	if (!d)
		return NULL;
	d->no = t->next_no++;
	d->self = self;
	if (zrfs_table_add(&t->dirs, &d->link, zrfs_hash_u64(d->no)) < 0) {
		free(d);
		return NULL;
	}
	return d;
}

void tree_dir_free(struct zrfs_tree_index *t, struct tdir *d)
{
	zrfs_table_del(&t->dirs, &d->link);
	free(d->ents);
	free(d);
}

struct tent *tree_ent_new(struct zrfs_tree_index *t, struct tdir *d, const char *name, size_t len)
{
	struct tent *e;

	if (d->n == d->cap) {
		/* a directory mostly emptied is packed before it grows (its
		 * listing positions move: a listing under way may miss or repeat
		 * an entry, as on any directory that changes meanwhile) */
		if (d->live < d->n / 2) {
			uint32_t k = 0;
			for (uint32_t i = 0; i < d->n; i++)
				if (d->ents[i]) {
					d->ents[i]->slot = k;
					d->ents[k++] = d->ents[i];
				}
			d->n = k;
		} else {
			uint32_t cap = d->cap ? d->cap * 2 : 4;
			struct tent **ents = cap > d->cap ? realloc(d->ents, cap * sizeof *ents) : NULL;
			if (!ents)
				return NULL;
			d->ents = ents;
			d->cap = cap;
		}
	}
	if (!(e = malloc(sizeof *e + len + 1)))
		return NULL;
	*e = (struct tent){.dir = d, .id = NO_ID, .slot = d->n, .len = (uint16_t)len};
	memcpy(e->name, name, len);
	e->name[len] = 0;
	if (zrfs_table_add(&t->names, &e->link, tree_name_hash(d->no, name, len)) < 0) {
		free(e);
		return NULL;
	}
	d->ents[d->n++] = e;
	d->live++;
	return e;
}

int tree_prune(struct zrfs_tree_index *t, struct tent *e, struct zrfs_notes *notes)
{
	int rc = 0;

	while (e && e->id == NO_ID && !e->sub) {
		struct tdir *d = e->dir;
		d->ents[e->slot] = NULL;
		d->live--;
		zrfs_table_del(&t->names, &e->link);
		free(e->more);
		free(e);
		if (d->live || d->made || t->keep_emptied || !d->self)
			break;
		e = d->self;
		e->sub = NULL;
		e->dir->subs--;
		tree_dir_free(t, d);
		if (notes && rc == 0 &&
		    (rc = zrfs_notes_entry(notes, ZRFS_INO_TREE_DIR | e->dir->no, e->name)) == 0)
			rc = zrfs_notes_inode(notes, ZRFS_INO_TREE_DIR | e->dir->no);
	}
	return rc;
}

/* Room for the entries of records below @n. */
static int of_id_reserve(struct zrfs_tree_index *t, uint64_t n)
{
	uint64_t cap = t->cap ? t->cap : 1024;
	struct tent **o;

	if (n <= t->cap)
		return 0;
	while (cap < n)
		cap *= 2;
	if (!(o = realloc(t->of_id, cap * sizeof *o)))
		return -ENOMEM;
	memset(o + t->cap, 0, (cap - t->cap) * sizeof *o);
	t->of_id = o;
	t->cap = cap;
	return 0;
}

/* The directory of @path's components but the last (made as needed, with
 * their entries noted in @notes when not NULL), and where the last starts. */
static struct tdir *walk(struct zrfs_tree_index *t, const char *path, size_t len, const char **last,
			 struct zrfs_notes *notes, int *rc)
{
	struct tdir *d = t->root;
	const char *at = path, *slash;

	*rc = 0;
	while ((slash = memchr(at, '/', len - (size_t)(at - path))) != NULL) {
		size_t c = (size_t)(slash - at);
		struct tent *e = tree_ent_find(t, d, at, c);
		if (!e && !(e = tree_ent_new(t, d, at, c)))
			goto enomem;
		if (!e->sub) {
			if (!(e->sub = tree_dir_new(t, e))) {
				tree_prune(t, e, NULL);
				goto enomem;
			}
			d->subs++;
			if (notes && ((*rc = zrfs_notes_entry(notes, ZRFS_INO_TREE_DIR | d->no,
							      e->name)) < 0 ||
				      (*rc = zrfs_notes_inode(notes, ZRFS_INO_TREE_DIR | d->no)) < 0))
				return NULL;
		}
		d = e->sub;
		at = slash + 1;
	}
	*last = at;
	return d;
enomem:
	*rc = -ENOMEM;
	return NULL;
}

/* Tell the kernel that the files of entry @e in its directory may name
 * something else now, and that its listing changed. */
static int note_files(struct zrfs *fs, const struct tent *e, struct zrfs_notes *notes)
{
	const struct zrfs_tree_index *t = fs->tree;
	fuse_ino_t dir = ZRFS_INO_TREE_DIR | e->dir->no;
	char name[ZRFS_NAME_MAX + 1];
	int rc = 0;

	if (!notes)
		return 0;
	for (unsigned f = 0; f < fs->nfields && rc == 0; f++) {
		if (!t->makes[f])
			continue;
		if (!fs->names.key)
			rc = zrfs_notes_entry(notes, dir, e->name);
		else if (snprintf(name, sizeof name, "%s.%s", e->name, fs->fields[f].name) <
			 (int)sizeof name)
			rc = zrfs_notes_entry(notes, dir, name);
	}
	return rc < 0 ? rc : zrfs_notes_inode(notes, dir);
}

/* Record @id is named @name (@len bytes, checked safe) from now on. */
static int name_add(struct zrfs *fs, uint64_t id, const char *name, size_t len,
		    struct zrfs_notes *notes)
{
	struct zrfs_tree_index *t = fs->tree;
	const char *last;
	struct tent *e;
	struct tdir *d;
	int rc;

	if ((rc = of_id_reserve(t, id + 1)) < 0 || !(d = walk(t, name, len, &last, notes, &rc)))
		return rc;
	size_t llen = len - (size_t)(last - name);
	if (!(e = tree_ent_find(t, d, last, llen)) && !(e = tree_ent_new(t, d, last, llen)))
		return -ENOMEM;
	if (e->id == NO_ID) {
		e->id = id;
	} else {
		uint64_t *more = realloc(e->more, (e->nmore + 1) * sizeof *more);
		if (!more)
			return -ENOMEM;
		e->more = more;
		if (id < e->id) { /* the lower id shows */
			more[e->nmore++] = e->id;
			e->id = id;
		} else {
			more[e->nmore++] = id;
		}
	}
	t->of_id[id] = e;
	return note_files(fs, e, notes);
}

/* Record @id has no name in the tree any more. */
static int name_drop(struct zrfs *fs, uint64_t id, struct zrfs_notes *notes)
{
	struct zrfs_tree_index *t = fs->tree;
	struct tent *e = id < t->cap ? t->of_id[id] : NULL;
	int rc = 0;

	if (!e)
		return 0;
	t->of_id[id] = NULL;
	rc = e->id == id ? note_files(fs, e, notes) : 0;
	if (e->id == id && e->nmore) {
		uint32_t low = 0;
		for (uint32_t i = 1; i < e->nmore; i++)
			if (e->more[i] < e->more[low])
				low = i;
		e->id = e->more[low];
		e->more[low] = e->more[--e->nmore];
	} else if (e->id == id) {
		e->id = NO_ID;
	} else {
		for (uint32_t i = 0; i < e->nmore; i++)
			if (e->more[i] == id) {
				e->more[i] = e->more[--e->nmore];
				break;
			}
	}
	if (e->id == NO_ID) {
		int gone = tree_prune(t, e, notes);
		rc = rc < 0 ? rc : gone;
	}
	return rc;
}

/* ---- building and following ---- */

/* Whether a name of @len bytes makes files: a relative path below the
 * tree, and for a key no dot in its last part (KEY.FIELD splits at the
 * first). */
static bool makes_files(const struct zrfs *fs, const char *name, size_t len)
{
	const char *base;

	if (!zr_name_safe(name, len))
		return false;
	base = memrchr(name, '/', len);
	base = base ? base + 1 : name;
	return !fs->names.key || !memchr(base, '.', len - (size_t)(base - name));
}

/* Record @id's name as @v has it, into @buf: its length, 0 for none (or
 * one that makes no file), or a negative code. */
static int64_t name_of(struct zrfs *fs, struct zrfs_view *v, uint64_t id, char *buf, size_t cap)
{
	int64_t got = id < v->n ? zr_name_load(v->ds, &fs->names, id, buf, cap) : 0;

	if (got == -ENAMETOOLONG || (got > 0 && !makes_files(fs, buf, (size_t)got)))
		return 0;
	return got;
}

bool tree_shown(const struct zrfs *fs)
{
	return fs->tree != NULL;
}

int zrfs_tree_create(struct zrfs *fs, struct zrfs_view *v)
{
	enum { STEP = 4096 };
	uint64_t ids[STEP], unnamed = 0;
	struct zrfs_tree_index *t;
	char *buf = NULL;
	int rc = 0;

	fs->tree = NULL;
	if (fs->names.field < 0)
		return 0;
	for (unsigned f = 0; f < fs->nfields; f++)
		if (strcmp(fs->fields[f].name, ZRFS_TREE_NAME) == 0)
			return 0;
	if (!(t = calloc(1, sizeof *t)) || !(buf = malloc(PATH_MAX + 1))) {
		free(t);
		return -ENOMEM;
	}
	fs->tree = t;
	/* on a writable mount every change is a program's: a directory it
	 * empties stays until it removes it, as on any filesystem (rm -r,
	 * rsync --delete, a file written into it next) */
	t->keep_emptied = fs->writes != NULL;
	for (unsigned f = 0; f < fs->nfields; f++) {
		t->makes[f] = !zr_names_own(&fs->names, f) &&
			      (fs->names.key || (int)f == fs->names.files);
		t->text[f] = t->makes[f] && zr_names_text(v->ds, &fs->names, f);
	}
	if (!(t->root = tree_dir_new(t, NULL)) || of_id_reserve(t, v->n ? v->n : 1) < 0)
		rc = -ENOMEM;
	/* a pass over the names, a gather of a few thousand at a time */
	for (uint64_t first = 0; rc == 0 && first < v->n; first += STEP) {
		size_t n = v->n - first < STEP ? (size_t)(v->n - first) : STEP, m;
		const zr_slice *s = NULL;
		zr_batch *g = NULL;
		for (size_t i = 0; i < n; i++)
			ids[i] = first + i;
		if (zr_gather(v->ds, (unsigned)fs->names.field, ids, n, &g) == 0)
			s = zr_batch_records(g, &m);
		for (size_t i = 0; i < n && rc == 0; i++) {
			int64_t len;
			if (s) { /* as zr_name_load has it, from the batch */
				len = s[i].len > PATH_MAX ? -ENAMETOOLONG : (int64_t)s[i].len;
				if (!s[i].data)
					len = 0; /* missing: no name */
				else if (len > 0)
					memcpy(buf, s[i].data, (size_t)len);
			} else { /* a damaged batch: one at a time */
				len = zr_name_load(v->ds, &fs->names, first + i, buf, PATH_MAX + 1);
			}
			if (len > 0 && !makes_files(fs, buf, (size_t)len))
				len = 0, unnamed++;
			else if (len < 0 && len != -ENOENT) /* damaged: not shown */
				len = 0, unnamed++;
			if (len > 0)
				rc = name_add(fs, first + i, buf, (size_t)len, NULL);
		}
		zr_batch_release(g);
	}
	free(buf);
	if (rc == 0 && unnamed)
		fuse_log(FUSE_LOG_WARNING,
			 "zrfs: %s: %llu records' names make no file (not a relative path below "
			 "the tree, or a key with a dot in its last part): not in %s/\n",
			 fs->dataset, (unsigned long long)unnamed, ZRFS_TREE_NAME);
	return rc;
}

static void tent_free(struct zrfs_link *l)
{
	struct tent *e = zrfs_container(l, struct tent, link);

	free(e->more);
	free(e);
}

static void tdir_free(struct zrfs_link *l)
{
	struct tdir *d = zrfs_container(l, struct tdir, link);

	free(d->ents);
	free(d);
}

void zrfs_tree_destroy(struct zrfs *fs)
{
	struct zrfs_tree_index *t = fs->tree;

	if (!t)
		return;
	zrfs_table_drain(&t->names, tent_free);
	zrfs_table_drain(&t->dirs, tdir_free);
	free(t->of_id);
	free(t);
	fs->tree = NULL;
}

int zrfs_tree_update(struct zrfs *fs, struct zrfs_view *v, unsigned field, uint64_t id,
		     struct zrfs_notes *notes)
{
	struct zrfs_tree_index *t = fs->tree;
	char *buf;
	int64_t len;
	int rc;

	if (!t)
		return 0;
	if ((int)field != fs->names.field) {
		/* a value came, went or changed: its file's number, or the
		 * file itself, in the directory of its record's name */
		struct tent *e = id < t->cap ? t->of_id[id] : NULL;
		return e && e->id == id && t->makes[field] ? note_files(fs, e, notes) : 0;
	}
	if (!(buf = malloc(PATH_MAX + 1)))
		return -ENOMEM;
	len = name_of(fs, v, id, buf, PATH_MAX + 1);
	rc = name_drop(fs, id, notes);
	if (rc == 0 && len > 0)
		rc = name_add(fs, id, buf, (size_t)len, notes);
	free(buf);
	return rc;
}

const char *zrfs_tree_leaf(const struct zrfs *fs, uint64_t id, size_t *len)
{
	const struct zrfs_tree_index *t = fs->tree;
	const struct tent *e = t && id < t->cap ? t->of_id[id] : NULL;

	if (!e)
		return NULL;
	*len = e->len;
	return e->name;
}

bool zrfs_tree_text(const struct zrfs *fs, unsigned field)
{
	return fs->tree && fs->tree->text[field];
}
