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
 * the daemon's tables only; renames of records are committed at once
 * (publish.c). A removal of a record's file waits for a group, as a new
 * file does (rm -rf of many files is not a commit each): its name is gone
 * at once (zrfs_gone_add: lookups and listings skip it, names resolve
 * around it), and any change that needs the records as the writer has
 * them (a rename, a removal of another kind, a tree/ directory removed)
 * commits the removals waiting first. A rename between field directories
 * is EXDEV (mv then copies and removes); anything else outside them is
 * EPERM.
 *
 * tree/ (a dataset that keeps names) is written by name: a name is a draft,
 * a directory, or the file of a record's value that the index (tree.c)
 * finds by the name's record name (a key: the name without its field's
 * extension). A new name makes a draft that fills that record in or makes
 * one named so; a draft in a dataset of keys whose name makes no field's
 * file is a temporary file until renamed. Renaming a record's file renames
 * the record (paths) or moves the value between keys; removing the last
 * value of a record removes the record. A directory is made in the index
 * (and one written in is kept) for as long as the mount; renaming one
 * moves it in the index and renames the records below it (rename.c). A
 * rename between tree/ and a field directory is EXDEV.
 *
 * Renames and attributes are rename.c's.
 *
 * Sections: resolving, creating, removing.
 */
#include "write_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- resolving ---- */

/* Where @name in directory @parent goes: 0, or -EPERM (no directory files
 * are written in). Under the names lock and names_lock. */
int zrfs_place_of(struct zrfs *fs, fuse_ino_t parent, const char *name, struct place *p)
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
bool zrfs_no_field_ever(const struct place *p, const char *name)
{
	return p->fieldless && !zrfs_name_hidden(name) && strchr(name, '.');
}

/* Whether record @id of @ds has a value of @field: a file, unless it
 * was removed and its removal is waiting for its group. */
static bool value_in(struct zrfs *fs, zr_dataset *ds, unsigned field, uint64_t id)
{
	return zr_present(ds, field, id) == 1 &&
	       !zrfs_gone_has(fs->writes, field, id, zrfs_rec_version(fs, field, id),
			      zrfs_names_view(fs)->gen);
}

/* What @name in directory @parent (at place @p) is, with records as @ds
 * (of @n records) has them. Records' own names are in the field's
 * directory, and in tree/ by name. */
static enum what resolve_in(struct zrfs *fs, fuse_ino_t parent, const struct place *p,
			    const char *name, struct wnode **d, uint64_t *id, bool *alias,
			    zr_dataset *ds, uint64_t n)
{
	struct zrfs_writes *w = fs->writes;
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
		return value_in(fs, ds, p->field, *id) ? W_RECORD : W_ID;
	}
	if (zrfs_alias_find(w, parent, name, UINT64_MAX, id) == 0)
		return *alias = true, W_RECORD;
	if (parent != ZRFS_INO_DIR + p->field ||
	    zrfs_record_name_parse(fs, p->field, name, n + 1, id) < 0)
		return W_NONE;
	return *id < n && value_in(fs, ds, p->field, *id) ? W_RECORD : W_ID;
}

/* Under the names lock and names_lock alone: records as the mount shows
 * them, the view the names lock holds, whose names (tree/'s index) they
 * match; not the writer's state, which another request may be changing
 * under w->lock (a removal moves the last record into the hole before its
 * commit is shown: a name resolved meanwhile was ENOENT). */
enum what zrfs_name_resolve(struct zrfs *fs, fuse_ino_t parent, const struct place *p,
			    const char *name, struct wnode **d, uint64_t *id, bool *alias)
{
	struct zrfs_view *v = zrfs_names_view(fs);

	return resolve_in(fs, parent, p, name, d, id, alias, v->ds, v->n);
}

/* Under w->lock too: the writer's state, which is the view's once a
 * change is shown (and the truth where no follower shows commits). */
enum what zrfs_name_resolve_held(struct zrfs *fs, fuse_ino_t parent, const struct place *p,
				 const char *name, struct wnode **d, uint64_t *id, bool *alias)
{
	zr_dataset *ds = fs->writes->ds;

	return resolve_in(fs, parent, p, name, d, id, alias, ds, zr_length(ds));
}

/* Take the names lock, then names_lock (the order write_i.h gives), and
 * let go of both. */
void zrfs_names_lock(struct zrfs *fs)
{
	zrfs_names_begin(fs);
	pthread_mutex_lock(&fs->writes->names_lock);
}

void zrfs_names_unlock(struct zrfs *fs)
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

void zrfs_dir_keep(struct zrfs *fs, fuse_ino_t dir)
{
	if (tree_dir_ino(fs, dir))
		zrfs_tree_keep(fs, dir);
}

/* A name came or went in directory @dir through this mount: a directory of
 * tree/ takes the time now, as a native one does, whenever its new files
 * are committed (rsync -a, which sets a directory's time once its files
 * are in, then finds it unchanged); a field's directory shows the commit's.
 * The time of @dir now, in @ts when not NULL. */
int zrfs_dir_time(struct zrfs *fs, fuse_ino_t dir, struct timespec ts)
{
	struct zrfs_writes *w = fs->writes;
	int64_t ns = zr_time_ns(ts);
	struct wnode *d;
	int rc = 0;

	if (tree_dir_ino(fs, dir)) {
		if ((rc = zrfs_tree_touch(fs, dir, ts)) == 0)
			zrfs_tree_changed(fs);
		return rc;
	}
	/* a field directory, or one made in it: for the mount's life (make
	 * and rsync compare a directory's time with its files') */
	pthread_mutex_lock(&w->names_lock);
	if (dir >= ZRFS_INO_DIR && dir < ZRFS_INO_DIR + fs->nfields) {
		w->dir_time[dir - ZRFS_INO_DIR] = ns;
	} else if ((d = zrfs_node_dir(w, dir)) != NULL) {
		d->mtime = ns;
		d->mtime_set = true;
	} else {
		rc = -ENOENT;
	}
	pthread_mutex_unlock(&w->names_lock);
	return rc;
}

void zrfs_tree_changed(struct zrfs *fs)
{
	struct zrfs_writes *w = fs->writes;

	pthread_mutex_lock(&w->names_lock);
	if (!atomic_exchange(&w->tree_changed, true))
		pthread_cond_signal(&w->wake); /* the committer's clock: zrfs_tree_due_ms */
	pthread_mutex_unlock(&w->names_lock);
}

void zrfs_dir_changed(struct zrfs *fs, fuse_ino_t dir, struct timespec *ts)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	if (zrfs_dir_time(fs, dir, now) == 0 && ts)
		*ts = now;
}

void zrfs_write_dir_meta(struct zrfs *fs, unsigned field, struct stat *st)
{
	struct zrfs_writes *w = fs->writes;
	int64_t ns;

	if (!w || field >= ZR_FIELDS_MAX)
		return;
	pthread_mutex_lock(&w->names_lock);
	ns = w->dir_time[field];
	st->st_nlink = 2 + (nlink_t)w->dir_subdirs[field];
	pthread_mutex_unlock(&w->names_lock);
	if (ns) /* changed or set through the mount */
		zrfs_stat_mtime(st, ns, true);
}

/* The owner and group a name made in directory @parent by the caller of
 * @req takes: the caller's, but a set-group-ID directory's group (not
 * under the names lock). Whether @parent is set-group-ID. */
static bool maker(fuse_req_t req, struct zrfs *fs, fuse_ino_t parent, uint32_t owner[2])
{
	owner[0] = fuse_req_ctx(req)->uid;
	owner[1] = fuse_req_ctx(req)->gid;
	return zrfs_owners_kept(fs) && zrfs_tree_setgid(fs, parent, &owner[1]);
}

/* @name's path below its field's directory, for directory @parent (under
 * names_lock): 0 or -ENAMETOOLONG. */
int zrfs_path_of(struct zrfs_writes *w, fuse_ino_t parent, const char *name, char *buf,
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
int zrfs_draft_place(struct zrfs *fs, struct wnode *d, fuse_ino_t parent, const struct place *p)
{
	char path[ZRFS_PATH_MAX];
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
 * @p, filling record @target in (NO_ID: a new one); in the tables, its
 * number counted as handed to the kernel (the reply hands it: nothing may
 * take its meaning away meanwhile), with one reference for the caller.
 * Under the names lock and names_lock. 0 or a negative code. */
static int new_draft(struct zrfs *fs, fuse_ino_t parent, const struct place *p, const char *name,
		     enum wnode_kind kind, uint64_t target, pid_t maker, struct wnode **out)
{
	struct zrfs_writes *w = fs->writes;
	char esc[ZRFS_LOG_NAME_MAX];
	struct wnode *d;
	int rc;

	*out = NULL;
	if (kind == WN_DIR && w->ndirs >= DIRS_MAX) {
		if (zrfs_log_admit()) /* a loop of mkdirs */
			fuse_log(FUSE_LOG_ERR,
				 "zrfs: %s: %s/%s: %d new directories are not stored yet: "
				 "remove some first\n",
				 fs->dataset, p->tree ? ZRFS_TREE_NAME : fs->fields[p->field].name,
				 zrfs_log_name(name, esc, sizeof esc), DIRS_MAX);
		return -ENOSPC;
	}
	if (!(d = zrfs_node_new(p->field, kind, target)) || !(d->name = strdup(name)) ||
	    (rc = zrfs_draft_place(fs, d, parent, p)) < 0) {
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
	zrfs_node_touched(d); /* made now: its times */
	if (fs->names.atime >= 0) {
		d->atime = d->mtime;
		d->atime_set = true;
	}
	if ((rc = zrfs_draft_add(w, d)) < 0) {
		zrfs_node_put(d);
		return rc;
	}
	if ((rc = zrfs_inode_hand(fs, d->ino, &zrfs_writing)) < 0) {
		zrfs_draft_unlist(w, d);
		zrfs_node_put(d);
		return rc;
	}
	*out = d;
	return 0;
}

/* Before a new file is made: where a full group of new files waits to be
 * committed (the committer behind: a busy disk), commit it now, on this
 * request's thread, as writeback throttles a writer of dirty pages. New
 * files open are not bounded here: their values take memory, then private
 * files (the descriptor limit). 0, or the error of a group that failed (a
 * full disk: ENOSPC). */
static int make_room(struct zrfs *fs)
{
	struct zrfs_writes *w = fs->writes;
	bool full;
	int64_t gen;

	pthread_mutex_lock(&w->names_lock);
	full = w->nready >= DRAFTS_MAX;
	pthread_mutex_unlock(&w->names_lock);
	if (!full || (gen = zrfs_publish_group(fs, NULL)) >= 0)
		return 0;
	return (int)gen;
}

/* A new file @name of @mode in directory @parent: open for writing, its
 * handle in @fi (create), or (@fi NULL: mknod) closed at once, an empty
 * value as touch makes one. */
static void make_file(fuse_req_t req, struct zrfs *fs, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct zrfs_writes *w = fs->writes;
	struct fuse_entry_param e;
	struct whandle *h = NULL;
	struct wnode *d = NULL, *old;
	struct zrfs_view *v;
	struct place p;
	uint64_t id;
	bool alias, writer = false;
	int rc;

	if (strlen(name) > ZRFS_NAME_MAX) { /* FUSE passes up to 1024 */
		zrfs_reply_err(req, -ENAMETOOLONG);
		return;
	}
	if ((rc = make_room(fs)) < 0) {
		zrfs_reply_err(req, rc);
		return;
	}
	zrfs_dir_keep(fs, parent);
	uint32_t owner[2];
	maker(req, fs, parent, owner);
	zrfs_names_lock(fs);
	if (atomic_load(&w->ngone)) {
		/* a group may be moving records' ids this moment (a name that
		 * fills a record in would find the view's): the removals are
		 * committed first, the name resolved under the writer's lock */
		zrfs_names_unlock(fs);
		writer = true;
		if ((rc = (int)zrfs_lock_settled(fs)) < 0) {
			pthread_mutex_unlock(&w->lock);
			zrfs_reply_err(req, rc);
			return;
		}
		zrfs_names_lock(fs);
	}
	if ((rc = zrfs_place_of(fs, parent, name, &p)) == 0 && zrfs_no_field_ever(&p, name)) {
		rc = -EPERM;
	} else if (rc == 0) {
		/* new files go into field directories and tree/: a record's name
		 * without a value fills it in; the next id's, or any other name,
		 * is a new record (at the next id when stored) */
		enum what what = zrfs_name_resolve(fs, parent, &p, name, &old, &id, &alias);
		rc = what == W_DRAFT || what == W_RECORD || what == W_DIR
			     ? -EEXIST
			     : new_draft(fs, parent, &p, name, WN_DRAFT,
					 what == W_ID && id < zr_length(w->ds) ? id : NO_ID,
					 fuse_req_ctx(req)->pid, &d);
	}
	if (rc == 0) {
		d->handles++; /* the handle's, made next */
		/* its mode, where the dataset keeps modes (the umask applied by
		 * the kernel): the record's when it is stored */
		d->mode = S_IFREG | (mode & 07777);
		d->mode_set = fs->names.mode >= 0;
		/* and its maker's owner and group, where the dataset keeps them */
		d->uid = owner[0];
		d->gid = owner[1];
		d->owner_set = zrfs_owners_kept(fs);
	}
	zrfs_names_unlock(fs);
	if (writer)
		pthread_mutex_unlock(&w->lock);
	if (rc == 0 && !(h = zrfs_handle_new(fs, d, d->ino, fuse_req_ctx(req)->pid, false)))
		rc = -ENOMEM;
	if (rc < 0) {
		if (d) {
			pthread_mutex_lock(&w->names_lock);
			d->handles--;
			zrfs_draft_unlist(w, d);
			pthread_mutex_unlock(&w->names_lock);
			zrfs_inode_forget(fs, d->ino, 1); /* never handed */
		}
		zrfs_node_put(d);
		zrfs_reply_err(req, rc);
		return;
	}
	zrfs_dir_changed(fs, parent, NULL);
	memset(&e, 0, sizeof e);
	v = zrfs_names_begin(fs);
	e.ino = d->ino;
	zrfs_file_attr(fs, v, e.ino, 0, &e.attr);
	zrfs_names_end(fs);
	zrfs_node_meta(d, &e.attr);
	/* made set-user-ID by one without CAP_FSETID: its first write drops it */
	atomic_store(&h->drop_ids, zrfs_mode_after_write(req, &e.attr) != e.attr.st_mode);
	zrfs_node_put(d); /* the handle and the tables hold it */
	/* the name is not cached: it is the writer's until it is stored; the
	 * attributes are (the kernel keeps the size as it writes), which spares
	 * a GETATTR per file to cp and its like */
	e.entry_timeout = 0;
	e.attr_timeout = fs->opts.timeout;
	if (!fi) { /* mknod: stored as a close stores it, the number handed */
		zrfs_handle_close(fs, h);
		zrfs_reply_handed(req, fs, &e, NULL);
		return;
	}
	fi->fh = (uintptr_t)h;
	fi->direct_io = 1;
	if (zrfs_reply_handed(req, fs, &e, fi) != 0) /* the creator is gone */
		zrfs_handle_drop(fs, h);
}

void zrfs_write_create(fuse_req_t req, struct zrfs *fs, fuse_ino_t parent, const char *name,
		       mode_t mode, struct fuse_file_info *fi)
{
	make_file(req, fs, parent, name, mode, fi);
}

int zrfs_removals_settled(struct zrfs *fs)
{
	int rc;

	pthread_mutex_lock(&fs->writes->lock);
	rc = (int)zrfs_settle_stored(fs);
	pthread_mutex_unlock(&fs->writes->lock);
	return rc < 0 ? rc : 0;
}

/* A symbolic link to @target, a FIFO or a socket (@mode's type; "") named
 * @name in directory @parent of tree/: kept with the tree, as a directory. */
static void make_link(fuse_req_t req, struct zrfs *fs, fuse_ino_t parent, const char *name,
		      uint32_t mode, const char *target, uint64_t rdev)
{
	enum what what = W_NONE;
	struct fuse_entry_param e;
	struct zrfs_view *v;
	struct wnode *d;
	struct place p;
	uint64_t id;
	bool alias;
	int rc;

	if (strlen(name) > ZRFS_NAME_MAX || strlen(target) >= PATH_MAX) {
		zrfs_reply_err(req, -ENAMETOOLONG);
		return;
	}
	memset(&e, 0, sizeof e);
	zrfs_names_lock(fs);
	if ((rc = zrfs_place_of(fs, parent, name, &p)) == 0 && !p.tree)
		rc = -EPERM; /* a field's directory holds records' files only */
	else if (rc == 0)
		what = zrfs_name_resolve(fs, parent, &p, name, &d, &id, &alias);
	if (rc == 0 && what != W_NONE && what != W_ID)
		rc = -EEXIST;
	zrfs_names_unlock(fs);
	if (rc == 0 && what == W_ID) /* (tar x's placeholder for a link) */
		rc = zrfs_removals_settled(fs);
	uint32_t owner[2];
	maker(req, fs, parent, owner);
	if (rc == 0 && (rc = zrfs_tree_make_link(fs, parent, name, mode, target, rdev, &e.ino)) == 0) {
		if (zrfs_owners_kept(fs)) /* its maker's */
			zrfs_tree_owner(fs, e.ino, owner);
		v = zrfs_names_begin(fs);
		rc = zrfs_tree.attr(fs, v, e.ino, &e.attr);
		zrfs_names_end(fs);
	}
	if (rc < 0) {
		zrfs_reply_err(req, rc);
		return;
	}
	zrfs_dir_changed(fs, parent, NULL); /* and the link is kept with it */
	e.entry_timeout = e.attr_timeout = fs->opts.timeout;
	zrfs_reply_entry(req, fs, &zrfs_tree, &e, NULL);
}

int zrfs_write_link(struct zrfs *fs, fuse_ino_t ino, fuse_ino_t parent, const char *name)
{
	struct zrfs_writes *w = fs->writes;
	struct wnode *d, *draft = NULL;
	struct place p;
	enum what what = W_NONE;
	unsigned field = 0;
	uint64_t id = NO_ID;
	bool alias;
	int64_t rc;

	if (strlen(name) > ZRFS_NAME_MAX)
		return -ENAMETOOLONG;
	zrfs_names_lock(fs);
	if ((rc = zrfs_place_of(fs, parent, name, &p)) == 0 && (!p.tree || fs->names.key))
		rc = -EPERM; /* a field's directory holds records' files; a key's files are values */
	else if (rc == 0)
		what = zrfs_name_resolve(fs, parent, &p, name, &d, &id, &alias);
	if (rc == 0 && ((what != W_NONE && what != W_ID) || zrfs_tree_is_link(fs, parent, name)))
		rc = -EEXIST;
	zrfs_names_unlock(fs);
	if (rc == 0 && what == W_ID)
		rc = zrfs_removals_settled(fs);
	if (rc == 0 && zrfs_tree_link_ino(fs, ino)) /* a link's second name */
		rc = zrfs_tree_hard_make(fs, NO_ID, ino, parent, name);
	if (rc < 0 || zrfs_tree_link_ino(fs, ino))
		return (int)rc;
	/* a file's: the record it is stored as (a new file stored first, as
	 * an fsync stores it), with the removals waiting */
	pthread_mutex_lock(&w->lock);
	for (int tries = 0; rc == 0 && tries < 2; tries++) {
		if ((rc = zrfs_settle_stored(fs)) < 0)
			break;
		rc = zrfs_number_record(fs, zrfs_names_begin(fs), ino, &field, &id, &draft);
		zrfs_names_end(fs);
		if (rc < 0 || !draft)
			break;
		pthread_mutex_unlock(&w->lock); /* the group takes it */
		rc = zrfs_publish_group(fs, draft);
		pthread_mutex_lock(&w->lock);
		zrfs_node_put(draft);
		draft = NULL;
		rc = rc < 0 ? rc : tries ? -EIO : 0; /* stored, yet not a record: said */
	}
	if (rc == 0 && (int)field != fs->names.files)
		rc = -EPERM; /* a record's other value: no file of tree/ */
	if (rc == 0)
		rc = zrfs_tree_hard_make(fs, id, 0, parent, name);
	if (rc == 0) /* the file's change time (a commit per link would cost cp -al) */
		rc = zrfs_publish_changed_later(fs, field, id);
	pthread_mutex_unlock(&w->lock);
	if (rc >= 0)
		zrfs_dir_changed(fs, parent, NULL); /* and the link is kept with it */
	return rc < 0 ? (int)rc : 0;
}

void zrfs_write_symlink(fuse_req_t req, struct zrfs *fs, const char *target, fuse_ino_t parent,
			const char *name)
{
	make_link(req, fs, parent, name, S_IFLNK | 0777, target, 0);
}

void zrfs_write_mknod(fuse_req_t req, struct zrfs *fs, fuse_ino_t parent, const char *name,
		      mode_t mode, dev_t rdev)
{
	/* (the kernel has applied the umask, and let only a caller with
	 * CAP_MKNOD ask for a device) */
	if (S_ISREG(mode))
		make_file(req, fs, parent, name, mode, NULL);
	else if (!zrfs_mode_special((uint32_t)mode))
		zrfs_reply_err(req, -EINVAL); /* mknod(2): not a type it makes */
	else
		make_link(req, fs, parent, name, (uint32_t)mode & (S_IFMT | 07777), "",
			  S_ISCHR(mode) || S_ISBLK(mode) ? (uint64_t)rdev : 0);
}

void zrfs_write_mkdir(fuse_req_t req, struct zrfs *fs, fuse_ino_t parent, const char *name,
		      mode_t mode)
{
	struct fuse_entry_param e;
	struct wnode *d = NULL, *old;
	struct zrfs_view *v;
	struct place p;
	uint64_t id;
	bool alias;
	int rc;

	if (strlen(name) > ZRFS_NAME_MAX) {
		zrfs_reply_err(req, -ENAMETOOLONG);
		return;
	}
	memset(&e, 0, sizeof e);
	uint32_t owner[2];
	if (maker(req, fs, parent, owner))
		mode |= S_ISGID; /* and passes it on, as on a local filesystem */
	zrfs_names_lock(fs);
	/* the root's and the views' directories are the dataset's */
	enum what what = W_NONE;
	if ((rc = zrfs_place_of(fs, parent, name, &p)) == 0 &&
	    (what = zrfs_name_resolve(fs, parent, &p, name, &old, &id, &alias)) != W_NONE &&
	    !(what == W_ID && p.tree))
		rc = -EEXIST;
	else if (rc == 0 && !p.tree)
		rc = new_draft(fs, parent, &p, name, WN_DIR, NO_ID, 0, &d);
	zrfs_names_unlock(fs);
	if (rc == 0 && what == W_ID) /* (tar x: a directory where a file was) */
		rc = zrfs_removals_settled(fs);
	/* in tree/: a directory of the index, kept as long as the mount, with
	 * the mode asked (the umask applied by the kernel), as chmod keeps it */
	if (rc == 0 && p.tree && (rc = zrfs_tree_mkdir(fs, parent, name, &e.ino)) == 0)
		rc = zrfs_tree_mode(fs, e.ino, (uint32_t)mode);
	if (rc == 0 && p.tree && zrfs_owners_kept(fs)) /* its maker's */
		rc = zrfs_tree_owner(fs, e.ino, owner);
	if (rc < 0) {
		zrfs_reply_err(req, rc);
		return;
	}
	v = zrfs_names_begin(fs);
	e.ino = d ? d->ino : e.ino;
	zrfs_dir_attr(fs, v, e.ino, &e.attr);
	zrfs_names_end(fs);
	if (p.tree)
		e.attr.st_mode = S_IFDIR | (mode & 07777);
	if (p.tree && zrfs_owners_kept(fs)) {
		e.attr.st_uid = owner[0];
		e.attr.st_gid = owner[1];
	}
	zrfs_node_put(d);
	zrfs_dir_changed(fs, parent, NULL);
	zrfs_dir_changed(fs, e.ino, &e.attr.st_mtim);
	e.attr.st_atim = e.attr.st_mtim;
	if (p.tree) { /* a directory of the index: cached as the others, */
		struct stat st; /* with the attributes the index gives it */
		v = zrfs_names_begin(fs);
		if (zrfs_tree.attr(fs, v, e.ino, &st) == 0)
			e.attr = st;
		zrfs_names_end(fs);
		e.entry_timeout = e.attr_timeout = fs->opts.timeout;
		zrfs_reply_entry(req, fs, &zrfs_tree, &e, NULL);
		return;
	}
	zrfs_reply_handed(req, fs, &e, NULL); /* never cached: the writer's */
}

/* ---- removing ---- */

/* Take draft @d away (under names_lock): its name goes, its handles write
 * to a file no name has. */
void zrfs_draft_drop(struct zrfs_writes *w, struct wnode *d)
{
	zrfs_publish_unready(w, d);
	d->detached = true;
	if (d->kind == WN_DIR)
		zrfs_aliases_drop_in(w, d->ino);
	zrfs_draft_unlist(w, d);
}

/* Commit the removals waiting and the drafts stored and not committed yet
 * (a commit failed), under w->lock, so that the names below see the
 * records as the writer has them: 0 or a negative code. With none stored
 * and waiting, the removals are committed alone (drafts ready go with the
 * committer's group, which holds listings back while the view shows them
 * both as drafts and as records); with some, a group commits them, and
 * the drafts ready with them. */
int zrfs_settle_stored(struct zrfs *fs)
{
	struct zrfs_writes *w = fs->writes;
	int64_t gen;
	bool any;

	pthread_mutex_lock(&w->names_lock);
	any = w->nstored != 0; /* stored, not committed: a commit failed */
	pthread_mutex_unlock(&w->names_lock);
	if (any) {
		pthread_mutex_unlock(&w->lock); /* the group takes it */
		gen = zrfs_publish_group(fs, NULL);
		pthread_mutex_lock(&w->lock);
		if (gen < 0)
			return (int)gen;
	}
	gen = zrfs_publish_removals(fs); /* and those since, if any */
	return gen < 0 ? (int)gen : 0;
}

/* Remove record file @name in @parent (at place @p) with the removals
 * waiting for their group, if it still is one (its own name or an alias,
 * not a draft) and they have room (under w->lock): whether it is removed. */
static bool remove_later(struct zrfs *fs, fuse_ino_t parent, const struct place *p,
			 const char *name)
{
	struct zrfs_writes *w = fs->writes;
	struct wnode *d;
	uint64_t id;
	bool alias, done = false;

	if (w->gone_applied || atomic_load(&w->ngone) >= GONE_MAX)
		return false; /* a failed commit to retry, or a full group first */
	zrfs_names_lock(fs);
	if (zrfs_name_resolve_held(fs, parent, p, name, &d, &id, &alias) == W_RECORD &&
	    zrfs_gone_add(w, p->field, id, zrfs_rec_version(fs, p->field, id), p->tree,
			  zr_generation(w->ds)) == 0) {
		done = true;
		if (alias) /* a new file's name, resolved: it names nothing now */
			zrfs_alias_drop(w, parent, name);
		/* the first starts the clock; a full group goes at once */
		if (w->gone.n == 1 && !w->nready)
			w->ready_since_ms = zrfs_now_ms();
		if (w->gone.n == 1 || zrfs_group_full(w))
			pthread_cond_signal(&w->wake);
	}
	zrfs_names_unlock(fs);
	return done;
}

int64_t zrfs_file_remove_held(struct zrfs *fs, fuse_ino_t parent, const struct place *p,
			      const char *name)
{
	struct zrfs_writes *w = fs->writes;
	unsigned field = p->field;
	struct wnode *d;
	uint64_t id = NO_ID;
	bool alias;
	enum what what;

	zrfs_names_lock(fs);
	what = zrfs_name_resolve_held(fs, parent, p, name, &d, &id, &alias);
	if (what == W_DRAFT && d->kind != WN_DIR && d->stored == NO_ID) {
		id = d->id;
		field = d->field;
		zrfs_draft_drop(w, d);
	}
	if (alias)
		zrfs_alias_drop(w, parent, name);
	zrfs_names_unlock(fs);
	return what == W_RECORD			   ? zrfs_publish_remove(fs, field, id, p->tree)
	       : what == W_DRAFT && d->kind == WN_DIR ? -EISDIR
	       : what == W_DRAFT && id != NO_ID	   ? zrfs_publish_replaced(fs, field, id, p->tree)
	       : what == W_DRAFT		   ? 0
						   : -ENOENT;
}

void zrfs_write_unlink(fuse_req_t req, struct zrfs *fs, fuse_ino_t parent, const char *name)
{
	struct zrfs_writes *w = fs->writes;
	struct wnode *d;
	struct place p;
	uint64_t id;
	bool alias, dropped = false, link = false;
	int64_t rc = 0;
	enum what what = W_NONE;
	uint64_t named = NO_ID; /* the record a hard link removed names */

	zrfs_names_lock(fs);
	if ((rc = zrfs_place_of(fs, parent, name, &p)) < 0)
		;
	else if (((what = zrfs_name_resolve(fs, parent, &p, name, &d, &id, &alias)) == W_DRAFT &&
		  d->kind == WN_DIR) || what == W_DIR)
		rc = -EISDIR;
	else if ((dropped = what == W_DRAFT && d->stored == NO_ID && d->id == NO_ID &&
			    !d->storing))
		zrfs_draft_drop(w, d); /* never stored, in place of nothing: nothing to commit */
	else if (what == W_NONE && p.tree && zrfs_tree_is_link(fs, parent, name))
		link = true; /* a symbolic link of tree/: the index's, kept at the next commit */
	else if (what == W_NONE || what == W_ID)
		rc = -ENOENT;
	zrfs_names_unlock(fs);
	if (link) { /* a hard link's file's change time, as the writer has the record */
		pthread_mutex_lock(&w->lock);
		if ((rc = zrfs_settle_stored(fs)) == 0 && zrfs_tree_hard_of(fs, parent, name, &named) &&
		    named != NO_ID)
			rc = zrfs_publish_changed_later(fs, (unsigned)fs->names.files, named);
		pthread_mutex_unlock(&w->lock);
	}
	if (link && rc >= 0)
		rc = zrfs_tree_unlink(fs, parent, name, false); /* kept with its directory's time */
	if (rc < 0 || dropped || link) {
		if (rc >= 0)
			zrfs_dir_changed(fs, parent, NULL);
		zrfs_reply_status(req, rc);
		return;
	}
	/* a record's file: its value goes, with the next group (in tree/,
	 * with the record when it was its last); so does the value of the
	 * record a new file was renamed onto and stands in for (git's
	 * lockfile, sed -i: the name's old value is gone from the rename on),
	 * committed at once */
	pthread_mutex_lock(&w->lock);
	if (what == W_RECORD && remove_later(fs, parent, &p, name))
		rc = 0;
	else if ((rc = zrfs_settle_stored(fs)) == 0)
		rc = zrfs_file_remove_held(fs, parent, &p, name);
	pthread_mutex_unlock(&w->lock);
	if (rc >= 0)
		zrfs_dir_changed(fs, parent, NULL);
	/* the kernel holds the directory's lock: it is told of the names
	 * that changed just after this answer, not before */
	zrfs_reply_status(req, rc);
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

	zrfs_names_lock(fs);
	if ((rc = zrfs_place_of(fs, parent, name, &p)) < 0)
		; /* a field's directory, a view's */
	else if ((what = zrfs_name_resolve(fs, parent, &p, name, &d, &id, &alias)) == W_DIR)
		/* of tree/: empty of records (tree.c) and of files being written */
		rc = zrfs_drafts_in(w, zrfs_tree_subdir(fs, parent, name)) ? -ENOTEMPTY : 0;
	else if (what != W_DRAFT)
		rc = alias || what == W_RECORD || parent == ZRFS_INO_DIR + p.field ? -ENOTDIR
										   : -ENOENT;
	else if (d->kind != WN_DIR)
		rc = -ENOTDIR;
	else if (d->children)
		rc = -ENOTEMPTY;
	else
		zrfs_draft_drop(w, d);
	zrfs_names_unlock(fs);
	if (rc == 0 && what == W_DIR && atomic_load(&w->ngone)) {
		/* its files removed are gone from the index once committed */
		pthread_mutex_lock(&w->lock);
		rc = zrfs_settle_stored(fs);
		pthread_mutex_unlock(&w->lock);
	}
	if (rc == 0 && what == W_DIR)
		rc = zrfs_tree_rmdir(fs, parent, name); /* kept with its parent's time */
	if (rc == 0)
		zrfs_dir_changed(fs, parent, NULL);
	zrfs_reply_status(req, rc);
}
