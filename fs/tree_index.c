/*
 * tree_index.c - tree/'s index (tree_i.h): built once at mount from the
 * field of names and the dataset's directories and links, kept up to date
 * with each commit's records and those (follow.c), and the names it gives
 * records' files by id (zrfs_tree_leaf); a writable mount's directories
 * and links, gathered for its commits (zrfs_tree_save). The subtree that
 * shows it is tree.c.
 *
 * Sections: the index, directories and links kept by the dataset, building
 * and following.
 */
#include "tree_i.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

struct tlink *tree_link_find(const struct zrfs_tree_index *t, uint64_t no)
{
	for (struct zrfs_link *l = zrfs_table_first(&t->links, zrfs_hash_u64(no)); l;
	     l = zrfs_table_next(l)) {
		struct tlink *k = zrfs_container(l, struct tlink, link);
		if (k->no == no)
			return k;
	}
	return NULL;
}

/* How many hard links name a path (hard_counts): counted as they come
 * and go, by the path they name (whatever shows there). */
struct hcount {
	struct zrfs_link link;
	uint32_t n;
	struct timespec changed; /* when n last changed: a change time of what is there */
	char path[];
};

static struct hcount *hcount_find(const struct zrfs_tree_index *t, const char *path, uint64_t h)
{
	for (struct zrfs_link *m = zrfs_table_first(&t->hard_counts, h); m;
	     m = zrfs_table_next(m)) {
		struct hcount *c = zrfs_container(m, struct hcount, link);
		if (strcmp(c->path, path) == 0)
			return c;
	}
	return NULL;
}

/* A path no hard link names any more is kept for the change time it
 * shows until a commit stores it (TREE_SAVE_MS): past HCOUNT_IDLE such
 * paths, those older than IDLE_MS go. */
#define HCOUNT_IDLE 4096
#define IDLE_MS 30000

static int sweep_idle(struct zrfs_link *l, void *ctx)
{
	struct hcount *c = zrfs_container(l, struct hcount, link);
	struct zrfs_tree_index *t = ctx;
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	if (c->n == 0 && zr_time_ns(now) - zr_time_ns(c->changed) > IDLE_MS * INT64_C(1000000)) {
		zrfs_table_del(&t->hard_counts, &c->link);
		free(c);
		t->hard_idle--;
	}
	return 0;
}

/* One more (@up) or one fewer hard link naming @path: 0 or -ENOMEM. */
static int hcount_add(struct zrfs_tree_index *t, const char *path, bool up)
{
	uint64_t h = zrfs_hash(path, strlen(path), 0);
	struct hcount *c = hcount_find(t, path, h);

	if (t->hard_idle > t->hard_sweep) { /* (each idle path swept once in a while) */
		zrfs_table_each(&t->hard_counts, sweep_idle, t);
		t->hard_sweep = t->hard_idle * 2 > HCOUNT_IDLE ? t->hard_idle * 2 : HCOUNT_IDLE;
		c = hcount_find(t, path, h);
	}
	bool fresh = !c;

	if (!c && up) {
		size_t len = strlen(path);
		if (!(c = malloc(sizeof *c + len + 1)))
			return -ENOMEM;
		c->n = 0;
		memcpy(c->path, path, len + 1);
		if (zrfs_table_add(&t->hard_counts, &c->link, h) < 0) {
			free(c);
			return -ENOMEM;
		}
	}
	if (c) { /* kept at 0: its time is the file's change time until stored */
		bool was = !fresh && c->n == 0;
		c->n = up ? c->n + 1 : c->n - 1;
		t->hard_idle = t->hard_idle + (c->n == 0) - was;
		clock_gettime(CLOCK_REALTIME, &c->changed);
	}
	return 0;
}

static void hcount_free(struct zrfs_link *l)
{
	free(zrfs_container(l, struct hcount, link));
}

uint32_t tree_hard_count(const struct zrfs_tree_index *t, const struct tent *e,
			 struct timespec *changed)
{
	char path[PATH_MAX];
	const struct hcount *c;

	if (!t || !t->hard_counts.n || !e || tree_name_path(e->dir, e->name, path) < 0)
		return 0;
	c = hcount_find(t, path, zrfs_hash(path, strlen(path), 0));
	if (c && changed)
		*changed = c->changed;
	return c ? c->n : 0;
}

/* Take entry @e's link away; @keep: kept among the links removed lately
 * (its number is no other's: tree_link_set reuses it for a link changed). */
static void link_drop(struct zrfs_tree_index *t, struct tent *e, bool keep)
{
	struct tlink *k = e->lnk;

	if (!k)
		return;
	if (S_ISREG(k->mode)) {
		t->nhard--;
		hcount_add(t, k->target, false);
		keep = false; /* a hard link's number is never handed out */
	}
	zrfs_table_del(&t->links, &k->link);
	e->lnk = NULL;
	if (!keep) {
		free(k);
		return;
	}
	k->ent = NULL;
	clock_gettime(CLOCK_REALTIME, &k->meta.ctime); /* unlinked: a change */
	k->meta.changed = true;
	free(t->gone[t->gone_next]);
	t->gone[t->gone_next] = k;
	t->gone_next = (t->gone_next + 1) % TREE_GONE_LINKS;
}

void tree_link_drop(struct zrfs_tree_index *t, struct tent *e)
{
	link_drop(t, e, true);
}

struct tlink *tree_link_gone(const struct zrfs_tree_index *t, uint64_t no)
{
	for (size_t i = 0; i < TREE_GONE_LINKS; i++)
		if (t->gone[i] && t->gone[i]->no == no)
			return t->gone[i];
	return NULL;
}

int tree_link_set(struct zrfs_tree_index *t, struct tent *e, const char *target, size_t len,
		  uint32_t mode, uint64_t rdev, struct timespec mtime, struct timespec atime)
{
	struct tlink *k = NULL;

	if (target) {
		if (!(k = malloc(sizeof *k + len + 1)))
			return -ENOMEM;
		*k = (struct tlink){.no = e->lnk ? e->lnk->no : t->next_no++, .ent = e,
				    .mode = mode & (S_IFMT | 07777), .rdev = rdev, .mtime = mtime,
				    .atime = atime};
		memcpy(k->target, target, len);
		k->target[len] = 0;
	}
	link_drop(t, e, !k);
	if (!k)
		return tree_prune(t, e, NULL);
	if (zrfs_table_add(&t->links, &k->link, zrfs_hash_u64(k->no)) < 0) {
		free(k);
		tree_prune(t, e, NULL);
		return -ENOMEM;
	}
	if (S_ISREG(k->mode) && hcount_add(t, k->target, true) < 0) {
		zrfs_table_del(&t->links, &k->link);
		free(k);
		tree_prune(t, e, NULL);
		return -ENOMEM;
	}
	e->lnk = k;
	t->nhard += S_ISREG(k->mode);
	return 0;
}

/* Whether directory @d goes when nothing is in it. */
static bool dir_passing(const struct zrfs_tree_index *t, const struct tdir *d)
{
	return !d->made && !d->stored && !t->keep_emptied && d->self;
}

int tree_prune(struct zrfs_tree_index *t, struct tent *e, struct zrfs_notes *notes)
{
	int rc = 0;

	while (e && e->id == NO_ID && !e->sub && !e->lnk) {
		struct tdir *d = e->dir;
		d->ents[e->slot] = NULL;
		d->live--;
		zrfs_table_del(&t->names, &e->link);
		free(e->more);
		free(e);
		if (d->live || !dir_passing(t, d))
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

/* ---- directories and links kept by the dataset ---- */

struct tent *tree_ent_at(const struct zrfs_tree_index *t, const char *path, size_t len)
{
	struct tdir *d = t->root;
	struct tent *e = NULL;

	for (size_t at = 0; d && at <= len;) {
		const char *slash = memchr(path + at, '/', len - at);
		size_t c = slash ? (size_t)(slash - (path + at)) : len - at;
		if (!(e = tree_ent_find(t, d, path + at, c)))
			return NULL;
		if (!slash)
			return e;
		d = e->sub;
		at += c + 1;
	}
	return NULL;
}

/* The directory @path (@len bytes) is, made as needed (noted in @notes). */
static struct tdir *dir_make(struct zrfs_tree_index *t, const char *path, size_t len,
			     struct zrfs_notes *notes, int *rc)
{
	char *buf = malloc(len + 2);
	const char *last;
	struct tdir *d;

	if (!buf) {
		*rc = -ENOMEM;
		return NULL;
	}
	memcpy(buf, path, len);
	buf[len] = '/';
	d = walk(t, buf, len + 1, &last, notes, rc);
	free(buf);
	return d;
}

/* Note in @notes that the entry @e of a directory or link changed. */
static int note_ent(const struct tent *e, struct zrfs_notes *notes)
{
	int rc;

	if (!notes)
		return 0;
	rc = zrfs_notes_entry(notes, ZRFS_INO_TREE_DIR | e->dir->no, e->name);
	if (rc == 0 && e->sub)
		rc = zrfs_notes_inode(notes, ZRFS_INO_TREE_DIR | e->sub->no);
	return rc == 0 ? zrfs_notes_inode(notes, ZRFS_INO_TREE_DIR | e->dir->no) : rc;
}

/* The owner and change time entry @x (NULL: none) keeps, into @m: a change
 * time kept that is older than the one @m has (this mount changed it since
 * the entry was saved) leaves it. */
static void meta_keep(struct tmeta *m, const zr_tree_entry *x)
{
	m->owned = x && x->owned;
	m->uid = x ? x->uid : 0;
	m->gid = x ? x->gid : 0;
	if (x && x->ctime && (!m->changed || x->ctime > zr_time_ns(m->ctime))) {
		m->ctime = zr_ns_time(x->ctime);
		m->changed = true;
	}
}

/* Directory @d is one of the dataset's with @x's mode and times, or (@x
 * NULL) not any more. */
static void dir_keep(struct tdir *d, const zr_tree_entry *x)
{
	d->stored = x != NULL;
	d->timed = x != NULL;
	d->mode = x ? S_IFDIR | (x->mode & 07777) : 0;
	d->size = x ? x->size : 0;
	meta_keep(&d->meta, x);
	if (x) {
		d->mtime = zr_ns_time(x->mtime);
		d->atime = zr_ns_time(x->atime == ZR_MTIME_NONE ? x->mtime : x->atime);
	}
}

/* Show @x (@n, sorted) as the dataset's directories and links in place of
 * t->shown, noting in @notes what changed; the index takes @x. What a
 * directory or link no longer kept leaves goes after the new ones are in,
 * so that one kept by both keeps its number. */
static int entries_apply(struct zrfs *fs, zr_tree_entry *x, size_t n, struct zrfs_notes *notes)
{
	struct zrfs_tree_index *t = fs->tree;
	zr_tree_entry *old = t->shown;
	size_t nold = t->nshown;
	int rc = 0;

	for (size_t i = 0; i < nold; i++) {
		struct tent *e = strcmp(old[i].path, ".") == 0 ? NULL
				 : tree_ent_at(t, old[i].path, strlen(old[i].path));
		if (strcmp(old[i].path, ".") == 0) {
			dir_keep(t->root, NULL);
		} else if (e && S_ISDIR(old[i].mode) && e->sub) {
			dir_keep(e->sub, NULL);
			rc = rc ? rc : note_ent(e, notes);
		} else if (e && e->lnk) {
			rc = rc ? rc : note_ent(e, notes);
			tree_link_drop(t, e); /* the entry is pruned below */
		}
	}
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(x[i].path);
		struct timespec m = zr_ns_time(x[i].mtime);
		struct timespec a = zr_ns_time(x[i].atime == ZR_MTIME_NONE ? x[i].mtime : x[i].atime);
		const char *last;
		struct tdir *d;
		struct tent *e;
		int got = 0;
		if (strcmp(x[i].path, ".") == 0) {
			dir_keep(t->root, &x[i]);
		} else if (S_ISDIR(x[i].mode)) {
			if ((d = dir_make(t, x[i].path, len, notes, &got)) != NULL) {
				dir_keep(d, &x[i]);
				got = note_ent(d->self, notes);
			}
		} else if ((d = walk(t, x[i].path, len, &last, notes, &got)) != NULL) {
			size_t llen = len - (size_t)(last - x[i].path);
			if (!(e = tree_ent_find(t, d, last, llen)) &&
			    !(e = tree_ent_new(t, d, last, llen)))
				got = -ENOMEM;
			else if ((got = tree_link_set(t, e, x[i].target ? x[i].target : "",
						      x[i].target ? strlen(x[i].target) : 0,
						      x[i].mode, x[i].rdev, m, a)) == 0) {
				meta_keep(&e->lnk->meta, &x[i]);
				got = note_ent(e, notes);
			}
		}
		rc = rc ? rc : got;
	}
	/* what the old ones left, the deepest first */
	for (size_t i = nold; i-- > 0;) {
		struct tent *e = strcmp(old[i].path, ".") == 0 ? NULL
				 : tree_ent_at(t, old[i].path, strlen(old[i].path));
		struct tdir *d = e ? e->sub : NULL;
		if (d && !d->live && dir_passing(t, d)) {
			e->sub = NULL;
			e->dir->subs--;
			tree_dir_free(t, d);
		}
		if (e) {
			int gone = tree_prune(t, e, notes);
			rc = rc ? rc : gone;
		}
	}
	free(old);
	t->shown = x;
	t->nshown = n;
	return rc;
}

int zrfs_tree_entries(struct zrfs *fs, struct zrfs_view *v, struct zrfs_notes *notes)
{
	struct zrfs_tree_index *t = fs->tree;
	zr_tree_entry *x;
	size_t n;
	bool same;

	if (!t || zr_tree_get(v->ds, &x, &n) < 0)
		return t ? -ENOMEM : 0;
	same = n == t->nshown;
	for (size_t i = 0; same && i < n; i++) {
		const zr_tree_entry *a = &x[i], *b = &t->shown[i];
		same = a->mode == b->mode && a->mtime == b->mtime && a->atime == b->atime &&
		       a->size == b->size && a->owned == b->owned && a->uid == b->uid &&
		       a->gid == b->gid && a->ctime == b->ctime && a->rdev == b->rdev &&
		       strcmp(a->path, b->path) == 0 && !a->target == !b->target &&
		       (!a->target || strcmp(a->target, b->target) == 0);
	}
	if (same) {
		free(x);
		return 0;
	}
	return entries_apply(fs, x, n, notes);
}

/* The directories and links a writable mount's index holds, being
 * gathered for zr_tree_set. */
struct gather {
	zr_tree_entry *v;
	size_t n, cap, skipped;
	int64_t now;
};

int tree_dir_path(const struct tdir *d, char *buf, size_t cap)
{
	size_t at = cap - 1;

	buf[at] = 0;
	for (; d->self; d = d->self->dir) {
		size_t len = d->self->len + (at < cap - 1); /* and a '/' after it */
		if (len > at)
			return -1;
		at -= len;
		memcpy(buf + at, d->self->name, d->self->len);
		if (len > d->self->len)
			buf[at + d->self->len] = '/';
	}
	memmove(buf, buf + at, cap - at);
	return (int)(cap - 1 - at);
}

int tree_name_path(const struct tdir *d, const char *name, char *buf)
{
	int len = tree_dir_path(d, buf, PATH_MAX);

	if (len < 0 || (size_t)len + strlen(name) + 2 > PATH_MAX)
		return -1;
	return len + snprintf(buf + len, PATH_MAX - (size_t)len, "%s%s", len && name[0] ? "/" : "",
			      name);
}

bool tree_text(const char *s)
{
	json_t *j = json_string(s);

	json_decref(j);
	return j != NULL;
}

static int gather_add(struct gather *g, const struct tdir *in, const char *name,
		      const zr_tree_entry *x)
{
	char path[PATH_MAX];

	if (tree_name_path(in, name, path) < 0)
		return 0; /* too long a path to keep: as the names' rule */
	if (!tree_text(path)) { /* the dataset keeps text: a directory made by
				 * files' names, not kept as itself */
		g->skipped++;
		return 0;
	}
	if (g->n == g->cap) {
		size_t cap = g->cap ? 2 * g->cap : 64;
		zr_tree_entry *v = realloc(g->v, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		g->v = v;
		g->cap = cap;
	}
	g->v[g->n] = *x;
	if (!(g->v[g->n].path = strdup(path[0] ? path : ".")) ||
	    (x->target && !(g->v[g->n].target = strdup(x->target)))) {
		free((char *)g->v[g->n].path);
		return -ENOMEM;
	}
	g->n++;
	return 0;
}

/* The change time @m keeps for the tree file, 0: none. */
static int64_t meta_ctime(const struct tmeta *m)
{
	return m->changed ? zr_time_ns(m->ctime) : 0;
}

/* A directory is kept where something of it is the mount's or the
 * dataset's own: not one its files' names make (0755, no time set). */
static int gather_dir(struct zrfs_link *l, void *ctx)
{
	struct gather *g = ctx;
	const struct tdir *d = zrfs_container(l, struct tdir, link);
	zr_tree_entry x = {.mode = d->mode ? d->mode : S_IFDIR | 0755, .mtime = g->now,
			   .atime = ZR_MTIME_NONE, .size = d->size, .owned = d->meta.owned,
			   .uid = d->meta.uid, .gid = d->meta.gid, .ctime = meta_ctime(&d->meta)};

	if (!d->stored && !d->made && !d->timed && !d->mode && !d->meta.owned &&
	    (d->live || !d->self))
		return 0;
	if (d->timed) {
		x.mtime = zr_time_ns(d->mtime);
		x.atime = zr_time_ns(d->atime);
	}
	return d->self ? gather_add(g, d->self->dir, d->self->name, &x) : gather_add(g, d, "", &x);
}

static int gather_link(struct zrfs_link *l, void *ctx)
{
	const struct tlink *k = zrfs_container(l, struct tlink, link);
	zr_tree_entry x = {.mode = k->mode,
			   .target = S_ISLNK(k->mode) || S_ISREG(k->mode) ? k->target : NULL,
			   .mtime = zr_time_ns(k->mtime), .atime = zr_time_ns(k->atime),
			   .owned = k->meta.owned, .uid = k->meta.uid,
			   .gid = k->meta.gid, .ctime = meta_ctime(&k->meta), .rdev = k->rdev};

	return gather_add(ctx, k->ent->dir, k->ent->name, &x);
}

int zrfs_tree_save(struct zrfs *fs, zr_dataset *ds)
{
	struct timespec now;
	struct gather g = {0};
	int rc;

	if (!fs->tree)
		return 0;
	clock_gettime(CLOCK_REALTIME, &now);
	g.now = zr_time_ns(now);
	zrfs_names_begin(fs);
	rc = zrfs_table_each(&fs->tree->dirs, gather_dir, &g);
	if (rc == 0)
		rc = zrfs_table_each(&fs->tree->links, gather_link, &g);
	zrfs_names_end(fs);
	if (rc == 0)
		rc = zr_tree_set(ds, g.v, g.n);
	if (g.skipped && zrfs_log_admit())
		fuse_log(FUSE_LOG_INFO, "zrfs: %s: %zu directories or links of tree/ whose "
			 "paths are not UTF-8 are not kept as themselves (files are)\n",
			 fs->dataset, g.skipped);
	for (size_t i = 0; i < g.n; i++) {
		free((char *)g.v[i].path);
		free((char *)g.v[i].target);
	}
	free(g.v);
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
	if (rc == 0)
		rc = zrfs_tree_entries(fs, v, NULL);
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

static void tlink_free(struct zrfs_link *l)
{
	free(zrfs_container(l, struct tlink, link));
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
	zrfs_table_drain(&t->links, tlink_free);
	zrfs_table_drain(&t->hard_counts, hcount_free);
	for (size_t i = 0; i < TREE_GONE_LINKS; i++)
		free(t->gone[i]);
	free(t->shown);
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

void zrfs_tree_links_attr(struct zrfs *fs, unsigned field, uint64_t id, struct stat *st)
{
	struct zrfs_tree_index *t = fs->tree;
	struct timespec changed = {0};
	const struct tent *e;

	/* (a directory of the name shows over the file: no name of tree/) */
	if (!t || !t->hard_counts.n || (int)field != fs->names.files || fs->names.key ||
	    id >= t->cap || !(e = t->of_id[id]) || e->id != id || e->sub)
		return;
	st->st_nlink += tree_hard_count(t, e, &changed);
	if (zr_time_ns(changed) > zr_time_ns(st->st_ctim))
		st->st_ctim = changed; /* a hard link made or removed, stored with a commit */
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
