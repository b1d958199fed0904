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
 * Directories and symbolic links the dataset keeps (zr_tree_get: beside
 * the records, never records) are in it with their modes and times, an
 * empty directory too; other directories come from the names, and live
 * while something is in them. On a writable mount the index is the
 * dataset's one writer's: mkdir, rmdir, symlink, mknod of a FIFO, a socket
 * or a device (a "link" here too: a name and attributes), a link's rename and
 * removal, a directory's mode and times change it, and each commit keeps
 * what it holds then (zrfs_tree_save); a read-only mount applies another
 * writer's from each commit it follows (zrfs_tree_entries). A directory's
 * number (ZRFS_INO_TREE_DIR | n) or a link's (ZRFS_INO_TREE_LINK | n) is
 * given when it first appears and never given again while the mount
 * lives; a link keeps its number when renamed.
 *
 * Where names clash, a directory wins over a file of the same name, a
 * file over a link, and of two records of one name the lower id shows; names that make no file
 * (not relative paths below the tree, zr_name_safe) are counted at mount,
 * once in the log. tree/ is shown when the dataset keeps names and no field
 * is called "tree"; it is a view (not listed in the root without
 * -o list_views), so that du, find and rsync -a of the mount see each
 * record once.
 *
 * The index lives in tree_index.c (tree_i.h); this file is the subtree.
 *
 * Sections: nodes, lookup and attributes, listings, contents, for the
 * write layer.
 */
#include "tree_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- nodes ---- */

enum node { N_NONE, N_DIR, N_LINK, N_TEXT };

static enum node tree_decode(const struct zrfs *fs, fuse_ino_t ino, uint64_t *no, unsigned *field,
			uint64_t *id, unsigned *version)
{
	if (!tree_shown(fs))
		return N_NONE;
	if ((ino & ~ZRFS_GEN_MASK) == ZRFS_INO_TREE_DIR) {
		*no = ino & ZRFS_GEN_MASK;
		return N_DIR;
	}
	if ((ino & ~ZRFS_GEN_MASK) == ZRFS_INO_TREE_LINK) {
		*no = ino & ZRFS_GEN_MASK;
		return N_LINK;
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

static fuse_ino_t link_ino(const struct tlink *k)
{
	return ZRFS_INO_TREE_LINK | k->no;
}

/* The number of field @f's file of record @id. */
static fuse_ino_t file_ino(const struct zrfs *fs, unsigned f, uint64_t id)
{
	fuse_ino_t rec = zrfs_rec_ino(f, id, zrfs_rec_version(fs, f, id));

	return fs->tree->text[f] ? zrfs_rec_text_ino(rec) : rec;
}

static bool tree_owns(const struct zrfs *fs, fuse_ino_t ino)
{
	uint64_t no, id;
	unsigned field, version;

	return tree_decode(fs, ino, &no, &field, &id, &version) != N_NONE;
}

static struct zrfs_view *tree_view_of(struct zrfs *fs, struct zrfs_view *cur, fuse_ino_t ino)
{
	uint64_t no, id;
	unsigned field, version;

	/* a class's text: the view of its version, as a record file's */
	if (tree_decode(fs, ino, &no, &field, &id, &version) == N_TEXT &&
	    version != zrfs_rec_version(fs, field, id))
		return zrfs_inode_view(fs, ino);
	return zrfs_view_ref(cur);
}

/* ---- lookup and attributes ---- */

/* Whether record @id has a file of field @f in @v. */
static bool has_file(const struct zrfs *fs, struct zrfs_view *v, unsigned f, uint64_t id)
{
	return fs->tree->makes[f] && id < v->n && zrfs_record_listed(v, f, id);
}

/* Whether entry @e shows a file of its record's (which a link of its name
 * gives way to) in @v. */
static bool tree_shows_file(const struct zrfs *fs, struct zrfs_view *v, const struct tent *e)
{
	if (e->id == NO_ID || fs->names.key) /* a key's files are KEY.FIELD */
		return false;
	return has_file(fs, v, (unsigned)fs->names.files, e->id);
}

/* The entry hard link @k names (the path of its target), where it shows a
 * record's file or a link; NULL: none (a dangling hard link shows
 * nothing; a directory or another hard link there names nothing). */
static struct tent *tree_hard_target(struct zrfs *fs, struct zrfs_view *v, const struct tlink *k)
{
	struct tent *e = tree_ent_at(fs->tree, k->target, strlen(k->target));

	if (!e || e->sub)
		return NULL;
	if (tree_shows_file(fs, v, e))
		return e;
	return e->lnk && !S_ISREG(e->lnk->mode) ? e : NULL;
}

/* The number and type of what link entry @e shows: the link, or what a
 * hard link names (-ENOENT: nothing, a dangling one). */
static int link_shown(struct zrfs *fs, struct zrfs_view *v, const struct tent *e,
		      fuse_ino_t *out, mode_t *type)
{
	if (S_ISREG(e->lnk->mode) && !(e = tree_hard_target(fs, v, e->lnk)))
		return -ENOENT;
	if (tree_shows_file(fs, v, e)) {
		*out = file_ino(fs, (unsigned)fs->names.files, e->id);
		*type = S_IFREG;
	} else {
		*out = link_ino(e->lnk);
		*type = e->lnk->mode & S_IFMT;
	}
	return 0;
}

static int tree_lookup(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t parent, const char *name,
		       fuse_ino_t *out)
{
	struct zrfs_tree_index *t = fs->tree;
	size_t len = strlen(name), key = len;
	unsigned field = 0, version;
	uint64_t no, id;
	struct tdir *d;
	struct tent *e;

	if (parent == ZRFS_INO_ROOT) {
		if (!tree_shown(fs) || strcmp(name, ZRFS_TREE_NAME) != 0)
			return -ENOENT;
		*out = dir_ino(t->root);
		return 0;
	}
	if (tree_decode(fs, parent, &no, &field, &id, &version) != N_DIR)
		return -ENOTDIR;
	if (!(d = tree_dir_find(t, no)))
		return -ENOENT;
	if ((e = tree_ent_find(t, d, name, len)) != NULL && e->sub) {
		*out = dir_ino(e->sub);
		return 0;
	}
	/* a file over a link (a key's files have extensions: KEY.FIELD) */
	struct tent *named = e;
	if (fs->names.key) {
		if (zr_names_field_of(v->ds, &fs->names, name, len, &field, &key) < 0)
			e = NULL;
		else
			e = tree_ent_find(t, d, name, key);
	} else if (e) {
		field = (unsigned)fs->names.files;
	}
	if (e && e->id != NO_ID && has_file(fs, v, field, e->id)) {
		*out = file_ino(fs, field, e->id);
		return 0;
	}
	mode_t type;

	if (named && named->lnk && !tree_shows_file(fs, v, named))
		return link_shown(fs, v, named, out, &type);
	return -ENOENT;
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
	zrfs_record_meta(fs, v, field, id, st);
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

/* The owner and change time @m keeps, if any, in @st. */
static void meta_attr(const struct tmeta *m, struct stat *st)
{
	if (m->owned) {
		st->st_uid = m->uid;
		st->st_gid = m->gid;
	}
	if (m->changed)
		st->st_ctim = m->ctime;
}

static int tree_attr(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino, struct stat *st)
{
	struct tdir *d;
	struct tlink *k;
	uint64_t no, id;
	unsigned field, version;

	switch (tree_decode(fs, ino, &no, &field, &id, &version)) {
	case N_DIR:
		if (!(d = tree_dir_find(fs->tree, no)))
			return -ENOENT;
		zrfs_dir_attr(fs, v, ino, st);
		st->st_nlink = 2 + d->subs; /* find and du count on it */
		if (d->mode)
			st->st_mode = S_IFDIR | (d->mode & 07777);
		if (d->size) {
			st->st_size = (off_t)d->size;
			st->st_blocks = (blkcnt_t)((d->size + 511) / 512);
		}
		if (d->timed) {
			st->st_mtim = d->mtime;
			st->st_atim = d->atime;
		}
		meta_attr(&d->meta, st);
		return 0;
	case N_LINK:
		/* (removed: a FIFO, socket or device still open, without a name) */
		if (!(k = tree_link_find(fs->tree, no)) && !(k = tree_link_gone(fs->tree, no)))
			return -ENOENT;
		if (S_ISREG(k->mode))
			return -ENOENT; /* a hard link's number is never handed out */
		zrfs_file_attr(fs, v, ino, strlen(k->target), st);
		st->st_mode = k->mode; /* a FIFO's, socket's or device's size: its target's, 0 */
		st->st_rdev = (dev_t)k->rdev;
		struct timespec changed = {0};
		st->st_nlink = k->ent ? 1 + tree_hard_count(fs->tree, k->ent, &changed) : 0;
		if (zr_time_ns(changed) > zr_time_ns(st->st_ctim))
			st->st_ctim = changed; /* a hard link made or removed */
		st->st_mtim = k->mtime;
		st->st_atim = k->atime;
		meta_attr(&k->meta, st);
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
	struct zrfs_tree_index *t = fs->tree;
	uint64_t no, id;
	unsigned field, version;
	struct tdir *d;

	if (dir == ZRFS_INO_ROOT) {
		if (pos > 2 || !tree_shown(fs))
			return 0;
		snprintf(out->name, sizeof out->name, "%s", ZRFS_TREE_NAME);
		out->ino = dir_ino(t->root);
		out->type = S_IFDIR;
		out->pos = 2;
		return 1;
	}
	if (tree_decode(fs, dir, &no, &field, &id, &version) != N_DIR)
		return -ENOTDIR;
	if (!(d = tree_dir_find(t, no)))
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
		if (k == 0 && !e->sub && e->lnk && !tree_shows_file(fs, v, e) &&
		    link_shown(fs, v, e, &out->ino, &out->type) == 0) {
			snprintf(out->name, sizeof out->name, "%s", e->name);
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

	switch (tree_decode(fs, ino, &no, &field, &id, &version)) {
	case N_DIR:
		zrfs_reply_err(req, -EISDIR);
		return;
	case N_LINK: /* opened through O_PATH|O_NOFOLLOW only (the kernel
		      * opens a FIFO or socket without asking) */
		zrfs_reply_err(req, -ELOOP);
		return;
	case N_TEXT:
		zrfs_tree_text_read(req, fs, v, field, id, size, off);
		return;
	case N_NONE:
		break;
	}
	zrfs_reply_err(req, -ENOENT);
}

const struct zrfs_subtree zrfs_tree = {
	.name = "tree",
	.view = true,
	.owns = tree_owns,
	.view_of = tree_view_of,
	.older_unlinked = true,
	.lookup = tree_lookup,
	.attr = tree_attr,
	.entry = tree_entry,
	.read = tree_read,
};

int zrfs_tree_readlink(struct zrfs *fs, fuse_ino_t ino, char *buf, size_t cap)
{
	uint64_t no, id;
	unsigned field, version;
	struct tlink *k;
	int rc = -EINVAL; /* not a link */

	zrfs_names_begin(fs);
	if (tree_decode(fs, ino, &no, &field, &id, &version) == N_LINK) {
		rc = -ENOENT;
		if ((k = tree_link_find(fs->tree, no)) != NULL && !S_ISLNK(k->mode))
			rc = -EINVAL;
		else if (k)
			rc = snprintf(buf, cap, "%s", k->target) < (int)cap ? 0 : -ENAMETOOLONG;
	}
	zrfs_names_end(fs);
	return rc;
}

/* ---- for the write layer ---- */

/* The directory @ino is, if it is one of tree/ now. */
static struct tdir *dir_of(const struct zrfs *fs, fuse_ino_t ino)
{
	uint64_t no, id;
	unsigned field, version;

	return tree_decode(fs, ino, &no, &field, &id, &version) == N_DIR ? tree_dir_find(fs->tree, no) : NULL;
}

bool zrfs_tree_dir(const struct zrfs *fs, fuse_ino_t ino)
{
	return dir_of(fs, ino) != NULL;
}

bool zrfs_tree_has_hard(const struct zrfs *fs)
{
	return fs->tree && atomic_load(&fs->tree->nhard);
}

bool zrfs_tree_link_ino(const struct zrfs *fs, fuse_ino_t ino)
{
	uint64_t no, id;
	unsigned field, version;

	return tree_decode(fs, ino, &no, &field, &id, &version) == N_LINK;
}

int zrfs_tree_find(const struct zrfs *fs, fuse_ino_t dir, const char *name, size_t len,
		   uint64_t *id)
{
	struct tdir *d = dir_of(fs, dir);
	struct tent *e = d ? tree_ent_find(fs->tree, d, name, len) : NULL;

	if (!e || e->id == NO_ID)
		return -ENOENT;
	*id = e->id;
	return 0;
}

int zrfs_tree_path(const struct zrfs *fs, fuse_ino_t dir, char *buf, size_t cap)
{
	const struct tdir *d = dir_of(fs, dir);

	if (!d || cap == 0)
		return -ENOENT;
	return tree_dir_path(d, buf, cap) < 0 ? -ENAMETOOLONG : 0;
}

fuse_ino_t zrfs_tree_subdir(const struct zrfs *fs, fuse_ino_t dir, const char *name)
{
	struct tdir *d = dir_of(fs, dir);
	struct tent *e = d ? tree_ent_find(fs->tree, d, name, strlen(name)) : NULL;

	return e && e->sub ? dir_ino(e->sub) : 0;
}

int zrfs_tree_keep(struct zrfs *fs, fuse_ino_t dir)
{
	struct tdir *d;
	int rc = -ENOENT;
	bool kept;

	zrfs_names_begin(fs); /* most often it is kept already */
	kept = (d = dir_of(fs, dir)) != NULL && d->made;
	zrfs_names_end(fs);
	if (kept)
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
	struct zrfs_tree_index *t = fs->tree;
	size_t len = strlen(name);
	struct tdir *d;
	struct tent *e;
	int rc = 0;

	if (!zr_name_safe(name, len) || memchr(name, '/', len))
		return -EINVAL;
	zrfs_state_lock(fs);
	if (!(d = dir_of(fs, parent))) {
		rc = -ENOENT;
	} else if ((e = tree_ent_find(t, d, name, len)) != NULL &&
		   (e->sub || (!fs->names.key && e->id != NO_ID))) {
		rc = -EEXIST; /* a directory, or a file (a key's files have extensions) */
	} else if (!e && !(e = tree_ent_new(t, d, name, len))) {
		rc = -ENOMEM;
	} else if (!(e->sub = tree_dir_new(t, e))) {
		tree_prune(t, e, NULL);
		rc = -ENOMEM;
	} else {
		d->subs++;
		e->sub->made = true;
		e->sub->size = TREE_DIR_SIZE;
		*out = dir_ino(e->sub);
	}
	zrfs_state_unlock(fs);
	return rc;
}

int zrfs_tree_rmdir(struct zrfs *fs, fuse_ino_t parent, const char *name)
{
	struct zrfs_tree_index *t = fs->tree;
	size_t len = strlen(name);
	struct tdir *d, *sub;
	struct tent *e;
	int rc = 0;

	zrfs_state_lock(fs);
	if (!(d = dir_of(fs, parent)) || !(e = tree_ent_find(t, d, name, len))) {
		rc = -ENOENT;
	} else if (!(sub = e->sub)) {
		rc = -ENOTDIR;
	} else if (sub->live) {
		rc = -ENOTEMPTY;
	} else {
		e->sub = NULL;
		d->subs--;
		tree_dir_free(t, sub);
		tree_prune(t, e, NULL); /* the kernel removes the name itself */
	}
	zrfs_state_unlock(fs);
	return rc;
}

/* A directory's or link's change time is now (under the state lock). */
static void changed_now(struct tmeta *m)
{
	clock_gettime(CLOCK_REALTIME, &m->ctime);
	m->changed = true;
}

int zrfs_tree_touch(struct zrfs *fs, fuse_ino_t dir, struct timespec mtime)
{
	struct tdir *d;
	int rc = -ENOENT;

	zrfs_state_lock(fs);
	if ((d = dir_of(fs, dir)) != NULL) {
		/* its access time stays (the first time set: this one) */
		d->atime = d->timed ? d->atime : mtime;
		d->mtime = mtime;
		d->timed = true;
		changed_now(&d->meta);
		rc = 0;
	}
	zrfs_state_unlock(fs);
	return rc;
}

/* The link of @name in @dir shown (no file of a record over it), or NULL. */
static struct tent *link_at(const struct zrfs *fs, fuse_ino_t dir, const char *name)
{
	struct tdir *d = dir_of(fs, dir);
	struct tent *e = d ? tree_ent_find(fs->tree, d, name, strlen(name)) : NULL;

	return e && e->lnk && !e->sub && e->id == NO_ID ? e : NULL;
}

bool zrfs_tree_is_link(const struct zrfs *fs, fuse_ino_t dir, const char *name)
{
	return link_at(fs, dir, name) != NULL;
}

int zrfs_tree_make_link(struct zrfs *fs, fuse_ino_t dir, const char *name, uint32_t mode,
			const char *target, uint64_t rdev, fuse_ino_t *out)
{
	struct zrfs_tree_index *t = fs->tree;
	size_t len = strlen(name);
	struct timespec now;
	struct tdir *d;
	struct tent *e;
	int rc;

	if (!zr_name_safe(name, len) || memchr(name, '/', len))
		return -EINVAL;
	if (!tree_text(name) || !tree_text(target))
		return -EILSEQ; /* the dataset keeps links as text */
	clock_gettime(CLOCK_REALTIME, &now);
	zrfs_state_lock(fs);
	if (!(d = dir_of(fs, dir)))
		rc = -ENOENT;
	else if ((e = tree_ent_find(t, d, name, len)) && (e->sub || e->lnk || e->id != NO_ID))
		rc = -EEXIST;
	else if (!e && !(e = tree_ent_new(t, d, name, len)))
		rc = -ENOMEM;
	else if ((rc = tree_link_set(t, e, target, strlen(target), mode, rdev, now, now)) == 0)
		*out = link_ino(e->lnk);
	zrfs_state_unlock(fs);
	return rc;
}

int zrfs_tree_unlink(struct zrfs *fs, fuse_ino_t dir, const char *name, bool under_file)
{
	struct tdir *d;
	struct tent *e;
	struct timespec none = {0};
	int rc = -ENOENT;

	zrfs_state_lock(fs);
	/* (under a file: a file renamed onto the link, shown over it once
	 * committed, which the link would otherwise outlive in the tree) */
	if ((e = link_at(fs, dir, name)) != NULL ||
	    (under_file && (d = dir_of(fs, dir)) && (e = tree_ent_find(fs->tree, d, name,
									 strlen(name))) &&
	     e->lnk && !e->sub))
		rc = tree_link_set(fs->tree, e, NULL, 0, 0, 0, none, none);
	zrfs_state_unlock(fs);
	return rc;
}

int zrfs_tree_link_move(struct zrfs *fs, fuse_ino_t dir, const char *name, fuse_ino_t newdir,
			const char *newname, bool over_file)
{
	struct zrfs_tree_index *t = fs->tree;
	size_t len = strlen(newname);
	struct tent *e, *to;
	struct tdir *d;
	int rc = 0;

	if (!zr_name_safe(newname, len) || memchr(newname, '/', len))
		return -EINVAL;
	if (!tree_text(newname))
		return -EILSEQ; /* kept as text, as symlink's */
	zrfs_state_lock(fs);
	if (!(e = link_at(fs, dir, name)) || !(d = dir_of(fs, newdir))) {
		rc = -ENOENT;
	} else if ((to = tree_ent_find(t, d, newname, len)) &&
		   (to->sub || (to->id != NO_ID && !over_file))) {
		rc = -EEXIST; /* checked by the caller: a file or directory came since */
	} else if (to != e && !to && !(to = tree_ent_new(t, d, newname, len))) {
		rc = -ENOMEM;
	} else if (to != e) {
		/* the link itself moves, and keeps its number; the one it
		 * replaces goes, its entry staying for the link */
		struct tlink *k = e->lnk;
		tree_link_drop(t, to);
		to->lnk = k;
		k->ent = to;
		e->lnk = NULL;
		tree_prune(t, e, NULL);
		changed_now(&k->meta); /* a rename changes the inode renamed */
	}
	zrfs_state_unlock(fs);
	return rc;
}

/* ---- hard links, for the write layer ---- */

int zrfs_tree_hard_make(struct zrfs *fs, uint64_t id, fuse_ino_t link, fuse_ino_t dir,
			const char *name)
{
	struct zrfs_tree_index *t = fs->tree;
	size_t len = strlen(name);
	struct timespec now;
	struct tent *to, *e = NULL;
	struct tlink *k;
	struct tdir *d;
	char *path = malloc(PATH_MAX);
	uint64_t no;
	unsigned field, version;
	int rc = 0, plen = -1;

	if (!path)
		return -ENOMEM;
	if (!zr_name_safe(name, len) || memchr(name, '/', len))
		rc = -EINVAL;
	else if (!tree_text(name))
		rc = -EILSEQ; /* kept as text */
	clock_gettime(CLOCK_REALTIME, &now);
	zrfs_state_lock(fs);
	struct zrfs_view *v = zrfs_names_view(fs);
	if (rc == 0 && link && tree_decode(fs, link, &no, &field, &id, &version) == N_LINK &&
	    (k = tree_link_find(t, no)) != NULL && !S_ISREG(k->mode))
		e = k->ent;
	else if (rc == 0 && !link && id < t->cap && (e = t->of_id[id]) != NULL &&
		 (e->id != id || !tree_shows_file(fs, v, e)))
		e = NULL; /* another record's file shows there */
	if (rc == 0 && (!e || e->sub || (plen = tree_name_path(e->dir, e->name, path)) < 0))
		/* a record no name of tree/ shows (none, a directory's over it) */
		rc = e && !e->sub ? -ENAMETOOLONG : link ? -ENOENT : -EPERM;
	else if (rc == 0 && !(d = dir_of(fs, dir)))
		rc = -ENOENT;
	else if (rc == 0 && (to = tree_ent_find(t, d, name, len)) &&
		 (to->sub || to->lnk || to->id != NO_ID))
		rc = -EEXIST;
	else if (rc == 0 && !to && !(to = tree_ent_new(t, d, name, len)))
		rc = -ENOMEM;
	else if (rc == 0 && (rc = tree_link_set(t, to, path, (size_t)plen, S_IFREG, 0, now, now)) == 0 &&
		 e->lnk)
		changed_now(&e->lnk->meta); /* a link's change time: a record's is stored */
	zrfs_state_unlock(fs);
	free(path);
	return rc;
}

struct hard_find {
	struct zrfs *fs;
	struct zrfs_view *v;
	const struct tent *e;
	const struct tlink *found;
};

static int hard_find(struct zrfs_link *l, void *ctx)
{
	struct hard_find *h = ctx;
	const struct tlink *k = zrfs_container(l, struct tlink, link);

	if (!S_ISREG(k->mode) || tree_hard_target(h->fs, h->v, k) != h->e)
		return 0; /* not a hard link naming it */
	h->found = k;
	return 1;
}

bool zrfs_tree_hard_any(struct zrfs *fs, fuse_ino_t dir, const char *name, fuse_ino_t *hdir,
			char *hname)
{
	struct zrfs_view *v = zrfs_names_begin(fs);
	struct tdir *d = fs->tree && fs->tree->nhard ? dir_of(fs, dir) : NULL;
	struct hard_find h = {fs, v, d ? tree_ent_find(fs->tree, d, name, strlen(name)) : NULL,
			      NULL};

	/* what the name shows: a record's file, or a link (not a hard one) */
	if (h.e && (h.e->sub || (!tree_shows_file(fs, v, h.e) &&
				 (!h.e->lnk || S_ISREG(h.e->lnk->mode)))))
		h.e = NULL;
	if (h.e && tree_hard_count(fs->tree, h.e, NULL))
		zrfs_table_each(&fs->tree->links, hard_find, &h);
	if (h.found) {
		*hdir = dir_ino(h.found->ent->dir);
		snprintf(hname, ZRFS_NAME_MAX + 1, "%s", h.found->ent->name);
	}
	zrfs_names_end(fs);
	return h.found != NULL;
}

bool zrfs_tree_hard_of(struct zrfs *fs, fuse_ino_t dir, const char *name, uint64_t *id)
{
	struct zrfs_view *v = zrfs_names_begin(fs);
	struct tent *e = link_at(fs, dir, name), *to;
	bool hard = e && S_ISREG(e->lnk->mode);

	*id = NO_ID;
	if (hard && (to = tree_hard_target(fs, v, e->lnk)) != NULL && tree_shows_file(fs, v, to))
		*id = to->id;
	zrfs_names_end(fs);
	return hard;
}

/* Hard links to retarget: their entries. */
struct retarget {
	const char *from;
	size_t flen;
	bool below;
	uint64_t only;		/* a token: only the links it moved (0: any) */
	struct tent **ents;
	size_t n, cap;
	int rc;
};

static int retarget_find(struct zrfs_link *l, void *ctx)
{
	struct retarget *r = ctx;
	struct tlink *k = zrfs_container(l, struct tlink, link);

	if (!S_ISREG(k->mode) || strncmp(k->target, r->from, r->flen) != 0 ||
	    (k->target[r->flen] && !(r->below && k->target[r->flen] == '/')) ||
	    (r->only && k->moved != r->only))
		return 0;
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 8;
		struct tent **v = realloc(r->ents, cap * sizeof *v);
		if (!v)
			return r->rc = -ENOMEM;
		r->ents = v;
		r->cap = cap;
	}
	r->ents[r->n++] = k->ent;
	return 0;
}

int zrfs_tree_retarget(struct zrfs *fs, const char *from, const char *to, bool below,
		       uint64_t token, bool back)
{
	struct zrfs_tree_index *t = fs->tree;
	struct retarget r = {from, strlen(from), below, back ? token : 0, NULL, 0, 0, 0};
	char *path = malloc(PATH_MAX);

	if (!t || !path) {
		free(path);
		return t ? -ENOMEM : 0;
	}
	zrfs_state_lock(fs);
	if (t->nhard)
		zrfs_table_each(&t->links, retarget_find, &r);
	for (size_t i = 0; i < r.n && r.rc == 0; i++) {
		struct tlink *k = r.ents[i]->lnk;
		int n = snprintf(path, PATH_MAX, "%s%s", to, k->target + r.flen);
		if (n >= PATH_MAX)
			r.rc = -ENAMETOOLONG;
		else if ((r.rc = tree_link_set(t, r.ents[i], path, (size_t)n, S_IFREG, 0, k->mtime,
					       k->atime)) == 0)
			r.ents[i]->lnk->moved = back ? 0 : token;
	}
	zrfs_state_unlock(fs);
	free(r.ents);
	free(path);
	return r.rc < 0 ? r.rc : (int)r.n;
}

/* The records named below directory @d into @ids (*@n, room for *@cap). */
static int ids_below(const struct tdir *d, uint64_t **ids, size_t *n, size_t *cap)
{
	for (uint32_t i = 0; i < d->n; i++) {
		const struct tent *e = d->ents[i];
		if (!e)
			continue;
		for (uint32_t k = 0; k <= e->nmore; k++) {
			uint64_t id = k == 0 ? e->id : e->more[k - 1];
			if (id == NO_ID)
				continue;
			if (*n == *cap) {
				size_t more = *cap ? *cap * 2 : 64;
				uint64_t *v = realloc(*ids, more * sizeof *v);
				if (!v)
					return -ENOMEM;
				*ids = v;
				*cap = more;
			}
			(*ids)[(*n)++] = id;
		}
		if (e->sub && ids_below(e->sub, ids, n, cap) < 0)
			return -ENOMEM;
	}
	return 0;
}

int zrfs_tree_dir_move(struct zrfs *fs, fuse_ino_t dir, const char *name, fuse_ino_t newdir,
		       const char *newname, uint64_t **ids, size_t *n)
{
	struct zrfs_tree_index *t = fs->tree;
	size_t len = strlen(newname), cap = 0;
	struct tdir *d, *nd, *sub;
	struct tent *e, *to = NULL;
	int rc = 0;

	*ids = NULL;
	*n = 0;
	if (!zr_name_safe(newname, len) || memchr(newname, '/', len))
		return -EINVAL;
	if (!tree_text(newname))
		return -EILSEQ; /* kept as text */
	zrfs_state_lock(fs);
	if (!(d = dir_of(fs, dir)) || !(nd = dir_of(fs, newdir)) ||
	    !(e = tree_ent_find(t, d, name, strlen(name))) || !(sub = e->sub)) {
		rc = -ENOENT;
		goto out;
	}
	for (const struct tdir *up = nd; up; up = up->self ? up->self->dir : NULL)
		if (up == sub) {
			rc = -EINVAL; /* into itself */
			goto out;
		}
	if ((to = tree_ent_find(t, nd, newname, len)) == e)
		goto out; /* onto itself */
	if (to && (to->lnk || (!fs->names.key && to->id != NO_ID)))
		rc = -ENOTDIR; /* a file (a key's files have extensions) or a link */
	else if (to && to->sub && to->sub->live)
		rc = -ENOTEMPTY;
	else if ((rc = ids_below(sub, ids, n, &cap)) == 0 && !to &&
		 !(to = tree_ent_new(t, nd, newname, len)))
		rc = -ENOMEM;
	if (rc < 0)
		goto out;
	if (to->sub) { /* an empty directory: replaced */
		tree_dir_free(t, to->sub);
		nd->subs--;
	}
	to->sub = sub;
	sub->self = to;
	changed_now(&sub->meta); /* a rename changes the inode renamed ("..") */
	nd->subs++;
	e->sub = NULL;
	d->subs--;
	tree_prune(t, e, NULL);
out:
	zrfs_state_unlock(fs);
	if (rc < 0) {
		free(*ids);
		*ids = NULL;
		*n = 0;
	}
	return rc;
}

int zrfs_tree_link_time(struct zrfs *fs, fuse_ino_t ino, struct timespec mtime,
			struct timespec atime)
{
	uint64_t no, id;
	unsigned field, version;
	struct tlink *k;
	int rc = -ENOENT;

	zrfs_state_lock(fs);
	if (tree_decode(fs, ino, &no, &field, &id, &version) == N_LINK &&
	    (k = tree_link_find(fs->tree, no)) != NULL) {
		k->mtime = mtime;
		k->atime = atime;
		changed_now(&k->meta);
		rc = 0;
	}
	zrfs_state_unlock(fs);
	return rc;
}

int zrfs_tree_owner(struct zrfs *fs, fuse_ino_t ino, const uint32_t *ids)
{
	uint64_t no, id;
	unsigned field, version;
	struct tmeta *m = NULL;
	struct tdir *d;
	struct tlink *k;

	zrfs_state_lock(fs);
	switch (tree_decode(fs, ino, &no, &field, &id, &version)) {
	case N_DIR:
		m = (d = tree_dir_find(fs->tree, no)) != NULL ? &d->meta : NULL;
		break;
	case N_LINK:
		m = (k = tree_link_find(fs->tree, no)) != NULL ? &k->meta : NULL;
		break;
	default:
		break;
	}
	if (m && ids)
		m->owned = true, m->uid = ids[0], m->gid = ids[1];
	if (m)
		changed_now(m);
	zrfs_state_unlock(fs);
	return m ? 0 : -ENOENT;
}

bool zrfs_tree_setgid(struct zrfs *fs, fuse_ino_t dir, uint32_t *gid)
{
	struct tdir *d;
	bool set = false;

	zrfs_names_begin(fs);
	if ((d = dir_of(fs, dir)) != NULL && (d->mode & S_ISGID)) {
		*gid = d->meta.owned ? d->meta.gid : fs->gid;
		set = true;
	}
	zrfs_names_end(fs);
	return set;
}

int zrfs_tree_mode(struct zrfs *fs, fuse_ino_t ino, uint32_t mode)
{
	uint64_t no, id;
	unsigned field, version;
	struct tlink *k;
	struct tdir *d;
	int rc = -ENOENT;

	zrfs_state_lock(fs);
	if ((d = dir_of(fs, ino)) != NULL) {
		d->mode = S_IFDIR | (mode & 07777);
		changed_now(&d->meta);
		rc = 0;
	} else if (tree_decode(fs, ino, &no, &field, &id, &version) == N_LINK &&
		   (k = tree_link_find(fs->tree, no)) != NULL && !S_ISLNK(k->mode)) {
		k->mode = (k->mode & S_IFMT) | (mode & 07777); /* a FIFO's, a socket's */
		changed_now(&k->meta);
		rc = 0;
	}
	zrfs_state_unlock(fs);
	return rc;
}
