/*
 * names.c - the names of field directories on a writable mount: files
 * and directories created, removed and renamed, attributes changed by
 * path. What lookups and listings show of them is overlay.c's.
 *
 * A field directory lists "ID[.ext]" for every record with a value, and
 * over them the drafts (new files) under their names; a draft renamed onto
 * a record's name stands in for that record's file until it is committed.
 * A name is, in the order asked: a draft; an alias (a new file's name
 * after it became a record, or a record's file renamed to it: resolved,
 * not listed); a record's own name. Renames and removals of drafts change
 * the daemon's tables only; of records they are committed at once
 * (publish.c). A rename between field directories is EXDEV (mv then copies
 * and removes); anything else outside them is EPERM.
 *
 * tree/ (a dataset that keeps names) is written by name: a name is a draft,
 * a directory, or the file of a record's value that the index (tree.c)
 * finds by the name's record name (a key: the name without its field's
 * extension). A new name makes a draft that fills that record in or makes
 * one named so; a draft in a dataset of keys whose name makes no field's
 * file is a temporary file until renamed. Renaming a record's file renames
 * the record (paths) or moves the value between keys; removing the last
 * value of a record removes the record. A directory is made in the index
 * (and one written in is kept) for as long as the mount; renaming one is
 * EXDEV (mv copies and removes), and between tree/ and a field directory.
 *
 * Sections: resolving, creating, removing, renaming, attributes.
 */
#include "write_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- resolving ---- */

enum what {
	W_NONE,   /* nothing by that name */
	W_DRAFT,  /* *d, a draft (stored or not) or a directory (d->kind WN_DIR) */
	W_RECORD, /* *id, a record with a value: its own name, or an alias (*alias) */
	W_ID,     /* *id, a record's own name without a value, or the next id's */
	W_DIR,    /* a directory of tree/ */
};

/* Where a name goes: a directory files are written in, and for the name
 * the field its value is of (in tree/ the name says it). */
struct place {
	bool tree;            /* a directory of tree/ */
	unsigned field;
	bool fieldless;       /* tree/ of keys: the name makes no field's file */
	bool text;            /* tree/ of keys: a class as decimal text */
};

/* Where @name in directory @parent goes: 0, or -EPERM (no directory files
 * are written in). Under the names lock and names_lock. */
static int place_of(struct zrfs *fs, fuse_ino_t parent, const char *name, struct place *p)
{
	size_t key;

	*p = (struct place){0};
	if (zrfs_dir_field(fs, parent, &p->field))
		return 0;
	if (!zrfs_dir_tree(fs, parent))
		return -EPERM;
	p->tree = true;
	if (zr_names_field_of(fs->writes->ds, &fs->names, name, strlen(name), &p->field, &key) < 0) {
		p->fieldless = true; /* a key's temporary file */
		p->field = 0;
		return 0;
	}
	p->text = zrfs_tree_text(fs, p->field);
	return 0;
}

/* Whether @name, at place @p, is a file name that can never be stored: in
 * a tree of keys, a key whose extension names no field (s0.png without a
 * field png). Names without an extension, and dot names, are temporary
 * files until renamed (mkstemp's, vim's probe, rsync's). */
static bool no_field_ever(const struct place *p, const char *name)
{
	return p->fieldless && !zrfs_name_hidden(name) && strchr(name, '.');
}

/* What @name in directory @parent (at place @p) is to the writer (under
 * the names lock and names_lock; the writer's state is the one the mount
 * shows, or about to: every change is made under w->lock and shown before
 * it is let go). Records' own names are in the field's directory, and in
 * tree/ by name. */
static enum what resolve(struct zrfs *fs, fuse_ino_t parent, const struct place *p,
			 const char *name, struct wnode **d, uint64_t *id, bool *alias)
{
	struct zrfs_writes *w = fs->writes;
	uint64_t n = zr_length(w->ds);
	size_t key;
	unsigned field;

	*alias = false;
	if ((*d = zrfs_draft_find(w, parent, name, 0)) != NULL)
		return W_DRAFT;
	if (p->tree) {
		if (zrfs_tree_subdir(fs, parent, name))
			return W_DIR;
		if (p->fieldless ||
		    zr_names_field_of(w->ds, &fs->names, name, strlen(name), &field, &key) < 0 ||
		    zrfs_tree_find(fs, parent, name, key, id) < 0 || *id >= n)
			return W_NONE;
		return zr_present(w->ds, p->field, *id) == 1 ? W_RECORD : W_ID;
	}
	if (zrfs_alias_find(w, parent, name, id) == 0)
		return *alias = true, W_RECORD;
	if (parent != ZRFS_INO_DIR + p->field ||
	    zrfs_record_name_parse(fs, p->field, name, n + 1, id) < 0)
		return W_NONE;
	return *id < n && zr_present(w->ds, p->field, *id) == 1 ? W_RECORD : W_ID;
}

/* Take the names lock, then names_lock (the order write_i.h gives), and
 * let go of both. */
static void names_lock(struct zrfs *fs)
{
	zrfs_names_begin(fs);
	pthread_mutex_lock(&fs->writes->names_lock);
}

static void names_unlock(struct zrfs *fs)
{
	pthread_mutex_unlock(&fs->writes->names_lock);
	zrfs_names_end(fs);
}

/* Keep @dir while the mount lives if it is a directory of tree/ files are
 * written in (before either lock is taken). */
/* Whether @dir is a directory number of tree/ (not whether it is there). */
static bool tree_dir_ino(const struct zrfs *fs, fuse_ino_t dir)
{
	return fs->tree && (dir & ~ZRFS_GEN_MASK) == ZRFS_INO_TREE_DIR;
}

static void hold_dir(struct zrfs *fs, fuse_ino_t dir)
{
	if (tree_dir_ino(fs, dir))
		zrfs_tree_hold(fs, dir);
}

/* A name came or went in directory @dir through this mount: a directory of
 * tree/ takes the time now, as a native one does, whenever its new files
 * are committed (rsync -a, which sets a directory's time once its files
 * are in, then finds it unchanged); a field's directory shows the commit's.
 * The time of @dir now, in @ts when not NULL. */
static void dir_changed(struct zrfs *fs, fuse_ino_t dir, struct timespec *ts)
{
	struct timespec now;

	if (!tree_dir_ino(fs, dir))
		return;
	clock_gettime(CLOCK_REALTIME, &now);
	if (zrfs_tree_touch(fs, dir, now) == 0 && ts)
		*ts = now;
}

/* @name's path below its field's directory, for directory @parent (under
 * names_lock): 0 or -ENAMETOOLONG. */
static int path_of(struct zrfs_writes *w, fuse_ino_t parent, const char *name, char *buf,
		   size_t cap)
{
	struct wnode *dir = zrfs_node_dir(w, parent);
	size_t len = strlen(name), at = 0;
	int rc;

	if (dir) {
		if ((rc = zrfs_node_path(w, dir, buf, cap)) < 0)
			return rc;
		at = strlen(buf);
		buf[at++] = '/';
	}
	if (at + len + 1 > cap)
		return -ENAMETOOLONG;
	memcpy(buf + at, name, len + 1);
	return 0;
}

/* ---- creating ---- */

/* Make draft @d of place @p in directory @parent (tree/: its directory's
 * path, its field, whether it has one). Under the names lock and
 * names_lock. 0 or -ENOMEM, -ENAMETOOLONG. */
static int draft_place(struct zrfs *fs, struct wnode *d, fuse_ino_t parent, const struct place *p)
{
	char path[4 * ZRFS_NAME_MAX];
	int rc;

	d->tree = p->tree;
	d->fieldless = p->fieldless;
	d->text = p->text;
	d->field = p->field;
	if (!p->tree)
		return 0;
	if ((rc = zrfs_tree_path(fs, parent, path, sizeof path)) < 0)
		return rc;
	free(d->dirpath);
	return (d->dirpath = strdup(path)) ? 0 : -ENOMEM;
}

/* A new draft (a file, or a directory: @kind) @name in @parent at place
 * @p, filling record @target in (NO_ID: a new one); in the tables, counted
 * as handed to the kernel once, with one reference for the caller. Under
 * the names lock and names_lock. 0 or a negative code. */
static int new_draft(struct zrfs *fs, fuse_ino_t parent, const struct place *p, const char *name,
		     enum wnode_kind kind, uint64_t target, pid_t maker, struct wnode **out)
{
	struct zrfs_writes *w = fs->writes;
	char esc[ZRFS_LOG_NAME_MAX];
	struct wnode *d;
	int rc;

	*out = NULL;
	if (kind == WN_DRAFT ? w->ndrafts >= DRAFTS_MAX : w->ndirs >= DIRS_MAX) {
		fuse_log(FUSE_LOG_ERR, "zrfs: %s: %s/%s: %d new %s are not stored yet: %s\n",
			 fs->dataset, p->tree ? ZRFS_TREE_NAME : fs->fields[p->field].name,
			 zrfs_log_name(name, esc, sizeof esc),
			 kind == WN_DRAFT ? DRAFTS_MAX : DIRS_MAX,
			 kind == WN_DRAFT ? "files" : "directories",
			 kind == WN_DRAFT ? "close some first" : "remove some first");
		return -ENOSPC;
	}
	if (!(d = zrfs_node_new(p->field, kind, target)) || !(d->name = strdup(name)) ||
	    (rc = draft_place(fs, d, parent, p)) < 0) {
		rc = d && d->name ? rc : -ENOMEM;
		zrfs_node_put(d);
		return rc;
	}
	d->parent = parent;
	/* a new file is not stored, even empty; its maker's death by a signal
	 * drops it */
	d->changed = kind == WN_DRAFT;
	d->loaded = true; /* its value is its own, also once it is a record's */
	d->shaper = maker;
	if ((rc = zrfs_draft_add(w, d)) < 0) {
		zrfs_node_put(d);
		return rc;
	}
	zrfs_inode_looked_up(w, d->ino); /* the reply hands it out */
	*out = d;
	return 0;
}

void zrfs_write_create(fuse_req_t req, struct zrfs *fs, fuse_ino_t parent, const char *name,
		       struct fuse_file_info *fi)
{
	struct zrfs_writes *w = fs->writes;
	struct fuse_entry_param e;
	struct whandle *h = NULL;
	struct wnode *d = NULL, *old;
	struct zrfs_view *v;
	struct place p;
	uint64_t id;
	bool alias;
	int rc;

	if (strlen(name) > ZRFS_NAME_MAX) { /* FUSE passes up to 1024 */
		fuse_reply_err(req, ENAMETOOLONG);
		return;
	}
	hold_dir(fs, parent);
	names_lock(fs);
	if ((rc = place_of(fs, parent, name, &p)) == 0 && no_field_ever(&p, name)) {
		rc = -EPERM;
	} else if (rc == 0) {
		/* new files go into field directories and tree/: a record's name
		 * without a value fills it in; the next id's, or any other name,
		 * is a new record (at the next id when stored) */
		enum what what = resolve(fs, parent, &p, name, &old, &id, &alias);
		rc = what == W_DRAFT || what == W_RECORD || what == W_DIR
			     ? -EEXIST
			     : new_draft(fs, parent, &p, name, WN_DRAFT,
					 what == W_ID && id < zr_length(w->ds) ? id : NO_ID,
					 fuse_req_ctx(req)->pid, &d);
	}
	if (rc == 0)
		d->handles++; /* the handle's, made next */
	names_unlock(fs);
	if (rc == 0 && !(h = zrfs_handle_new(fs, d, d->ino, fuse_req_ctx(req)->pid, false)))
		rc = -ENOMEM;
	if (rc < 0) {
		if (d) {
			pthread_mutex_lock(&w->names_lock);
			d->handles--;
			zrfs_draft_unlist(w, d);
			zrfs_inode_forget(w, d->ino, 1);
			pthread_mutex_unlock(&w->names_lock);
		}
		zrfs_node_put(d);
		zrfs_reply_err(req, rc);
		return;
	}
	dir_changed(fs, parent, NULL);
	memset(&e, 0, sizeof e);
	v = zrfs_names_begin(fs);
	e.ino = d->ino;
	zrfs_file_attr(fs, v, e.ino, 0, &e.attr);
	zrfs_names_end(fs);
	zrfs_node_put(d); /* the handle and the tables hold it */
	/* the name is not cached: it is the writer's until it is stored; the
	 * attributes are (the kernel keeps the size as it writes), which spares
	 * a GETATTR per file to cp and its like */
	e.entry_timeout = 0;
	e.attr_timeout = fs->opts.timeout;
	fi->fh = (uintptr_t)h;
	fi->direct_io = 1;
	if (fuse_reply_create(req, &e, fi) != 0) { /* the creator is gone */
		pthread_mutex_lock(&w->names_lock);
		zrfs_inode_forget(w, e.ino, 1);
		pthread_mutex_unlock(&w->names_lock);
		zrfs_handle_drop(fs, h);
	}
}

void zrfs_write_mkdir(fuse_req_t req, struct zrfs *fs, fuse_ino_t parent, const char *name)
{
	struct zrfs_writes *w = fs->writes;
	struct fuse_entry_param e;
	struct wnode *d = NULL, *old;
	struct zrfs_view *v;
	struct place p;
	uint64_t id;
	bool alias;
	int rc;

	if (strlen(name) > ZRFS_NAME_MAX) {
		fuse_reply_err(req, ENAMETOOLONG);
		return;
	}
	memset(&e, 0, sizeof e);
	names_lock(fs);
	/* the root's and the views' directories are the dataset's */
	if ((rc = place_of(fs, parent, name, &p)) == 0 &&
	    resolve(fs, parent, &p, name, &old, &id, &alias) != W_NONE)
		rc = -EEXIST;
	else if (rc == 0 && !p.tree)
		rc = new_draft(fs, parent, &p, name, WN_DIR, NO_ID, 0, &d);
	names_unlock(fs);
	/* in tree/: a directory of the index, kept as long as the mount */
	if (rc == 0 && p.tree)
		rc = zrfs_tree_mkdir(fs, parent, name, &e.ino);
	if (rc < 0) {
		zrfs_reply_err(req, rc);
		return;
	}
	v = zrfs_names_begin(fs);
	e.ino = d ? d->ino : e.ino;
	zrfs_dir_attr(fs, v, e.ino, &e.attr);
	zrfs_names_end(fs);
	zrfs_node_put(d);
	if (p.tree) { /* a directory of the index: cached as the others */
		dir_changed(fs, parent, NULL);
		dir_changed(fs, e.ino, &e.attr.st_mtim);
		e.attr.st_atim = e.attr.st_mtim;
		e.entry_timeout = e.attr_timeout = fs->opts.timeout;
		fuse_reply_entry(req, &e);
		return;
	}
	if (fuse_reply_entry(req, &e) != 0) { /* never cached: the writer's */
		pthread_mutex_lock(&w->names_lock);
		zrfs_inode_forget(w, e.ino, 1);
		pthread_mutex_unlock(&w->names_lock);
	}
}

/* ---- removing ---- */

/* Take draft @d away (under names_lock): its name goes, its handles write
 * to a file no name has. */
static void drop_draft(struct zrfs_writes *w, struct wnode *d)
{
	zrfs_publish_unready(w, d);
	d->detached = true;
	if (d->kind == WN_DIR)
		zrfs_aliases_drop_in(w, d->ino);
	zrfs_draft_unlist(w, d);
}

/* Commit the drafts stored and not committed yet (a commit failed), under
 * w->lock, so that the names below see records: 0 or a negative code. */
static int settle_stored(struct zrfs *fs)
{
	struct zrfs_writes *w = fs->writes;
	bool any = false;

	pthread_mutex_lock(&w->names_lock);
	for (struct wnode *d = w->first; d && !any; d = d->next)
		any = d->stored != NO_ID && !d->gen;
	pthread_mutex_unlock(&w->names_lock);
	if (!any)
		return 0;
	pthread_mutex_unlock(&w->lock); /* the group takes it */
	int64_t gen = zrfs_publish_group(fs, NULL);
	pthread_mutex_lock(&w->lock);
	return gen < 0 ? (int)gen : 0;
}

void zrfs_write_unlink(fuse_req_t req, struct zrfs *fs, fuse_ino_t parent, const char *name)
{
	struct zrfs_writes *w = fs->writes;
	struct wnode *d;
	struct place p;
	uint64_t id;
	bool alias;
	int64_t rc = 0;
	enum what what = W_NONE;

	names_lock(fs);
	if ((rc = place_of(fs, parent, name, &p)) < 0)
		;
	else if (((what = resolve(fs, parent, &p, name, &d, &id, &alias)) == W_DRAFT &&
		  d->kind == WN_DIR) || what == W_DIR)
		rc = -EISDIR;
	else if (what == W_DRAFT && d->stored == NO_ID)
		drop_draft(w, d); /* never stored: nothing to commit */
	else if (what == W_NONE || what == W_ID)
		rc = -ENOENT;
	names_unlock(fs);
	if (rc < 0 || (what == W_DRAFT && rc == 0 && d->stored == NO_ID)) {
		if (rc == 0)
			dir_changed(fs, parent, NULL);
		zrfs_reply_status(req, rc);
		return;
	}
	/* a record's file: its value goes, committed at once (in tree/, with
	 * the record when it was its last) */
	pthread_mutex_lock(&w->lock);
	if ((rc = settle_stored(fs)) == 0) {
		names_lock(fs);
		what = resolve(fs, parent, &p, name, &d, &id, &alias);
		if (alias)
			zrfs_alias_drop(w, parent, name);
		names_unlock(fs);
		rc = what == W_RECORD ? zrfs_publish_remove(fs, p.field, id, p.tree) : -ENOENT;
	}
	pthread_mutex_unlock(&w->lock);
	if (rc >= 0)
		dir_changed(fs, parent, NULL);
	/* the kernel holds the directory's lock: it is told of the names
	 * that changed just after this answer, not before */
	zrfs_reply_status(req, rc);
}

/* Whether a draft is in directory @dir (under names_lock). */
static bool drafts_in(struct zrfs_writes *w, fuse_ino_t dir)
{
	for (struct wnode *d = w->first; d; d = d->next)
		if (d->parent == dir)
			return true;
	return false;
}

void zrfs_write_rmdir(fuse_req_t req, struct zrfs *fs, fuse_ino_t parent, const char *name)
{
	struct zrfs_writes *w = fs->writes;
	struct wnode *d;
	struct place p;
	uint64_t id;
	bool alias;
	int rc = 0;
	enum what what = W_NONE;

	names_lock(fs);
	if ((rc = place_of(fs, parent, name, &p)) < 0)
		; /* a field's directory, a view's */
	else if ((what = resolve(fs, parent, &p, name, &d, &id, &alias)) == W_DIR)
		/* of tree/: empty of records (tree.c) and of files being written */
		rc = drafts_in(w, zrfs_tree_subdir(fs, parent, name)) ? -ENOTEMPTY : 0;
	else if (what != W_DRAFT)
		rc = alias || what == W_RECORD || parent == ZRFS_INO_DIR + p.field ? -ENOTDIR
										   : -ENOENT;
	else if (d->kind != WN_DIR)
		rc = -ENOTDIR;
	else if (d->children)
		rc = -ENOTEMPTY;
	else
		drop_draft(w, d);
	names_unlock(fs);
	if (rc == 0 && what == W_DIR)
		rc = zrfs_tree_rmdir(fs, parent, name);
	if (rc == 0)
		dir_changed(fs, parent, NULL);
	zrfs_reply_status(req, rc);
}

/* ---- renaming ---- */

/* Whether directory @dir is @ino or inside it (under names_lock). */
static bool inside(struct zrfs_writes *w, fuse_ino_t dir, fuse_ino_t ino)
{
	for (int depth = 0; depth < ZRFS_NAME_MAX; depth++) {
		struct wnode *d;
		if (dir == ino)
			return true;
		if (!(d = zrfs_node_dir(w, dir)))
			return false;
		dir = d->parent;
	}
	return true;
}

/* Move draft @d (a file or a directory) to @newname in @newparent, which
 * is @to at place @tp (under the names lock and names_lock): nothing is
 * committed; onto a record's name, the draft stands in for that record's
 * file until it is committed. 0 or a negative code. */
static int rename_draft(struct zrfs *fs, struct wnode *d, fuse_ino_t newparent,
			const struct place *tp, const char *newname, enum what to, struct wnode *td,
			uint64_t tid, bool talias)
{
	struct zrfs_writes *w = fs->writes;
	uint64_t target = NO_ID;
	struct winode *i;
	int rc;

	if (td == d)
		return 0;
	if (d->kind == WN_DIR) { /* onto nothing, or an empty directory */
		if (to == W_RECORD || (to == W_DRAFT && td->kind != WN_DIR))
			return -ENOTDIR;
		if (to == W_DRAFT && td->children)
			return -ENOTEMPTY;
		if (inside(w, newparent, d->ino))
			return -EINVAL; /* into itself */
	} else if ((to == W_DRAFT && td->kind == WN_DIR) || to == W_DIR) {
		return -EISDIR;
	}
	if (to == W_DRAFT) {
		target = td->stored != NO_ID ? td->stored : td->id;
		drop_draft(w, td); /* replaced */
	} else if (to == W_RECORD || (to == W_ID && tid < zr_length(w->ds))) {
		target = tid;
	}
	if ((rc = zrfs_draft_rename(w, d, newparent, newname)) < 0)
		return rc;
	if (d->kind == WN_DIR)
		return 0;
	if (tp->tree) { /* in tree/ the name says the field */
		zrfs_draft_target(w, d, NO_ID);
		if ((rc = draft_place(fs, d, newparent, tp)) < 0)
			return rc;
		if ((i = zrfs_inode_find(w, d->ino)) != NULL)
			i->field = d->field, i->text = d->text;
	}
	if (talias)
		zrfs_alias_drop(w, newparent, newname); /* the name is the draft's now */
	zrfs_draft_target(w, d, target);
	if (target != NO_ID) /* descriptors open on the replaced file write nowhere */
		zrfs_nodes_detach_record(w, d->field, target);
	if (zrfs_node_hidden(w, d)) {
		zrfs_publish_unready(w, d);
	} else if (!d->handles) {
		zrfs_publish_ready(fs, d); /* closed already: as at its close */
	}
	return 0;
}

/* Whether record @id has no value but that of @field (its name and time
 * aside). */
static bool alone(struct zrfs *fs, unsigned field, uint64_t id)
{
	for (unsigned f = 0; f < fs->nfields; f++)
		if (f != field && (int)f != fs->names.field && (int)f != fs->names.mtime &&
		    zr_present(fs->writes->ds, f, id) != 0)
			return false;
	return true;
}

/* Move the file of record @id of @field (w->lock held, the drafts stored
 * are committed) to @newname in @newparent, which is @to: onto a record's
 * name its value moves there; onto another name, to a new record named so
 * (as cp and rm would: its other fields stay with @id), unless it is a
 * record made through the mount with no other value, which is only named
 * so. In tree/ a record is its name: in a tree of paths the record is
 * renamed (onto another's name, that one goes), in one of keys the value
 * moves between keys, and a key with no other value is renamed. */
static int64_t rename_record(struct zrfs *fs, unsigned field, uint64_t id, fuse_ino_t parent,
			     const char *name, bool alias, fuse_ino_t newparent,
			     const struct place *tp, const char *newname, enum what to,
			     struct wnode *td, uint64_t tid)
{
	struct zrfs_writes *w = fs->writes;
	char path[4 * ZRFS_NAME_MAX];
	bool only = (id >= w->made_from || tp->tree) && alone(fs, field, id);
	int64_t rc;

	names_lock(fs);
	if (to == W_DRAFT) { /* replaced: what it would have replaced is the target */
		tid = td->stored != NO_ID ? td->stored : td->id;
		to = tid != NO_ID ? W_RECORD : W_NONE;
		drop_draft(w, td);
	}
	if (alias)
		zrfs_alias_drop(w, parent, name);
	rc = tp->tree ? zrfs_tree_path(fs, newparent, path, sizeof path)
		      : path_of(w, newparent, newname, path, sizeof path);
	if (rc == 0 && tp->tree) { /* the new name's path below tree/ */
		size_t at = strlen(path);
		rc = snprintf(path + at, sizeof path - at, "%s%s", at ? "/" : "", newname) <
				     (int)(sizeof path - at)
			     ? 0
			     : -ENAMETOOLONG;
	}
	names_unlock(fs);
	if (rc < 0)
		return rc;
	if (tp->tree && !fs->names.key) /* the record is the file */
		return zrfs_publish_rename(fs, id, path, to == W_RECORD || to == W_ID ? tid : NO_ID);
	if (to == W_RECORD || to == W_ID)
		return zrfs_publish_move(fs, field, id, tid, NULL, tp->tree);
	if (only) { /* a new file's record, or a key's only value: renamed */
		rc = zrfs_publish_name(fs, field, id, path);
	} else {
		tid = zr_length(w->ds);
		rc = zrfs_publish_move(fs, field, id, tid, path, tp->tree);
	}
	if (rc >= 0 && !tp->tree) {
		pthread_mutex_lock(&w->names_lock);
		zrfs_alias_set(w, newparent, field, newname, only ? id : tid);
		pthread_mutex_unlock(&w->names_lock);
	}
	return rc;
}

void zrfs_write_rename(fuse_req_t req, struct zrfs *fs, fuse_ino_t parent, const char *name,
		       fuse_ino_t newparent, const char *newname, unsigned flags)
{
	struct zrfs_writes *w = fs->writes;
	struct wnode *d, *td;
	struct place p, tp;
	uint64_t id, tid;
	bool alias, talias, record = false;
	enum what what = W_NONE, to = W_NONE;
	int64_t rc = 0;

	if (flags & ~(unsigned)RENAME_NOREPLACE) { /* RENAME_EXCHANGE, RENAME_WHITEOUT */
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (strlen(newname) > ZRFS_NAME_MAX) {
		fuse_reply_err(req, ENAMETOOLONG);
		return;
	}
	hold_dir(fs, newparent);
	/* a draft's rename changes only the tables: no commit, no writer */
	names_lock(fs);
	if ((rc = place_of(fs, parent, name, &p)) < 0 ||
	    (rc = place_of(fs, newparent, newname, &tp)) < 0) {
		;
	} else if (p.tree != tp.tree || (!p.tree && p.field != tp.field)) {
		rc = -EXDEV; /* between fields, or tree/: mv copies and removes instead */
	} else {
		what = resolve(fs, parent, &p, name, &d, &id, &alias);
		to = resolve(fs, newparent, &tp, newname, &td, &tid, &talias);
		record = what == W_RECORD || (what == W_DRAFT && d->stored != NO_ID);
		if (what == W_NONE || what == W_ID)
			rc = -ENOENT;
		else if (what == W_DIR)
			rc = -EXDEV; /* a directory of tree/: mv copies and removes */
		else if (no_field_ever(&tp, newname))
			rc = -EPERM; /* a file no field can store */
		else if ((flags & RENAME_NOREPLACE) &&
			 (to == W_DRAFT || to == W_RECORD || to == W_DIR))
			rc = -EEXIST;
		else if (record && ((to == W_DRAFT && td->kind == WN_DIR) || to == W_DIR))
			rc = -EISDIR;
		else if (record && p.tree && (tp.fieldless || tp.field != (what == W_DRAFT
									    ? d->field
									    : p.field)))
			rc = -EXDEV; /* a value of another field, or of none */
		else if (!record)
			rc = rename_draft(fs, d, newparent, &tp, newname, to, td, tid, talias);
	}
	names_unlock(fs);
	if (rc == 0 && record) {
		pthread_mutex_lock(&w->lock);
		if ((rc = settle_stored(fs)) == 0) {
			names_lock(fs);
			what = resolve(fs, parent, &p, name, &d, &id, &alias);
			to = resolve(fs, newparent, &tp, newname, &td, &tid, &talias);
			if (what == W_DRAFT) /* a draft again, by another's rename meanwhile */
				rc = rename_draft(fs, d, newparent, &tp, newname, to, td, tid,
						  talias);
			else if (what != W_RECORD)
				rc = -ENOENT;
			else if (to == W_RECORD && tid == id && alias) /* onto its own other name */
				zrfs_alias_drop(w, parent, name);
			names_unlock(fs);
			if (what == W_RECORD && !(to == W_RECORD && tid == id))
				rc = rename_record(fs, p.field, id, parent, name, alias, newparent,
						   &tp, newname, to, td, tid);
		}
		pthread_mutex_unlock(&w->lock);
	}
	if (rc >= 0) {
		dir_changed(fs, parent, NULL);
		if (newparent != parent)
			dir_changed(fs, newparent, NULL);
	}
	/* the kernel holds the directories' locks: it is told of the names
	 * that changed just after this answer */
	zrfs_reply_status(req, rc);
}

/* ---- attributes ---- */

/* The times a SETATTR asks for, answered with attributes @st: a file's,
 * where the dataset keeps times (zr_names.mtime), kept with what is being
 * written or stored now; a directory of tree/'s, for as long as the mount;
 * anything else's accepted and ignored (the commit's time shows). */
static void set_times(fuse_req_t req, struct zrfs *fs, fuse_ino_t ino, const struct stat *attr,
		      int to_set, struct stat *st)
{
	struct zrfs_writes *w = fs->writes;
	struct timespec ts;
	struct wnode *n;
	int64_t ns, rc = 0;
	int err;

	if (!zrfs_asked_mtime(attr, to_set, &ns, &ts)) {
		fuse_reply_attr(req, st, 0);
		return;
	}
	if (S_ISDIR(st->st_mode)) {
		if (zrfs_tree_touch(fs, ino, ts) == 0)
			st->st_mtim = st->st_atim = ts;
		fuse_reply_attr(req, st, 0);
		return;
	}
	if (fs->names.mtime >= 0 && (n = zrfs_node_of_ino(fs, ino, false, &err)) != NULL) {
		if ((rc = zrfs_publish_time(fs, n, ns)) >= 0)
			st->st_mtim = st->st_atim = ts;
		pthread_mutex_lock(&w->names_lock);
		zrfs_node_release(w, n);
		pthread_mutex_unlock(&w->names_lock);
		zrfs_node_put(n);
	}
	if (rc < 0)
		zrfs_reply_err(req, (int)rc);
	else if (rc > 0)
		zrfs_follow_answer(fs, (uint64_t)rc, req, st);
	else
		fuse_reply_attr(req, st, 0);
}

void zrfs_write_setattr(fuse_req_t req, struct zrfs *fs, fuse_ino_t ino, const struct stat *attr,
			int to_set, const struct stat *now)
{
	struct zrfs_writes *w = fs->writes;
	pid_t pid = fuse_req_ctx(req)->pid;
	struct stat st = *now;
	struct wnode *n;
	int64_t rc = 0;
	bool record;

	if (!(to_set & FUSE_SET_ATTR_SIZE)) {
		/* a mode or owner of a file at rest: refused (a new file's:
		 * ignored, as cp -p and rsync -a set them before it is stored) */
		if ((((to_set & FUSE_SET_ATTR_MODE) && (attr->st_mode & 07777) != (now->st_mode & 07777)) ||
		     ((to_set & FUSE_SET_ATTR_UID) && attr->st_uid != now->st_uid) ||
		     ((to_set & FUSE_SET_ATTR_GID) && attr->st_gid != now->st_gid)) &&
		    !(ino & ZRFS_INO_STAGED))
			fuse_reply_err(req, EPERM);
		else
			set_times(req, fs, ino, attr, to_set, &st);
		return;
	}
	st.st_size = attr->st_size;
	st.st_blocks = (st.st_size + 511) / 512;
	if ((n = zrfs_handle_fresh(fs, ino, pid)) != NULL) {
		/* open(O_TRUNC): the handle the same call just opened */
		rc = zrfs_node_truncate(fs, n, (uint64_t)attr->st_size, pid, true);
		zrfs_node_put(n);
		if (rc < 0)
			zrfs_reply_err(req, (int)rc);
		else
			fuse_reply_attr(req, &st, 0);
		return;
	}
	/* truncate(2) of a file by its name: a change of its own, stored now
	 * (a record), unless it is open for writing (its last close stores it) */
	if (!(n = zrfs_node_of_ino(fs, ino, false, (int *)&rc))) {
		zrfs_reply_err(req, (int)rc);
		return;
	}
	pthread_mutex_lock(&w->lock);
	rc = zrfs_node_truncate(fs, n, (uint64_t)attr->st_size, pid, false);
	pthread_mutex_lock(&w->names_lock);
	record = n->kind == WN_RECORD && !n->detached && n->handles == 0;
	pthread_mutex_unlock(&w->names_lock);
	if (rc == 0 && record) {
		pthread_mutex_lock(&n->lock);
		rc = zrfs_publish_record(fs, n);
		pthread_mutex_unlock(&n->lock);
	}
	pthread_mutex_lock(&w->names_lock);
	zrfs_node_release(w, n);
	pthread_mutex_unlock(&w->names_lock);
	pthread_mutex_unlock(&w->lock);
	zrfs_node_put(n);
	if (rc < 0)
		zrfs_reply_err(req, (int)rc);
	else if (rc > 0)
		zrfs_follow_answer(fs, (uint64_t)rc, req, &st);
	else
		fuse_reply_attr(req, &st, 0);
}

void zrfs_write_fsyncdir(fuse_req_t req, struct zrfs *fs)
{
	/* a directory's entries are durable once its new files are committed:
	 * all of them, at once (sync DIR). The mount shows them when this
	 * returns; the kernel, which holds the directory's lock meanwhile, is
	 * told of the names that changed just after. */
	int64_t gen = zrfs_publish_group(fs, NULL);

	zrfs_reply_status(req, gen);
}
