/*
 * tree.c - /tree/: the dataset as the tree of files its records' original
 * names make (zr_names, the rule zr export dir shares): a record named
 * train/cat/1.jpg is tree/train/cat/1.jpg; one keyed train/s0 (a WebDataset
 * sample) is tree/train/s0.jpg, tree/train/s0.cls, one file per value. A
 * file is the record file itself (the same inode as FIELD/ID.ext, owned by
 * fields.c), but an i64 class among keys, which shows its decimal text
 * (an inode of its own here, ZRFS_INO_TEXT).
 *
 * The index: every named record's entry in its directory, found by
 * (directory, name) in one hash table and listed in order of arrival from
 * the directory's array of entries; each record's entry by id. It is built
 * once at mount from the field of names (a pass over it, no other field
 * read) and kept up to date by follow.c with the records each commit
 * changed (zrfs_tree_update, under the names lock written), so a lookup is
 * O(1) and a listing O(its directory), whatever the dataset's size.
 * Directories are derived from the names: one lives while something is in
 * it, or, made by mkdir through a writable mount, as long as the mount.
 * A directory's number (ZRFS_INO_TREE_DIR | n) is given when it first
 * appears and never given again while the mount lives.
 *
 * Where names clash, a directory wins over a file of the same name, and
 * of two records of one name the lower id shows; names that make no file
 * (not relative paths below the tree, zr_name_safe) are counted at mount,
 * once in the log. tree/ is shown when the dataset keeps names and no field
 * is called "tree"; it is a view (not listed in the root without
 * -o list_views), so that du, find and rsync -a of the mount see each
 * record once.
 *
 * Sections: the index, building and following, nodes, lookup and
 * attributes, listings, contents, for the write layer.
 */
#include "zrfs_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NO_ID UINT64_MAX
/* Listing positions: entry slot s of a directory at 2 + s * SPAN + k, k 0
 * its directory, 1 + f its file of field f. */
#define SPAN (ZR_FIELDS_MAX + 1)

struct tdir;

/* A name in a directory of tree/: a directory, a record's name, or both
 * (a key "a" and a key "a/b": files a.jpg and a/b.jpg). */
struct tent {
	struct zrfs_link link;   /* in t->names, by (directory number, name) */
	struct tdir *dir;        /* the directory it is in */
	struct tdir *sub;        /* the directory of this name; NULL: none */
	uint64_t id;             /* the record of this name shown; NO_ID: none */
	uint64_t *more;          /* other records of this name, not shown */
	uint32_t nmore;
	uint32_t slot;           /* its place in dir->ents */
	uint16_t len;
	char name[];
};

struct tdir {
	struct zrfs_link link;   /* in t->dirs, by number */
	uint64_t no;             /* its inode is ZRFS_INO_TREE_DIR | no; tree/ is 0 */
	struct tent *self;       /* its entry in its parent; NULL for tree/ */
	struct tent **ents;      /* in order of arrival; NULL where one left */
	uint32_t n, cap, live;
	uint32_t subs;           /* entries that are directories (its link count) */
	bool made;               /* by mkdir: lives as long as the mount */
	bool timed;              /* a time was set on it (utimensat): mtime */
	struct timespec mtime;
};

struct zrfs_tree {
	struct zrfs_table names, dirs;
	struct tdir *root;
	struct tent **of_id;     /* each record's entry (NULL: no name in the tree) */
	uint64_t cap;            /* records of_id has room for */
	uint64_t next_no;
	bool makes[ZR_FIELDS_MAX]; /* fields whose values are files of the tree */
	bool text[ZR_FIELDS_MAX];  /* ... holding decimal text (zr_names_text) */
};

/* ---- the index ---- */

static uint64_t name_hash(uint64_t dir, const char *name, size_t len)
{
	return zrfs_hash(name, len, dir);
}

static struct tent *ent_find(const struct zrfs_tree *t, const struct tdir *d, const char *name,
			     size_t len)
{
	uint64_t h = name_hash(d->no, name, len);

	for (struct zrfs_link *l = zrfs_table_first(&t->names, h); l; l = zrfs_table_next(l)) {
		struct tent *e = zrfs_container(l, struct tent, link);
		if (e->dir == d && e->len == len && memcmp(e->name, name, len) == 0)
			return e;
	}
	return NULL;
}

static struct tdir *dir_find(const struct zrfs_tree *t, uint64_t no)
{
	for (struct zrfs_link *l = zrfs_table_first(&t->dirs, zrfs_hash_u64(no)); l;
	     l = zrfs_table_next(l)) {
		struct tdir *d = zrfs_container(l, struct tdir, link);
		if (d->no == no)
			return d;
	}
	return NULL;
}

static struct tdir *dir_new(struct zrfs_tree *t, struct tent *self)
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

static void dir_free(struct zrfs_tree *t, struct tdir *d)
{
	zrfs_table_del(&t->dirs, &d->link);
	free(d->ents);
	free(d);
}

/* A new entry @name in @d (neither a directory nor a record yet). */
static struct tent *ent_new(struct zrfs_tree *t, struct tdir *d, const char *name, size_t len)
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
	if (zrfs_table_add(&t->names, &e->link, name_hash(d->no, name, len)) < 0) {
		free(e);
		return NULL;
	}
	d->ents[d->n++] = e;
	d->live++;
	return e;
}

/* Remove entries and directories that hold nothing any more, from @e up;
 * the directories that go are noted in @notes (when not NULL): 0, or
 * -ENOMEM (the notes lost; the index is right). */
static int prune(struct zrfs_tree *t, struct tent *e, struct zrfs_notes *notes)
{
	int rc = 0;

	while (e && e->id == NO_ID && !e->sub) {
		struct tdir *d = e->dir;
		d->ents[e->slot] = NULL;
		d->live--;
		zrfs_table_del(&t->names, &e->link);
		free(e->more);
		free(e);
		if (d->live || d->made || !d->self)
			break;
		e = d->self;
		e->sub = NULL;
		e->dir->subs--;
		dir_free(t, d);
		if (notes && rc == 0 &&
		    (rc = zrfs_notes_entry(notes, ZRFS_INO_TREE_DIR | e->dir->no, e->name)) == 0)
			rc = zrfs_notes_inode(notes, ZRFS_INO_TREE_DIR | e->dir->no);
	}
	return rc;
}

/* Room for the entries of records below @n. */
static int of_id_reserve(struct zrfs_tree *t, uint64_t n)
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
static struct tdir *walk(struct zrfs_tree *t, const char *path, size_t len, const char **last,
			 struct zrfs_notes *notes, int *rc)
{
	struct tdir *d = t->root;
	const char *at = path, *slash;

	*rc = 0;
	while ((slash = memchr(at, '/', len - (size_t)(at - path))) != NULL) {
		size_t c = (size_t)(slash - at);
		struct tent *e = ent_find(t, d, at, c);
		if (!e && !(e = ent_new(t, d, at, c)))
			goto enomem;
		if (!e->sub) {
			if (!(e->sub = dir_new(t, e))) {
				prune(t, e, NULL);
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
	const struct zrfs_tree *t = fs->tree;
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

/* Record @id's file by id may take another name with its name
 * (zrfs_record_name_format): the kernel must look it up again. */
static int note_by_id(struct zrfs *fs, uint64_t id, struct zrfs_notes *notes)
{
	char name[ZRFS_NAME_MAX + 1];

	if (!notes || fs->names.files < 0)
		return 0;
	zrfs_record_name_format(fs, (unsigned)fs->names.files, id, name, sizeof name);
	return zrfs_notes_entry(notes, ZRFS_INO_DIR + (unsigned)fs->names.files, name);
}

/* Record @id is named @name (@len bytes, checked safe) from now on. */
static int name_add(struct zrfs *fs, uint64_t id, const char *name, size_t len,
		    struct zrfs_notes *notes)
{
	struct zrfs_tree *t = fs->tree;
	const char *last;
	struct tent *e;
	struct tdir *d;
	int rc;

	if ((rc = of_id_reserve(t, id + 1)) < 0 || !(d = walk(t, name, len, &last, notes, &rc)))
		return rc;
	size_t llen = len - (size_t)(last - name);
	if (!(e = ent_find(t, d, last, llen)) && !(e = ent_new(t, d, last, llen)))
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
	rc = note_files(fs, e, notes);
	return rc < 0 ? rc : note_by_id(fs, id, notes);
}

/* Record @id has no name in the tree any more. */
static int name_drop(struct zrfs *fs, uint64_t id, struct zrfs_notes *notes)
{
	struct zrfs_tree *t = fs->tree;
	struct tent *e = id < t->cap ? t->of_id[id] : NULL;
	int rc = 0;

	if (!e || (rc = note_by_id(fs, id, notes)) < 0)
		return rc;
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
		int gone = prune(t, e, notes);
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

/* Whether /tree is shown: the dataset keeps names and no field is "tree". */
static bool shown(const struct zrfs *fs)
{
	return fs->tree != NULL;
}

int zrfs_tree_create(struct zrfs *fs, struct zrfs_view *v)
{
	enum { STEP = 4096 };
	uint64_t ids[STEP], unnamed = 0;
	struct zrfs_tree *t;
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
	for (unsigned f = 0; f < fs->nfields; f++) {
		t->makes[f] = (int)f != fs->names.field && (int)f != fs->names.mtime &&
			      (fs->names.key || (int)f == fs->names.files);
		t->text[f] = t->makes[f] && zr_names_text(v->ds, &fs->names, f);
	}
	if (!(t->root = dir_new(t, NULL)) || of_id_reserve(t, v->n ? v->n : 1) < 0)
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

void zrfs_tree_destroy(struct zrfs *fs)
{
	struct zrfs_tree *t = fs->tree;

	if (!t)
		return;
	for (size_t b = 0; b < t->names.cap; b++)
		for (struct zrfs_link *l = t->names.buckets[b], *next; l; l = next) {
			struct tent *e = zrfs_container(l, struct tent, link);
			next = l->next;
			free(e->more);
			free(e);
		}
	for (size_t b = 0; b < t->dirs.cap; b++)
		for (struct zrfs_link *l = t->dirs.buckets[b], *next; l; l = next) {
			struct tdir *d = zrfs_container(l, struct tdir, link);
			next = l->next;
			free(d->ents);
			free(d);
		}
	zrfs_table_free(&t->names);
	zrfs_table_free(&t->dirs);
	free(t->of_id);
	free(t);
	fs->tree = NULL;
}

int zrfs_tree_update(struct zrfs *fs, struct zrfs_view *v, unsigned field, uint64_t id,
		     struct zrfs_notes *notes)
{
	struct zrfs_tree *t = fs->tree;
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
	const struct zrfs_tree *t = fs->tree;
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

/* ---- nodes ---- */

enum node { N_NONE, N_DIR, N_TEXT };

static enum node decode(const struct zrfs *fs, fuse_ino_t ino, uint64_t *no, unsigned *field,
			uint64_t *id, unsigned *version)
{
	if (!shown(fs))
		return N_NONE;
	if ((ino & ~ZRFS_GEN_MASK) == ZRFS_INO_TREE_DIR) {
		*no = ino & ZRFS_GEN_MASK;
		return N_DIR;
	}
	if (ino >> 56 == ZRFS_INO_TEXT >> 56 &&
	    zrfs_rec_decode(fs, (ino & ~ZRFS_INO_TEXT) | ZRFS_INO_REC, field, id, version) &&
	    fs->tree->text[*field])
		return N_TEXT;
	return N_NONE;
}

static fuse_ino_t dir_ino(const struct tdir *d)
{
	return ZRFS_INO_TREE_DIR | d->no;
}

/* The number of field @f's file of record @id. */
static fuse_ino_t file_ino(const struct zrfs *fs, unsigned f, uint64_t id)
{
	fuse_ino_t rec = zrfs_rec_ino(f, id, zrfs_rec_version(fs, f, id));

	return fs->tree->text[f] ? (rec & ~ZRFS_INO_REC) | ZRFS_INO_TEXT : rec;
}

static bool tree_owns(const struct zrfs *fs, fuse_ino_t ino)
{
	uint64_t no, id;
	unsigned field, version;

	return decode(fs, ino, &no, &field, &id, &version) != N_NONE;
}

static struct zrfs_view *tree_view_of(struct zrfs *fs, struct zrfs_view *cur, fuse_ino_t ino)
{
	uint64_t no, id;
	unsigned field, version;

	/* a class's text: the view of its version, as a record file's */
	if (decode(fs, ino, &no, &field, &id, &version) == N_TEXT &&
	    version != zrfs_rec_version(fs, field, id))
		return zrfs_pinned_view(fs, ino);
	return zrfs_view_ref(cur);
}

/* ---- lookup and attributes ---- */

/* Whether record @id has a file of field @f in @v. */
static bool has_file(const struct zrfs *fs, struct zrfs_view *v, unsigned f, uint64_t id)
{
	return fs->tree->makes[f] && id < v->n && zrfs_record_listed(v, f, id);
}

static int tree_lookup(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t parent, const char *name,
		       fuse_ino_t *out)
{
	struct zrfs_tree *t = fs->tree;
	size_t len = strlen(name), key = len;
	unsigned field = 0, version;
	uint64_t no, id;
	struct tdir *d;
	struct tent *e;

	if (parent == ZRFS_INO_ROOT) {
		if (!shown(fs) || strcmp(name, ZRFS_TREE_NAME) != 0)
			return -ENOENT;
		*out = dir_ino(t->root);
		return 0;
	}
	if (decode(fs, parent, &no, &field, &id, &version) != N_DIR)
		return -ENOTDIR;
	if (!(d = dir_find(t, no)))
		return -ENOENT;
	if ((e = ent_find(t, d, name, len)) != NULL && e->sub) {
		*out = dir_ino(e->sub);
		return 0;
	}
	if (fs->names.key) {
		if (zr_names_field_of(v->ds, &fs->names, name, len, &field, &key) < 0 ||
		    !(e = ent_find(t, d, name, key)))
			return -ENOENT;
	} else if (e) {
		field = (unsigned)fs->names.files;
	}
	if (!e || e->id == NO_ID || !has_file(fs, v, field, e->id))
		return -ENOENT;
	*out = file_ino(fs, field, e->id);
	return 0;
}

/* The text of record @id's class in @v, into @buf: its length, or a
 * negative code. */
static int class_text(struct zrfs *fs, struct zrfs_view *v, unsigned field, uint64_t id,
		      char *buf, size_t cap)
{
	unsigned char stored[8];
	int64_t got = id < v->n ? zr_record_load(v->ds, field, id, stored, sizeof stored) : -ENOENT;

	if (got < 0) {
		if (got != -ENOENT)
			zrfs_log_record_error(fs, v->ds, field, id, (int)got);
		return (int)got;
	}
	got = zr_names_text_of(stored, (size_t)got, buf, cap);
	return got < 0 ? -EIO : (int)got;
}

int zrfs_tree_text_attr(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino, unsigned field,
			uint64_t id, struct stat *st)
{
	char text[24];
	int rc = class_text(fs, v, field, id, text, sizeof text);

	if (rc < 0)
		return rc;
	zrfs_file_attr(fs, v, ino, (uint64_t)rc, st);
	zrfs_record_times(fs, v, field, id, st);
	return 0;
}

void zrfs_tree_text_read(fuse_req_t req, struct zrfs *fs, struct zrfs_view *v, unsigned field,
			 uint64_t id, size_t size, off_t off)
{
	char text[24];
	int rc = class_text(fs, v, field, id, text, sizeof text);

	if (rc < 0)
		zrfs_reply_err(req, rc);
	else
		zrfs_reply_slice(req, text, (uint64_t)rc, size, off);
}

static int tree_attr(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino, struct stat *st)
{
	struct tdir *d;
	uint64_t no, id;
	unsigned field, version;

	switch (decode(fs, ino, &no, &field, &id, &version)) {
	case N_DIR:
		if (!(d = dir_find(fs->tree, no)))
			return -ENOENT;
		zrfs_dir_attr(fs, v, ino, st);
		st->st_nlink = 2 + d->subs; /* find and du count on it */
		if (d->timed)
			st->st_mtim = st->st_atim = d->mtime;
		return 0;
	case N_TEXT:
		return zrfs_tree_text_attr(fs, v, ino, field, id, st);
	case N_NONE:
		break;
	}
	return -ENOENT;
}

/* ---- listings ---- */

static int tree_entry(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t dir, uint64_t pos,
		      struct zrfs_dirent *out)
{
	struct zrfs_tree *t = fs->tree;
	uint64_t no, id;
	unsigned field, version;
	struct tdir *d;

	if (dir == ZRFS_INO_ROOT) {
		if (pos > 2 || !shown(fs))
			return 0;
		snprintf(out->name, sizeof out->name, "%s", ZRFS_TREE_NAME);
		out->ino = dir_ino(t->root);
		out->type = S_IFDIR;
		out->pos = 2;
		return 1;
	}
	if (decode(fs, dir, &no, &field, &id, &version) != N_DIR)
		return -ENOTDIR;
	if (!(d = dir_find(t, no)))
		return -ENOENT;
	for (uint64_t s = (pos - 2) / SPAN, k = (pos - 2) % SPAN; s < d->n; s++, k = 0) {
		struct tent *e = d->ents[s];
		if (!e)
			continue;
		if (k == 0 && e->sub) {
			snprintf(out->name, sizeof out->name, "%s", e->name);
			out->ino = dir_ino(e->sub);
			out->type = S_IFDIR;
			out->pos = 2 + s * SPAN;
			return 1;
		}
		if (e->id == NO_ID || (e->sub && !fs->names.key)) /* a directory wins */
			continue;
		for (unsigned f = k ? (unsigned)k - 1 : 0; f < fs->nfields; f++) {
			if (!has_file(fs, v, f, e->id))
				continue;
			if (!fs->names.key)
				snprintf(out->name, sizeof out->name, "%s", e->name);
			else if (snprintf(out->name, sizeof out->name, "%s.%s", e->name,
					  fs->fields[f].name) >= (int)sizeof out->name)
				continue; /* too long a file name */
			out->ino = file_ino(fs, f, e->id);
			out->type = S_IFREG;
			out->pos = 2 + s * SPAN + 1 + f;
			return 1;
		}
	}
	return 0;
}

/* ---- contents ---- */

static void tree_read(fuse_req_t req, struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino,
		      size_t size, off_t off)
{
	uint64_t no, id;
	unsigned field, version;

	switch (decode(fs, ino, &no, &field, &id, &version)) {
	case N_DIR:
		fuse_reply_err(req, EISDIR);
		return;
	case N_TEXT:
		zrfs_tree_text_read(req, fs, v, field, id, size, off);
		return;
	case N_NONE:
		break;
	}
	fuse_reply_err(req, ENOENT);
}

const struct zrfs_subtree zrfs_tree = {
	.name = "tree",
	.view = true,
	.owns = tree_owns,
	.view_of = tree_view_of,
	.lookup = tree_lookup,
	.attr = tree_attr,
	.entry = tree_entry,
	.read = tree_read,
};

/* ---- for the write layer ---- */

/* The directory @ino is, if it is one of tree/ now. */
static struct tdir *dir_of(const struct zrfs *fs, fuse_ino_t ino)
{
	uint64_t no, id;
	unsigned field, version;

	return decode(fs, ino, &no, &field, &id, &version) == N_DIR ? dir_find(fs->tree, no) : NULL;
}

bool zrfs_tree_dir(const struct zrfs *fs, fuse_ino_t ino)
{
	return dir_of(fs, ino) != NULL;
}

int zrfs_tree_find(const struct zrfs *fs, fuse_ino_t dir, const char *name, size_t len,
		   uint64_t *id)
{
	struct tdir *d = dir_of(fs, dir);
	struct tent *e = d ? ent_find(fs->tree, d, name, len) : NULL;

	if (!e || e->id == NO_ID)
		return -ENOENT;
	*id = e->id;
	return 0;
}

int zrfs_tree_path(const struct zrfs *fs, fuse_ino_t dir, char *buf, size_t cap)
{
	const struct tdir *d = dir_of(fs, dir);
	size_t at = cap;

	if (!d || cap == 0)
		return -ENOENT;
	buf[--at] = 0;
	for (; d->self; d = d->self->dir) {
		size_t len = d->self->len + (at < cap - 1); /* and a '/' after it */
		if (len > at)
			return -ENAMETOOLONG;
		at -= len;
		memcpy(buf + at, d->self->name, d->self->len);
		if (len > d->self->len)
			buf[at + d->self->len] = '/';
	}
	memmove(buf, buf + at, cap - at);
	return 0;
}

fuse_ino_t zrfs_tree_subdir(const struct zrfs *fs, fuse_ino_t dir, const char *name)
{
	struct tdir *d = dir_of(fs, dir);
	struct tent *e = d ? ent_find(fs->tree, d, name, strlen(name)) : NULL;

	return e && e->sub ? dir_ino(e->sub) : 0;
}

int zrfs_tree_hold(struct zrfs *fs, fuse_ino_t dir)
{
	struct tdir *d;
	int rc = -ENOENT;
	bool held;

	zrfs_names_begin(fs); /* most often it is held already */
	held = (d = dir_of(fs, dir)) != NULL && d->made;
	zrfs_names_end(fs);
	if (held)
		return 0;
	zrfs_state_lock(fs);
	if ((d = dir_of(fs, dir)) != NULL) {
		d->made = true;
		rc = 0;
	}
	zrfs_state_unlock(fs);
	return rc;
}

int zrfs_tree_mkdir(struct zrfs *fs, fuse_ino_t parent, const char *name, fuse_ino_t *out)
{
	struct zrfs_tree *t = fs->tree;
	size_t len = strlen(name);
	struct tdir *d;
	struct tent *e;
	int rc = 0;

	if (!zr_name_safe(name, len) || memchr(name, '/', len))
		return -EINVAL;
	zrfs_state_lock(fs);
	if (!(d = dir_of(fs, parent))) {
		rc = -ENOENT;
	} else if ((e = ent_find(t, d, name, len)) != NULL &&
		   (e->sub || (!fs->names.key && e->id != NO_ID))) {
		rc = -EEXIST; /* a directory, or a file (a key's files have extensions) */
	} else if (!e && !(e = ent_new(t, d, name, len))) {
		rc = -ENOMEM;
	} else if (!(e->sub = dir_new(t, e))) {
		prune(t, e, NULL);
		rc = -ENOMEM;
	} else {
		d->subs++;
		e->sub->made = true;
		*out = dir_ino(e->sub);
	}
	zrfs_state_unlock(fs);
	return rc;
}

int zrfs_tree_rmdir(struct zrfs *fs, fuse_ino_t parent, const char *name)
{
	struct zrfs_tree *t = fs->tree;
	size_t len = strlen(name);
	struct tdir *d, *sub;
	struct tent *e;
	int rc = 0;

	zrfs_state_lock(fs);
	if (!(d = dir_of(fs, parent)) || !(e = ent_find(t, d, name, len))) {
		rc = -ENOENT;
	} else if (!(sub = e->sub)) {
		rc = -ENOTDIR;
	} else if (sub->live) {
		rc = -ENOTEMPTY;
	} else {
		e->sub = NULL;
		d->subs--;
		dir_free(t, sub);
		prune(t, e, NULL); /* the kernel removes the name itself */
	}
	zrfs_state_unlock(fs);
	return rc;
}

int zrfs_tree_touch(struct zrfs *fs, fuse_ino_t dir, struct timespec mtime)
{
	struct tdir *d;
	int rc = -ENOENT;

	zrfs_state_lock(fs);
	if ((d = dir_of(fs, dir)) != NULL) {
		d->mtime = mtime;
		d->timed = true;
		rc = 0;
	}
	zrfs_state_unlock(fs);
	return rc;
}
