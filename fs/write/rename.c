/*
 * rename.c - renames on a writable mount, and attributes changed by path
 * (times, sizes): the rest of names.c's work (whose comment says what a
 * name is, and which names can be renamed where).
 *
 * Sections: renaming, attributes.
 */
#include "write_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
		zrfs_draft_drop(w, td); /* replaced */
	} else if (to == W_RECORD || (to == W_ID && tid < zr_length(w->ds))) {
		target = tid;
	}
	if ((rc = zrfs_draft_rename(w, d, newparent, newname)) < 0)
		return rc;
	if (d->kind == WN_DIR)
		return 0;
	zrfs_node_changed(d, zrfs_now_ns()); /* renamed */
	if (tp->tree) { /* in tree/ the name says the field */
		zrfs_draft_target(w, d, NO_ID);
		if ((rc = zrfs_draft_place(fs, d, newparent, tp)) < 0)
			return rc;
		if ((i = zrfs_winode_find(w, d->ino)) != NULL)
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

/* Whether record @id has no value but that of @field (its name, time and
 * mode aside). */
static bool alone(struct zrfs *fs, unsigned field, uint64_t id)
{
	for (unsigned f = 0; f < fs->nfields; f++)
		if (f != field && !zr_names_own(&fs->names, f) &&
		    zr_present(fs->writes->ds, f, id) != 0)
			return false;
	return true;
}

/* The path below tree/ of @name in directory @dir into @buf (ZRFS_PATH_MAX
 * bytes): 0, -ENOENT, -ENAMETOOLONG. Under the names lock. */
static int tree_child_path(struct zrfs *fs, fuse_ino_t dir, const char *name, char *buf)
{
	int rc = zrfs_tree_path(fs, dir, buf, ZRFS_PATH_MAX);
	size_t at;

	if (rc < 0)
		return rc; /* @buf as it was */
	at = strlen(buf);
	return snprintf(buf + at, ZRFS_PATH_MAX - at, "%s%s", at ? "/" : "", name) <
			       (int)(ZRFS_PATH_MAX - at)
		       ? 0
		       : -ENAMETOOLONG;
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
	char path[ZRFS_PATH_MAX];
	bool only = (id >= w->made_from || tp->tree) && alone(fs, field, id);
	int64_t rc;

	zrfs_names_lock(fs);
	if (to == W_DRAFT) { /* replaced: what it would have replaced is the target */
		tid = td->stored != NO_ID ? td->stored : td->id;
		to = tid != NO_ID ? W_RECORD : W_NONE;
		zrfs_draft_drop(w, td);
	}
	if (alias)
		zrfs_alias_drop(w, parent, name);
	rc = tp->tree ? tree_child_path(fs, newparent, newname, path)
		      : zrfs_path_of(w, newparent, newname, path, sizeof path);
	zrfs_names_unlock(fs);
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

/* Drafts in tree/ below directory @from now below @to (under names_lock). */
static int drafts_moved(struct zrfs_writes *w, const char *from, const char *to)
{
	size_t flen = strlen(from);

	for (struct wnode *d = w->first; d; d = d->next) {
		char *path;
		if (!d->tree || !d->dirpath || strncmp(d->dirpath, from, flen) != 0 ||
		    (d->dirpath[flen] != 0 && d->dirpath[flen] != '/'))
			continue;
		if (asprintf(&path, "%s%s", to, d->dirpath + flen) < 0)
			return -ENOMEM;
		free(d->dirpath);
		d->dirpath = path;
	}
	return 0;
}

/* Move directory @name of @parent in tree/ to @newname in @newparent: the
 * index moves it at once (its number and everything in it kept), and the
 * names of the records below it follow in one commit. 0 or -errno. */
static int64_t move_dir(struct zrfs *fs, fuse_ino_t parent, const char *name,
			fuse_ino_t newparent, const char *newname)
{
	struct zrfs_writes *w = fs->writes;
	char *from = malloc(ZRFS_PATH_MAX), *to = malloc(ZRFS_PATH_MAX);
	uint64_t *ids = NULL, *back;
	size_t n = 0, nback;
	int64_t rc = from && to ? 0 : -ENOMEM;

	pthread_mutex_lock(&w->lock);
	/* the records as the writer has them: new files stored first */
	if (rc == 0 && (rc = zrfs_settle_stored(fs)) == 0) {
		zrfs_names_begin(fs);
		if ((rc = tree_child_path(fs, parent, name, from)) == 0)
			rc = tree_child_path(fs, newparent, newname, to);
		zrfs_names_end(fs);
	}
	if (rc == 0)
		rc = zrfs_tree_dir_move(fs, parent, name, newparent, newname, &ids, &n);
	if (rc == 0) {
		pthread_mutex_lock(&w->names_lock);
		rc = drafts_moved(w, from, to);
		pthread_mutex_unlock(&w->names_lock);
		/* its directories and links at their new paths, in the same
		 * commit as the names: a crash leaves the old tree or the new */
		zrfs_tree_changed(fs);
		atomic_store(&w->tree_now, true);
	}
	if (rc == 0 && (rc = zrfs_publish_moved(fs, ids, n, from, to)) < 0) {
		/* as it was: the kernel keeps the old name */
		zrfs_tree_dir_move(fs, newparent, newname, parent, name, &back, &nback);
		free(back);
		pthread_mutex_lock(&w->names_lock);
		drafts_moved(w, to, from);
		pthread_mutex_unlock(&w->names_lock);
	}
	pthread_mutex_unlock(&w->lock);
	free(ids);
	free(from);
	free(to);
	return rc < 0 ? rc : 0;
}

/* Move link @name of @parent onto the file @newname of @newparent (at
 * @tp), which goes: one commit takes the file away and keeps the link at
 * its new name, so that a crash leaves the one or the other there. 0 or a
 * negative code (the link where it was). */
static int64_t link_over_file(struct zrfs *fs, fuse_ino_t parent, const char *name,
			      fuse_ino_t newparent, const struct place *tp, const char *newname)
{
	struct zrfs_writes *w = fs->writes;
	int64_t rc;

	pthread_mutex_lock(&w->lock);
	if ((rc = zrfs_settle_stored(fs)) == 0 &&
	    (rc = zrfs_tree_link_move(fs, parent, name, newparent, newname, true)) == 0) {
		/* the name shows the file until the commit is shown */
		zrfs_tree_changed(fs);
		atomic_store(&w->tree_now, true);
		rc = zrfs_file_remove_held(fs, newparent, tp, newname);
		if (rc < 0)
			zrfs_tree_link_move(fs, newparent, newname, parent, name, true);
	}
	pthread_mutex_unlock(&w->lock);
	return rc < 0 ? rc : 0;
}

/* Whether @name in @parent is a directory (of tree/, or made for drafts). */
static bool dir_named(struct zrfs *fs, fuse_ino_t parent, const char *name)
{
	struct wnode *d;
	struct place p;
	uint64_t id;
	bool alias, dir = false;

	zrfs_names_lock(fs);
	if (zrfs_place_of(fs, parent, name, &p) == 0) {
		enum what what = zrfs_name_resolve(fs, parent, &p, name, &d, &id, &alias);
		dir = what == W_DIR || (what == W_DRAFT && d->kind == WN_DIR);
	}
	zrfs_names_unlock(fs);
	return dir;
}

/* Hard links of tree/ naming what a rename moves: the paths below tree/
 * of its name before and after, when any hard link is. */
struct hard_paths {
	bool any, moved;
	uint64_t token; /* the hard links this rename made follow */
	char from[ZRFS_PATH_MAX], to[ZRFS_PATH_MAX];
};

static void hard_paths(struct zrfs *fs, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		       const char *newname, struct hard_paths *h)
{
	static atomic_uint_fast64_t tokens;

	h->moved = false;
	h->token = atomic_fetch_add(&tokens, 1) + 1;
	if (!(h->any = zrfs_tree_has_hard(fs)))
		return;
	zrfs_names_begin(fs);
	h->any = tree_child_path(fs, parent, name, h->from) == 0 &&
		 tree_child_path(fs, newparent, newname, h->to) == 0;
	zrfs_names_end(fs);
}

/* The hard links naming what moves (@dir: and what is below it) name it at
 * its new path, from the commit that moves it on; back (@back) where the
 * move failed (those it moved alone: others may name the new path). */
static int hard_follow(struct zrfs *fs, struct hard_paths *h, bool dir, bool back)
{
	int rc;

	if (!h->any || h->moved == !back)
		return 0;
	rc = back ? zrfs_tree_retarget(fs, h->to, h->from, dir, h->token, true)
		  : zrfs_tree_retarget(fs, h->from, h->to, dir, h->token, false);
	if (rc > 0) { /* some moved: kept with the commit that moves it */
		h->moved = !back;
		zrfs_tree_changed(fs);
		atomic_store(&fs->writes->tree_now, true);
	}
	return rc < 0 ? rc : 0;
}

static int64_t rename_do(struct zrfs *fs, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
			 const char *newname, unsigned flags);

/* The file or link @name of @parent, whose name goes (removed, or replaced
 * by a rename onto it), has hard links: it takes the name of one of them,
 * @hname in @hdir, which goes, and the others name it there, as the inode
 * of a local filesystem keeps its other names. 0 or a negative code. */
static int64_t promote(struct zrfs *fs, fuse_ino_t parent, const char *name, fuse_ino_t hdir,
		       const char *hname)
{
	uint64_t id;
	int64_t rc;

	zrfs_tree_hard_of(fs, hdir, hname, &id);
	if ((rc = zrfs_tree_unlink(fs, hdir, hname, false)) < 0)
		return rc;
	if ((rc = rename_do(fs, parent, name, hdir, hname, RENAME_NOREPLACE)) < 0 && id != NO_ID)
		zrfs_tree_hard_make(fs, id, 0, hdir, hname); /* as it was */
	return rc;
}

int64_t zrfs_write_hard_promote(struct zrfs *fs, fuse_ino_t parent, const char *name)
{
	char hname[ZRFS_NAME_MAX + 1];
	fuse_ino_t hdir;
	int64_t rc;

	if (!zrfs_tree_has_hard(fs) || !zrfs_tree_hard_any(fs, parent, name, &hdir, hname))
		return 1;
	rc = promote(fs, parent, name, hdir, hname);
	if (rc >= 0)
		zrfs_dir_changed(fs, parent, NULL);
	return rc < 0 ? rc : 0;
}

void zrfs_write_rename(fuse_req_t req, struct zrfs *fs, fuse_ino_t parent, const char *name,
		       fuse_ino_t newparent, const char *newname, unsigned flags)
{
	/* the kernel holds the directories' locks: it is told of the names
	 * that changed just after this answer */
	zrfs_reply_status(req, rename_do(fs, parent, name, newparent, newname, flags));
}

static int64_t rename_do(struct zrfs *fs, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
			 const char *newname, unsigned flags)
{
	struct zrfs_writes *w = fs->writes;
	struct wnode *d, *td;
	struct place p, tp;
	struct hard_paths *h;
	uint64_t id, tid;
	bool alias, talias, record = false, replacing = false, link = false, dir = false;
	enum what what = W_NONE, to = W_NONE;
	int64_t rc = 0;

	if (flags & ~(unsigned)RENAME_NOREPLACE) /* RENAME_EXCHANGE, RENAME_WHITEOUT */
		return -EINVAL;
	if (strlen(newname) > ZRFS_NAME_MAX)
		return -ENAMETOOLONG;
	if (!(h = malloc(sizeof *h)))
		return -ENOMEM;
	hard_paths(fs, parent, name, newparent, newname, h);
	/* a file or link replaced that has hard links: it keeps one of their
	 * names (a directory onto it fails below, as it would) */
	if (h->any && !(flags & RENAME_NOREPLACE) && !dir_named(fs, parent, name) &&
	    (rc = zrfs_write_hard_promote(fs, newparent, newname)) < 0) {
		free(h);
		return rc;
	}
	rc = 0;
	zrfs_dir_keep(fs, newparent);
	bool settle, settled = false;
again:
	settle = false;
	/* a draft's rename changes only the tables: no commit, no writer */
	zrfs_names_lock(fs);
	if ((rc = zrfs_place_of(fs, parent, name, &p)) < 0 ||
	    (rc = zrfs_place_of(fs, newparent, newname, &tp)) < 0) {
		;
	} else if (p.tree != tp.tree || (!p.tree && p.field != tp.field)) {
		rc = -EXDEV; /* between fields, or tree/: mv copies and removes instead */
	} else {
		what = zrfs_name_resolve(fs, parent, &p, name, &d, &id, &alias);
		to = zrfs_name_resolve(fs, newparent, &tp, newname, &td, &tid, &talias);
		/* a symbolic link, FIFO or socket of tree/ moves in the index,
		 * onto nothing, another link or a file (removed with it) */
		link = what == W_NONE && p.tree && zrfs_tree_is_link(fs, parent, name);
		/* onto a file removed, its removal waiting for its group: a
		 * directory or link takes the name once that is committed */
		settle = to == W_ID && tp.tree && !settled && (what == W_DIR || link);
		/* a draft a group is storing goes by the writer's lock, as a
		 * record does: the group then has put it where it decided */
		record = what == W_RECORD ||
			 (what == W_DRAFT && (d->stored != NO_ID || d->storing));
		if (settle)
			; /* below, then again */
		else if (link && (to == W_DIR || (to == W_DRAFT && td->kind == WN_DIR)))
			rc = -EISDIR;
		else if (link && (flags & RENAME_NOREPLACE) &&
			 (to != W_NONE || zrfs_tree_is_link(fs, newparent, newname)))
			rc = -EEXIST;
		else if (link && to == W_ID)
			rc = -EEXIST; /* a record's name without a file here: as symlink(2) */
		else if (link)
			; /* below: onto nothing or a link, or a file (the writer's lock) */
		else if (what == W_NONE || what == W_ID)
			rc = -ENOENT;
		else if (what == W_DIR && (flags & RENAME_NOREPLACE) &&
			 (to != W_NONE || zrfs_tree_is_link(fs, newparent, newname)))
			rc = -EEXIST;
		else if (what == W_DIR && to != W_NONE && to != W_DIR)
			rc = -ENOTDIR; /* onto a file */
		else if (what == W_DIR && to == W_DIR &&
			 zrfs_drafts_in(w, zrfs_tree_subdir(fs, newparent, newname)))
			rc = -ENOTEMPTY; /* files being written in it */
		else if (what == W_DIR)
			dir = true; /* a directory of tree/: below, under the writer's lock */
		else if (zrfs_no_field_ever(&tp, newname))
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
		else if (!record && (d->kind == WN_DIR || d->id == NO_ID) &&
			 !(to == W_DRAFT && td->storing) &&
			 /* onto a record, while a group may move records' ids */
			 !((to == W_RECORD || to == W_ID) && atomic_load(&w->ngone)))
			rc = rename_draft(fs, d, newparent, &tp, newname, to, td, tid, talias);
		else if (!record)
			replacing = true; /* below, under the writer's lock */
	}
	zrfs_names_unlock(fs);
	if (settle) {
		settled = true;
		if ((rc = zrfs_removals_settled(fs)) == 0)
			goto again;
	}
	/* hard links naming it name it at its new path, in the commit that
	 * moves it (a draft's rename: moved already) */
	if (rc == 0)
		rc = hard_follow(fs, h, dir, false);
	if (rc == 0 && link && to == W_NONE)
		rc = zrfs_tree_link_move(fs, parent, name, newparent, newname, false);
	else if (rc == 0 && link)
		rc = link_over_file(fs, parent, name, newparent, &tp, newname);
	if (rc == 0 && dir)
		rc = move_dir(fs, parent, name, newparent, newname);
	if (rc == 0 && (record || replacing)) {
		pthread_mutex_lock(&w->lock);
		if ((rc = zrfs_settle_stored(fs)) == 0) {
			uint64_t left = NO_ID; /* the record a draft stood in for, left */
			unsigned field = p.field;
			zrfs_names_lock(fs);
			what = zrfs_name_resolve_held(fs, parent, &p, name, &d, &id, &alias);
			to = zrfs_name_resolve_held(fs, newparent, &tp, newname, &td, &tid, &talias);
			if (what == W_DRAFT) { /* a draft, or one again by another's rename */
				uint64_t was = d->kind != WN_DIR && d->stored == NO_ID ? d->id : NO_ID;
				field = d->field;
				rc = rename_draft(fs, d, newparent, &tp, newname, to, td, tid,
						  talias);
				if (rc == 0 && was != NO_ID && d->id != was)
					left = was;
			} else if (what != W_RECORD)
				rc = -ENOENT;
			else if (to == W_RECORD && tid == id && alias) /* onto its own other name */
				zrfs_alias_drop(w, parent, name);
			zrfs_names_unlock(fs);
			if (what == W_RECORD && !(to == W_RECORD && tid == id))
				rc = rename_record(fs, p.field, id, parent, name, alias, newparent,
						   &tp, newname, to, td, tid);
			/* the name it stood in for names nothing now: the value the
			 * rename onto it replaced is gone (mv x.tmp x; mv x y) */
			if (rc == 0 && left != NO_ID)
				rc = zrfs_publish_replaced(fs, field, left, p.tree);
		}
		pthread_mutex_unlock(&w->lock);
	}
	/* a file onto a link replaces it (kept, as a link moved, with the
	 * directories' times; a record's rename answers its commit's
	 * generation) */
	if (rc >= 0 && !link && !dir && tp.tree)
		zrfs_tree_unlink(fs, newparent, newname, true);
	if (rc >= 0) {
		zrfs_dir_changed(fs, parent, NULL);
		if (newparent != parent)
			zrfs_dir_changed(fs, newparent, NULL);
	} else {
		hard_follow(fs, h, dir, true); /* not moved: as they were */
	}
	free(h);
	return rc;
}

/* ---- attributes ---- */

/* The times, (@mode) the permission bits and (@owner) the owner and group
 * a SETATTR asks for, answered with attributes @st: a file's, where the
 * dataset keeps them (zr_names.mtime, .mode, .uid and .gid), kept with what
 * is being written or stored now; a directory's, link's, FIFO's or
 * socket's of tree/, kept with the tree (a directory's times for as long
 * as the mount); anything else's times accepted and ignored (the commit's
 * time shows). */
static void set_meta(fuse_req_t req, struct zrfs *fs, fuse_ino_t ino, const struct stat *attr,
		     int to_set, bool mode, bool owner, bool same, struct stat *st)
{
	struct zrfs_writes *w = fs->writes;
	struct wtimes t;
	struct wnode *n;
	int64_t rc = 0;
	bool timed = zrfs_asked_times(attr, to_set, &t);
	uint32_t ids[2] = {(to_set & FUSE_SET_ATTR_UID) ? (uint32_t)attr->st_uid : st->st_uid,
			   (to_set & FUSE_SET_ATTR_GID) ? (uint32_t)attr->st_gid : st->st_gid};
	uint32_t bits = S_IFREG | (attr->st_mode & 07777);
	int err;

	if (!timed && !mode && !owner && !same) {
		zrfs_reply_attr(req, st, 0);
		return;
	}
	if ((owner || same) && !S_ISREG(st->st_mode) &&
	    zrfs_tree_owner(fs, ino, owner ? ids : NULL) == 0) {
		if (owner)
			st->st_uid = ids[0], st->st_gid = ids[1];
		zrfs_tree_changed(fs);
	}
	if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode)) { /* a link, FIFO or socket */
		if (mode && zrfs_tree_mode(fs, ino, attr->st_mode) == 0) {
			st->st_mode = (st->st_mode & S_IFMT) | (attr->st_mode & 07777);
			zrfs_tree_changed(fs);
		}
		/* lutimes: rsync -a sets a link's times */
		if (t.mtime != ZR_MTIME_NONE) {
			struct timespec m = zr_ns_time(t.mtime);
			struct timespec a = t.atime != ZR_MTIME_NONE ? zr_ns_time(t.atime) : m;
			if (zrfs_tree_link_time(fs, ino, m, a) == 0) {
				st->st_mtim = m;
				st->st_atim = a;
				zrfs_tree_changed(fs);
			}
		}
		zrfs_reply_attr(req, st, 0);
		return;
	}
	if (S_ISDIR(st->st_mode)) {
		struct timespec ts = zr_ns_time(t.mtime);
		if (mode && zrfs_tree_mode(fs, ino, attr->st_mode) == 0) {
			st->st_mode = S_IFDIR | (attr->st_mode & 07777);
			zrfs_tree_changed(fs);
		}
		if (t.mtime != ZR_MTIME_NONE && zrfs_dir_time(fs, ino, ts) == 0)
			st->st_mtim = st->st_atim = ts;
		zrfs_reply_attr(req, st, 0);
		return;
	}
	bool attrs = mode || owner || same;
	if ((fs->names.mtime >= 0 || attrs) &&
	    (n = zrfs_node_of_number(fs, ino, false, &err)) != NULL) {
		if (attrs)
			rc = zrfs_publish_attrs(fs, n, mode ? &bits : NULL, owner ? ids : NULL);
		if (attrs && rc >= 0) {
			if (mode)
				st->st_mode = (st->st_mode & S_IFMT) | (attr->st_mode & 07777);
			if (owner)
				st->st_uid = ids[0], st->st_gid = ids[1];
			zrfs_node_meta(n, st); /* its change time */
		}
		if (rc >= 0 && timed && fs->names.mtime >= 0 &&
		    (rc = zrfs_publish_times(fs, n, &t)) >= 0)
			zrfs_node_meta(n, st);
		pthread_mutex_lock(&w->names_lock);
		zrfs_node_release(w, n);
		pthread_mutex_unlock(&w->names_lock);
		zrfs_node_put(n);
	}
	zrfs_follow_answer(fs, rc, req, st);
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
		/* a file's mode and owner are stored where the dataset keeps
		 * them, a directory's and link's of tree/ with the tree; what
		 * nothing keeps (a directory's mode outside tree/, a dataset's
		 * without modes or owners) of a file at rest is refused (a new
		 * file's: ignored, as cp -p and rsync -a set them before it is
		 * stored) */
		bool mode = (to_set & FUSE_SET_ATTR_MODE) &&
			    (attr->st_mode & 07777) != (now->st_mode & 07777);
		bool owner = ((to_set & FUSE_SET_ATTR_UID) && attr->st_uid != now->st_uid) ||
			     ((to_set & FUSE_SET_ATTR_GID) && attr->st_gid != now->st_gid);
		/* (a FIFO, a socket or a device is tree/'s, kept with it) */
		bool kept = mode && (S_ISREG(now->st_mode) ? fs->names.mode >= 0
							  : zrfs_mode_special(now->st_mode));
		bool owned = owner && zrfs_owners_kept(fs) && !S_ISDIR(now->st_mode);
		/* one that changes nothing (chown(f, -1, -1) asks nothing) still
		 * changes a file's change time, as on a local filesystem */
		bool same = !mode && !owner &&
			    (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID) ||
			     !(to_set & ~FUSE_SET_ATTR_CTIME));
		if ((mode || owner || same) && S_ISDIR(now->st_mode)) { /* tree/'s keeps both */
			zrfs_names_begin(fs);
			bool tree = zrfs_tree_dir(fs, ino);
			zrfs_names_end(fs);
			kept = mode && tree;
			owned = owner && tree && zrfs_owners_kept(fs);
			same = same && tree;
		}
		if (owner && !zrfs_may_chown(req, now, attr, to_set))
			zrfs_reply_err(req, -EPERM);
		else if (((mode && !kept) || (owner && !owned)) && !(ino & ZRFS_INO_STAGED))
			zrfs_reply_err(req, -EPERM);
		else
			set_meta(req, fs, ino, attr, to_set, kept, owned, same, &st);
		return;
	}
	st.st_size = attr->st_size;
	st.st_blocks = (st.st_size + 511) / 512;
	if ((n = zrfs_handle_fresh(fs, ino, pid)) != NULL) {
		/* open(O_TRUNC): the handle the same call just opened */
		rc = zrfs_node_truncate(fs, n, (uint64_t)attr->st_size, pid, true);
		if (rc == 0)
			rc = zrfs_drop_ids(req, fs, n, ino, &st);
		zrfs_node_put(n);
		zrfs_follow_answer(fs, rc, req, &st); /* nothing stored yet */
		return;
	}
	/* truncate(2) of a file by its name: a change of its own, stored now
	 * (a record), unless it is open for writing (its last close stores it) */
	if (!(n = zrfs_node_of_number(fs, ino, false, (int *)&rc))) {
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
	if (rc >= 0)
		rc = zrfs_gen_later(rc, zrfs_drop_ids(req, fs, n, ino, &st));
	zrfs_node_put(n);
	zrfs_follow_answer(fs, rc, req, &st);
}

void zrfs_write_fsyncdir(fuse_req_t req, struct zrfs *fs)
{
	/* a directory's entries are durable once its new files are committed:
	 * all of them, at once (sync DIR). The mount shows them when this
	 * returns; the kernel, which holds the directory's lock meanwhile, is
	 * told of the names that changed just after. Temporary files too. */
	zrfs_reply_status(req, zrfs_publish_all(fs));
}
