/*
 * overlay.c - the files being written as the mount shows them: the
 * subtree zrfs_writing, an overlay (dispatch.c) asked first for a name in
 * any directory and standing in for the entries it replaces in a field
 * directory's listing and in tree/. It shows drafts under their names (a draft
 * renamed onto a record's name in place of that record's file), the
 * directories made for them, and aliases (names of records, resolved,
 * not listed); a draft's number shows its record once its commit is in the
 * view. Its names are never cached; what its numbers mean is kept while a
 * draft is listed or the kernel holds them (nodes.c, inodes.c).
 *
 * It also owns the record numbers renames moved while the kernel holds
 * them (nodes.c): asked before the subtree whose numbers they are.
 *
 * Sections: numbers, names, contents, listings.
 */
#include "write_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- numbers ---- */

/* Drafts' numbers, a record's number a rename moved onto another record
 * while the kernel holds it (the file it names follows the rename:
 * logrotate's `mv log log.1` while the program writes on), so this shows
 * the record it is now, not the view of the record it was, and a record's
 * number kept as its file's (nodes.c), until the kernel forgets it: once
 * the file is removed or replaced, an open of it still shows what it last
 * showed, never the record's next value. */
static bool writing_owns(const struct zrfs *fs, fuse_ino_t ino)
{
	struct zrfs_writes *w = fs->writes;
	struct winode *i;
	bool moved;

	if (!w)
		return false;
	if ((ino >> 62) == 1)
		return true;
	if (!zrfs_is_rec_ino(ino) || (!atomic_load(&w->nmoved) && !atomic_load(&w->nkept)))
		return false;
	pthread_mutex_lock(&w->names_lock);
	moved = (i = zrfs_winode_find(w, ino)) != NULL && (i->moved || i->kept);
	pthread_mutex_unlock(&w->names_lock);
	return moved;
}

/* Drafts' numbers, and records' numbers a rename moved (adopted): what
 * the number means goes once nothing keeps it. */
static void writing_let_go(struct zrfs *fs, fuse_ino_t ino)
{
	struct zrfs_writes *w = fs->writes;

	pthread_mutex_lock(&w->names_lock);
	zrfs_winode_let_go(w, ino);
	pthread_mutex_unlock(&w->names_lock);
}

/* ---- names ---- */

static int writing_lookup(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t parent,
			  const char *name, fuse_ino_t *out)
{
	struct zrfs_writes *w = fs->writes;
	struct wnode *d;
	unsigned field;
	uint64_t id;
	int rc = -ENOENT;

	if (!w)
		return -ENOENT;
	bool tree = zrfs_dir_tree(fs, parent); /* its names are the index's (tree.c) */
	pthread_mutex_lock(&w->names_lock);
	if (!tree && !zrfs_dir_field(fs, parent, &field)) {
		rc = -ENOENT;
	} else if ((d = zrfs_draft_find(w, parent, name, v->gen)) != NULL) {
		*out = d->ino;
		rc = 0;
	} else if (!tree && zrfs_alias_find(w, parent, name, v->gen, &id) == 0 && id < v->n &&
		   zrfs_record_listed(v, field, id)) {
		*out = zrfs_rec_ino(field, id, zrfs_rec_version(fs, field, id));
		rc = 0;
	}
	pthread_mutex_unlock(&w->names_lock);
	return rc;
}

/* The draft that a rename onto its name put in the place of record @id's
 * file of @field, as view @v has it (not a record there yet), or NULL: the
 * target the view has, as a group's delete moves it before the view shows
 * the move (the record at @id is another file's until then). Under the
 * names lock. */
static struct wnode *standing_in(struct zrfs_writes *w, struct zrfs_view *v, unsigned field,
				 uint64_t id)
{
	struct wnode *d = zrfs_draft_targeting(w, field, id);

	if (d && (zrfs_draft_settled(d, v->gen) || zrfs_draft_target_at(d, v->gen) != id))
		d = NULL;
	return d;
}

/* Whether record file @ino (in tree/ perhaps its class as text), another
 * subtree's, is gone, not committed yet: removed, its removal waiting for
 * its group, or replaced by a draft renamed onto its name. Lookups do not
 * find it, listings skip it (or show the draft: writing_shadow), an open of
 * it has no link. */
static bool writing_gone(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino)
{
	struct zrfs_writes *w = fs->writes;
	unsigned field, version;
	uint64_t id;
	bool gone;

	if (!w || (!atomic_load(&w->ngone) && !atomic_load(&w->ntargets)) ||
	    (ino >> 56 != 1 && ino >> 56 != 2) ||
	    !zrfs_rec_decode(fs, (ino & ~ZRFS_INO_TEXT) | ZRFS_INO_REC, &field, &id, &version))
		return false;
	pthread_mutex_lock(&w->names_lock);
	gone = zrfs_gone_has(w, field, id, version, v->gen) || standing_in(w, v, field, id);
	pthread_mutex_unlock(&w->names_lock);
	return gone;
}

/* ---- contents ---- */

/* Whether winode @i (NULL: none) names no file any more (removed, or
 * replaced by a rename onto its name): an open file's links are then 0.
 * Under the names lock. */
static bool winode_unlinked(const struct winode *i)
{
	return !i || (i->draft ? zrfs_draft_removed(i->draft) : i->id == NO_ID);
}

/* What draft number @ino shows in view @v: its draft (referenced), or the
 * record it became; in *@gone, if not NULL, whether it names no file any
 * more (winode_unlinked). 0, or -ENOENT (-ESTALE: shows nothing any more). */
static int number_shown(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino, struct wnode **d,
			unsigned *field, uint64_t *id, bool *text, bool *gone)
{
	struct zrfs_writes *w = fs->writes;
	struct winode *i;
	int rc = -ENOENT;

	*d = NULL;
	pthread_mutex_lock(&w->names_lock);
	if ((i = zrfs_winode_find(w, ino)) != NULL) {
		*field = i->field;
		*text = i->text;
		/* the record the number shows in @v, which may not have the
		 * last delete's or rename's move yet */
		*id = i->draft ? zrfs_moved_at(&i->draft->stored_moved, i->draft->stored, v->gen)
			       : zrfs_moved_at(&i->id_moved, i->id, v->gen);
		if (i->kept && !i->identity && !i->moved && !zrfs_number_current(fs, ino))
			*id = NO_ID; /* its file is gone: removed, or replaced */
		if (i->draft && !zrfs_draft_settled(i->draft, v->gen))
			*d = zrfs_node_ref(i->draft);
		rc = *d || (*id != NO_ID && *id < v->n) ? 0 : -ESTALE;
	}
	if (gone)
		*gone = winode_unlinked(i);
	pthread_mutex_unlock(&w->names_lock);
	return rc;
}

int zrfs_number_record(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino, unsigned *field,
		       uint64_t *id, struct wnode **draft)
{
	unsigned version;
	bool text, gone;
	int rc;

	*draft = NULL;
	if (writing_owns(fs, ino)) {
		rc = number_shown(fs, v, ino, draft, field, id, &text, &gone);
		if (rc == 0 && !*draft && (gone || text))
			rc = -ENOENT; /* removed; a class's text is no file of its own */
		return rc == -ESTALE ? -ENOENT : rc;
	}
	if (!zrfs_rec_decode(fs, ino, field, id, &version) ||
	    version != zrfs_rec_version(fs, *field, *id) || *id >= v->n ||
	    !zrfs_record_listed(v, *field, *id) || writing_gone(fs, v, ino))
		return -ENOENT;
	return 0;
}

/* Whether number @ino names no file any more (winode_unlinked). */
static bool number_unlinked(struct zrfs *fs, fuse_ino_t ino)
{
	struct zrfs_writes *w = fs->writes;
	bool gone;

	pthread_mutex_lock(&w->names_lock);
	gone = winode_unlinked(zrfs_winode_find(w, ino));
	pthread_mutex_unlock(&w->names_lock);
	return gone;
}

/* Number @ino showed a record's file with attributes @st: kept, for when
 * the file is gone and a program still has it open. */
static void keep_shown(struct zrfs *fs, fuse_ino_t ino, const struct stat *st)
{
	struct zrfs_writes *w = fs->writes;
	struct winode *i;

	pthread_mutex_lock(&w->names_lock);
	if ((i = zrfs_winode_find(w, ino)) != NULL) {
		i->shown = true;
		i->last_size = (uint64_t)st->st_size;
		i->last_mode = st->st_mode;
		i->last_atime = st->st_atim;
		i->last_mtime = st->st_mtim;
		i->last_ctime = st->st_ctim;
	}
	pthread_mutex_unlock(&w->names_lock);
}

/* Attributes of file node @d as number @ino in view @v (under the names
 * lock): 0. */
static int node_attr(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino, struct wnode *d,
		      struct stat *st)
{
	zrfs_file_attr(fs, v, ino, atomic_load(&d->val.size), st);
	zrfs_node_meta(d, st);
	zrfs_node_links_attr(fs, d, st);
	return 0;
}

/* Read file node @d's bytes: what has been written to it. A node that
 * holds none any more (its writer was killed before a close, and what it
 * wrote dropped) answers ESTALE, never bytes it does not have. */
static void node_read(fuse_req_t req, struct wnode *d, size_t size, off_t off)
{
	char *buf = zrfs_scratch(ZRFS_SCRATCH_REPLY, size);
	ssize_t got = -ENOMEM;

	if (buf) {
		pthread_mutex_lock(&d->lock);
		got = d->loaded ? zrfs_value_read(&d->val, buf, size, (uint64_t)off) : -ESTALE;
		pthread_mutex_unlock(&d->lock);
	}
	if (got < 0)
		zrfs_reply_err(req, (int)got);
	else
		zrfs_reply_buf(req, buf, (size_t)got);
}

/* Attributes of number @ino, whose file is gone (removed, or replaced by
 * a rename onto its name): as it last showed them, with no link, as a
 * removed file a program has open keeps them (fstat); -ESTALE if it never
 * showed a file. */
static int last_shown(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino, struct stat *st)
{
	struct zrfs_writes *w = fs->writes;
	struct winode *i;
	int rc = -ESTALE;

	pthread_mutex_lock(&w->names_lock);
	if ((i = zrfs_winode_find(w, ino)) != NULL && i->shown) {
		zrfs_file_attr(fs, v, ino, i->last_size, st);
		st->st_mode = i->last_mode;
		st->st_atim = i->last_atime;
		st->st_mtim = i->last_mtime;
		st->st_ctim = i->last_ctime;
		st->st_nlink = 0;
		rc = 0;
	}
	pthread_mutex_unlock(&w->names_lock);
	return rc;
}

static int writing_attr(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino, struct stat *st)
{
	struct wnode *d;
	unsigned field;
	uint64_t id;
	bool text, gone;
	int rc = number_shown(fs, v, ino, &d, &field, &id, &text, &gone);

	if (rc == -ESTALE)
		return last_shown(fs, v, ino, st);
	if (rc < 0)
		return rc;
	if (d && d->kind == WN_DIR) {
		zrfs_dir_attr(fs, v, ino, st);
		pthread_mutex_lock(&fs->writes->names_lock); /* its time: zrfs_dir_changed */
		zrfs_node_meta(d, st);
		st->st_nlink = 2 + (nlink_t)d->subdirs;
		pthread_mutex_unlock(&fs->writes->names_lock);
		zrfs_node_put(d);
		return 0;
	}
	if (!d) { /* a record now: as its file shows it, in tree/ perhaps as text */
		rc = text ? zrfs_tree_text_attr(fs, v, ino, field, id, st)
			  : zrfs_record_attr(fs, v, ino, field, id, st);
		if (rc == -ENOENT)
			return last_shown(fs, v, ino, st);
		if (rc == 0)
			keep_shown(fs, ino, st);
		if (rc == 0 && writing_gone(fs, v, zrfs_rec_ino(field, id,
							      zrfs_rec_version(fs, field, id))))
			st->st_nlink = 0; /* removed while open, not committed yet */
		return rc;
	}
	node_attr(fs, v, ino, d, st);
	zrfs_node_put(d);
	keep_shown(fs, ino, st); /* an unlinked file's, once it is another's record */
	if (gone)
		st->st_nlink = 0; /* removed while open */
	return 0;
}

/* Reply to a read of record @id of @field as view @v has it, read through
 * one of this subtree's numbers: what is made of it (a flate record's
 * inflated bytes) is cached under the record and the view, as the kernel
 * may hold no number of that record, whose version then comes round at its
 * next change (versions.c) while a reader reads the one before. */
static void view_record_read(fuse_req_t req, struct zrfs *fs, struct zrfs_view *v,
			     unsigned field, uint64_t id, size_t size, off_t off)
{
	zrfs_record_read(req, fs, v, zrfs_rec_cache_key(zrfs_rec_ino(field, id, 0)),
			 zrfs_view_tag(v), field, id, size, off);
}

static void writing_read(fuse_req_t req, struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino,
			 size_t size, off_t off)
{
	struct wnode *d;
	unsigned field;
	uint64_t id;
	bool text;
	int rc = number_shown(fs, v, ino, &d, &field, &id, &text, NULL);

	if (rc < 0) {
		zrfs_reply_err(req, rc);
	} else if (!d && text) { /* a record now, in tree/ as text */
		zrfs_tree_text_read(req, fs, v, field, id, size, off);
	} else if (!d) { /* a record now, read as its own file */
		view_record_read(req, fs, v, field, id, size, off);
	} else if (d->kind == WN_DIR) {
		zrfs_reply_err(req, -EISDIR);
	} else {
		node_read(req, d, size, off);
	}
	zrfs_node_put(d);
}

/* ---- reading through an open of its own ----
 *
 * A record's file shown through one of this subtree's numbers (a file made
 * through the mount, which keeps its number once it is a record; a number
 * a rename moved) shows the record as it is now, whatever the commits do:
 * a file opened for reading then reads, until it is closed, the value it
 * had at its open, as a file renamed over is read whole on any filesystem
 * by whoever had it open, and never the start of one value and the rest of
 * the next (each READ asked the view of its own moment).
 * A file being written (a draft) opened for reading reads its node, which
 * the handle holds: what is written to it, as it is written, and once it is
 * stored, removed or replaced, the bytes it had then (its number may show
 * another record by then, or nothing). So does a record's file opened for
 * reading by a thread that has it open for writing (zrfs(8): the writer
 * reads what it wrote, as stat shows it the size being written), once
 * what it writes is loaded; others, its process's other threads too, read
 * the value stored, whole. */

struct rhandle {
	struct zrfs_reading r; /* the view at the open (of a file unlinked just
				* before: the view it showed its record in) */
	unsigned field;
	uint64_t id;
	bool text;            /* a class shown as decimal text (tree/) */
	struct wnode *draft;  /* a draft's node (referenced), or NULL: a record's */
	struct wnode *own;    /* ... the node its opening thread was writing it
			       * through (referenced), or NULL */
};

/* What @h's opener is writing, where it reads that: whether it answered. */
static bool own_read(fuse_req_t req, struct rhandle *h, size_t size, off_t off)
{
	if (!h->own || !atomic_load(&h->own->loaded))
		return false;
	node_read(req, h->own, size, off);
	return true;
}

static const struct zrfs_handle_ops rhandle_ops;

static void r_read(fuse_req_t req, struct zrfs *fs, struct zrfs_handle *hh, fuse_ino_t ino,
		   size_t size, off_t off)
{
	struct rhandle *h = (struct rhandle *)hh;

	(void)ino;
	if (h->draft)
		node_read(req, h->draft, size, off);
	else if (own_read(req, h, size, off))
		;
	else if (h->text)
		zrfs_tree_text_read(req, fs, h->r.v, h->field, h->id, size, off);
	else
		view_record_read(req, fs, h->r.v, h->field, h->id, size, off);
}

/* SEEK_DATA, SEEK_HOLE in the value it reads */
static int64_t r_seek(struct zrfs *fs, struct zrfs_handle *hh, fuse_ino_t ino, uint64_t off,
		      int whence)
{
	struct rhandle *h = (struct rhandle *)hh;
	struct stat st;
	int64_t rc;

	struct wnode *d = h->draft ? h->draft : h->own;

	if (d) {
		pthread_mutex_lock(&d->lock);
		rc = d->loaded ? zrfs_value_seek(&d->val, off, whence) : -ESTALE;
		pthread_mutex_unlock(&d->lock);
		if (d == h->draft || rc != -ESTALE)
			return rc;
	}
	if (!h->text)
		return zrfs_record_seek(fs, h->r.v, h->field, h->id, off, whence);
	rc = zrfs_tree_text_attr(fs, h->r.v, ino, h->field, h->id, &st);
	return rc < 0 ? rc : zrfs_seek_plain((uint64_t)st.st_size, off, whence);
}

/* fstat(2) of the descriptor: the value it reads */
static void r_getattr(fuse_req_t req, struct zrfs *fs, struct zrfs_handle *hh, fuse_ino_t ino)
{
	struct rhandle *h = (struct rhandle *)hh;
	struct stat st;

	zrfs_names_begin(fs); /* (tree/'s hard links: the index's) */
	int rc = h->draft  ? node_attr(fs, h->r.v, ino, h->draft, &st)
		 : h->text ? zrfs_tree_text_attr(fs, h->r.v, ino, h->field, h->id, &st)
			   : zrfs_record_attr(fs, h->r.v, ino, h->field, h->id, &st);
	zrfs_names_end(fs);

	if (rc == 0 && number_unlinked(fs, ino))
		st.st_nlink = 0;
	if (rc == 0 && h->own)
		zrfs_write_own_attr(req, fs, ino, &st); /* the size it reads */
	if (rc < 0)
		zrfs_reply_err(req, rc);
	else
		zrfs_reply_attr(req, &st, 0);
}

static void r_let_go(struct zrfs_reading *r)
{
	zrfs_node_put(((struct rhandle *)r)->draft);
	zrfs_node_put(((struct rhandle *)r)->own);
}

static const struct zrfs_handle_ops rhandle_ops = {
	.read = r_read,
	.write = zrfs_reading_write,
	.flush = zrfs_reading_flush,
	.fsync = zrfs_reading_fsync,
	.release = zrfs_reading_release,
	.getattr = r_getattr,
	.setattr = zrfs_reading_setattr,
	.seek = r_seek,
};

/* The view number @ino showed its record in, and that record, where the
 * kernel holds the number and its file was unlinked (removed, replaced)
 * since: in place of *@v (the view shown now), referenced. 0 or -ESTALE.
 * Under the names lock. */
static int number_was(struct zrfs *fs, struct zrfs_view **v, fuse_ino_t ino, unsigned *field,
		      uint64_t *id, bool *text)
{
	struct zrfs_view *was;
	uint64_t gen;

	/* a record's number that is its record's version (again) names that
	 * record's file: never what another file had */
	if (zrfs_winode_was(fs->writes, ino, field, id, text, &gen) < 0 ||
	    (zrfs_is_rec_ino(ino) && zrfs_number_current(fs, ino)))
		return -ESTALE;
	if ((*v)->gen == gen) /* unlinked by a change not shown yet */
		return *id < (*v)->n ? 0 : -ESTALE;
	if (!(was = zrfs_inode_view(fs, ino)) || was->gen != gen || *id >= was->n) {
		zrfs_view_put(was);
		return -ESTALE;
	}
	zrfs_view_put(*v);
	*v = was;
	return 0;
}

void zrfs_write_open_read(fuse_req_t req, struct zrfs *fs, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	struct zrfs_view *v = zrfs_view_ref(zrfs_names_begin(fs));
	struct rhandle *h = NULL;
	struct wnode *d;
	unsigned field;
	uint64_t id;
	bool text;
	int rc = number_shown(fs, v, ino, &d, &field, &id, &text, NULL);

	/* unlinked between the opener's lookup and its open: opened all the
	 * same, reading the value it had, as on any filesystem (the kernel
	 * would look the name up again once, then fail the open) */
	if (rc == -ESTALE)
		rc = number_was(fs, &v, ino, &field, &id, &text);
	zrfs_names_end(fs);
	if (d && d->kind == WN_DIR) { /* a directory made here: no handle */
		zrfs_node_put(d);
		d = NULL;
	} else if (rc == 0 && !(h = calloc(1, sizeof *h))) {
		rc = -ENOMEM;
	}
	if (rc < 0) {
		zrfs_node_put(d);
		zrfs_view_put(v);
		zrfs_reply_err(req, rc);
		return;
	}
	if (h) {
		*h = (struct rhandle){{{&rhandle_ops}, v, NULL, NULL, r_let_go}, field, id, text, d,
				      d || text ? NULL : zrfs_write_own_node(req, fs, ino)};
		zrfs_reading_open(fs, &h->r);
		fi->fh = (uintptr_t)h;
	} else {
		zrfs_view_put(v);
	}
	fi->direct_io = 1;
	if (zrfs_reply_open(req, fi) != 0 && h) /* the opener is gone: no RELEASE comes */
		zrfs_reading_close(fs, &h->r);
}

/* ---- listings ---- */

/* A draft listed on its own (not standing in for a record's file). */
static bool own_entry(struct zrfs_view *v, const struct wnode *d)
{
	uint64_t target = zrfs_draft_target_at(d, v->gen);

	return !zrfs_draft_settled(d, v->gen) &&
	       (target == NO_ID || target >= v->n || !zrfs_record_listed(v, d->field, target));
}

static int writing_entry(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t dir, uint64_t pos,
			 struct zrfs_dirent *out)
{
	struct zrfs_writes *w = fs->writes;
	unsigned field;
	int rc = 0;

	if (!w)
		return 0;
	bool tree = zrfs_dir_tree(fs, dir);
	pthread_mutex_lock(&w->names_lock);
	if (!tree && !zrfs_dir_field(fs, dir, &field))
		rc = writing_owns(fs, dir) ? -ENOTDIR : 0;
	for (struct wnode *d = w->first; d && rc == 0; d = d->next)
		if (d->parent == dir && DRAFT_POS + d->seq >= pos && own_entry(v, d)) {
			snprintf(out->name, sizeof out->name, "%s", d->name);
			out->ino = d->ino;
			out->type = d->kind == WN_DIR ? S_IFDIR : S_IFREG;
			out->pos = DRAFT_POS + d->seq;
			rc = 1;
		}
	pthread_mutex_unlock(&w->names_lock);
	return rc;
}

static bool writing_shadow(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t dir,
			   struct zrfs_dirent *e)
{
	struct zrfs_writes *w = fs->writes;
	unsigned field, version;
	uint64_t id;
	struct wnode *d;
	bool yes = false;

	(void)dir;
	/* a record's file (in its field's directory, in tree/: a class's text
	 * has the same bits), which a draft renamed onto its name replaces */
	if (!w || e->type != S_IFREG ||
	    !zrfs_rec_decode(fs, (e->ino & ~ZRFS_INO_TEXT) | ZRFS_INO_REC, &field, &id, &version))
		return false;
	pthread_mutex_lock(&w->names_lock);
	if ((d = standing_in(w, v, field, id)) != NULL) {
		e->ino = d->ino;
		yes = true;
	}
	pthread_mutex_unlock(&w->names_lock);
	return yes;
}

static fuse_ino_t writing_identity(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino,
				   bool count)
{
	struct zrfs_writes *w = fs->writes;
	bool text = ino >> 56 == 2; /* a class as text, in tree/ */
	unsigned field, version;
	fuse_ino_t out;
	uint64_t id;
	bool held;

	if (!w || !atomic_load(&w->nidentities) ||
	    !zrfs_rec_decode(fs, text ? (ino & ~ZRFS_INO_TEXT) | ZRFS_INO_REC : ino, &field, &id,
			     &version))
		return 0;
	/* counted while the winode cannot go: a FORGET that came first
	 * waits for names_lock to let it go */
	pthread_mutex_lock(&w->names_lock);
	out = zrfs_winode_identity(w, field, id, text, v->gen);
	held = out && count && zrfs_inode_again(fs, out);
	pthread_mutex_unlock(&w->names_lock);
	/* a number the kernel forgot is the file's still: handed afresh (if
	 * the record changes meanwhile, the number shows nothing, and the
	 * lookup answers with the record's own: dispatch.c) */
	if (out && count && !held && zrfs_inode_hand(fs, out, &zrfs_writing) < 0)
		out = 0;
	return out;
}

const struct zrfs_subtree zrfs_writing = {
	.name = "writing",
	.overlay = true,
	.owns = writing_owns,
	.let_go = writing_let_go,
	.lookup = writing_lookup,
	.attr = writing_attr,
	.entry = writing_entry,
	.shadow = writing_shadow,
	.identity = writing_identity,
	.gone = writing_gone,
	.read = writing_read,
};
