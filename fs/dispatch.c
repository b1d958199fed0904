/*
 * dispatch.c - the FUSE callbacks. Each finds the subtree that owns its
 * inode in one table (fields.c, batches.c, byclass.c, tree.c: struct
 * zrfs_subtree)
 * and lets it answer; none of them calls back here. The root directory is
 * the dispatcher's own: a name in it is asked of every subtree in turn, and
 * its listing is theirs one after the other.
 *
 * Every request answers from one view (view.c): a lookup or a listing from
 * the current one, under the names lock, so that the names and inode
 * numbers it hands out belong together; a request about an inode from the
 * view its owner says the inode shows. Content never changes under an
 * inode number, so every reply carries the mount's long timeout, negative
 * lookups included (follow.c tells the kernel which names to look up
 * again), and open and opendir return ENOSYS where the kernel allows it
 * (FUSE_CAP_NO_OPEN_SUPPORT): the kernel then stops sending OPEN and
 * RELEASE and keeps the page cache of these immutable files across opens.
 *
 * A writable mount (-o writable) has the operations that change the
 * dataset too (zrfs_rw_ops), each handed to the write layer (fs/write/),
 * and one rule for open files: a file opened for writing has a handle of
 * its own (fi->fh, struct zrfs_handle) that answers every request made
 * with it; otherwise the inode's owner answers. The files being written
 * are a subtree too (zrfs_writing), an overlay: asked first for names in
 * any directory, standing in for the entries it replaces in listings, and
 * told of every FORGET. Such a mount needs OPEN for every file.
 *
 * Sections: owners, lookup and getattr, listings, contents, the rest,
 * changes.
 */
#include "zrfs_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

static const struct zrfs_subtree *const subtrees[] = {&zrfs_fields, &zrfs_batches, &zrfs_byclass,
						     &zrfs_tree, &zrfs_writing};
#define NSUBTREES (sizeof subtrees / sizeof subtrees[0])

/* Root listing positions: subtree k's entry at its position q is at
 * k * ROOT_SPAN + q (a subtree has far fewer entries in the root). */
#define ROOT_SPAN (UINT64_C(1) << 40)

/* ---- owners ---- */

/* The subtree that owns @ino: an overlay first (it may have taken over a
 * number of another's: a record's moved by a rename), then the others. */
static const struct zrfs_subtree *owner_of(const struct zrfs *fs, fuse_ino_t ino)
{
	for (size_t k = 0; k < NSUBTREES; k++)
		if (subtrees[k]->overlay && subtrees[k]->owns(fs, ino))
			return subtrees[k];
	for (size_t k = 0; k < NSUBTREES; k++)
		if (!subtrees[k]->overlay && subtrees[k]->owns(fs, ino))
			return subtrees[k];
	return NULL;
}

/* Whether file @ino is removed, its removal not committed yet (an
 * overlay's gone). */
static bool gone_of(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino)
{
	for (size_t k = 0; k < NSUBTREES; k++)
		if (subtrees[k]->gone && subtrees[k]->gone(fs, v, ino))
			return true;
	return false;
}

/* The view @ino shows, referenced, with @cur the current one (under the names
 * lock); NULL when it shows none any more. */
static struct zrfs_view *view_of(struct zrfs *fs, const struct zrfs_subtree *t,
				 struct zrfs_view *cur, fuse_ino_t ino)
{
	return t && t->view_of ? t->view_of(fs, cur, ino) : zrfs_view_ref(cur);
}

/* The owner of @ino and the view it shows, referenced: 0, -ENOENT (nobody owns
 * it), -ESTALE (its view is gone). */
static int resolve(struct zrfs *fs, fuse_ino_t ino, const struct zrfs_subtree **t,
		   struct zrfs_view **v)
{
	struct zrfs_view *cur = zrfs_names_begin(fs);

	*t = ino == ZRFS_INO_ROOT ? NULL : owner_of(fs, ino);
	*v = ino == ZRFS_INO_ROOT || *t ? view_of(fs, *t, cur, ino) : NULL;
	zrfs_names_end(fs);
	return *v ? 0 : ino != ZRFS_INO_ROOT && !*t ? -ENOENT : -ESTALE;
}

/* Attributes of @ino in view @cur (or the view it shows): 0, -ENOENT,
 * -ESTALE, or another error (logged by its owner). Under the names lock. */
static int attr_of(struct zrfs *fs, struct zrfs_view *cur, fuse_ino_t ino, struct stat *st)
{
	const struct zrfs_subtree *t;
	struct zrfs_view *v;
	int rc;

	if (ino == ZRFS_INO_ROOT) {
		zrfs_dir_attr(fs, cur, ino, st);
		st->st_nlink = 2 + fs->nfields;
		return 0;
	}
	if (!(t = owner_of(fs, ino)))
		return -ENOENT;
	if (!(v = view_of(fs, t, cur, ino)))
		return -ESTALE;
	rc = t->attr(fs, v, ino, st);
	/* a file removed while open, its removal not committed yet, or a
	 * number of an older view (its name shows other bytes now: removed,
	 * replaced), which only an open file holds, has no link */
	if (rc == 0 && S_ISREG(st->st_mode) &&
	    ((t->older_unlinked && v != cur) || gone_of(fs, v, ino)))
		st->st_nlink = 0;
	zrfs_view_put(v);
	return rc;
}

/* ---- lookup and getattr ---- */

/* A subtree's lookup or entry gave @ino, which the kernel is not handed:
 * the reference its owner took for it is let go (subtree_i.h). */
static void unhanded(struct zrfs *fs, fuse_ino_t ino)
{
	const struct zrfs_subtree *t = ino == ZRFS_INO_ROOT || ino == 0 ? NULL : owner_of(fs, ino);

	if (t && t->let_go)
		t->let_go(fs, ino);
}

/* @rc of a lookup that found @ino, or ZRFS_ENOENT_LATER where @ino is a
 * file removed whose removal is not committed yet (its reference let go). */
static int unless_gone(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino, int rc)
{
	if (rc != 0 || !gone_of(fs, v, ino))
		return rc;
	unhanded(fs, ino);
	return ZRFS_ENOENT_LATER;
}

/* The number file @ino another subtree gave is known to the kernel by (an
 * overlay's identity: a new file's number, kept once it is a record), with
 * @count counted as handed (zrfs_inode_again); 0 if none. */
static fuse_ino_t identity_of(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino, bool count)
{
	fuse_ino_t id;

	for (size_t k = 0; k < NSUBTREES; k++)
		if (subtrees[k]->identity && (id = subtrees[k]->identity(fs, v, ino, count)) != 0)
			return id;
	return 0;
}

/* Where a file is open for writing, its attributes @st as @req's caller
 * sees them (zrfs_write_own_attr): whether they may be cached. */
static bool seen_by(fuse_req_t req, struct zrfs *fs, fuse_ino_t ino, struct stat *st)
{
	return !fs->writes || zrfs_write_own_attr(req, fs, ino, st) < 0;
}

/* Answer a lookup that gave file @ino with the number the kernel knows
 * the file by, if it is not @ino (identity_of): true if answered. */
static bool reply_identity(fuse_req_t req, struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino)
{
	struct fuse_entry_param e;
	fuse_ino_t id = identity_of(fs, v, ino, true);

	if (!id)
		return false;
	memset(&e, 0, sizeof e); /* never cached: the record may change under it */
	e.ino = id;
	if (attr_of(fs, v, id, &e.attr) < 0) {
		zrfs_inode_forget(fs, id, 1);
		return false;
	}
	seen_by(req, fs, id, &e.attr);
	unhanded(fs, ino);
	zrfs_reply_handed(req, fs, &e, NULL);
	return true;
}

/* Reply to a lookup with @ino (0: a negative entry), cached @timeout; the
 * number is handed to the kernel, or let go. */
static void reply_entry(fuse_req_t req, struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino,
			double timeout)
{
	struct fuse_entry_param e;
	int rc;

	memset(&e, 0, sizeof e);
	e.entry_timeout = timeout;
	e.attr_timeout = timeout;
	rc = ino != 0 ? attr_of(fs, v, ino, &e.attr) : 0;
	if (rc == 0 && ino != 0 && !seen_by(req, fs, ino, &e.attr))
		e.attr_timeout = 0;
	if (rc < 0 && rc != -ENOENT) {
		zrfs_reply_err(req, rc);
		unhanded(fs, ino);
		return;
	}
	/* ino 0: a negative entry, cached by the kernel for entry_timeout */
	e.ino = rc == 0 ? ino : 0;
	if (e.ino == 0)
		unhanded(fs, ino);
	zrfs_reply_entry(req, fs, e.ino ? owner_of(fs, e.ino) : NULL, &e, NULL);
}

static void zrfs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct zrfs *fs = fuse_req_userdata(req);
	struct zrfs_view *v;
	const struct zrfs_subtree *t = NULL;
	fuse_ino_t ino = 0;
	int rc = -ENOENT;
	size_t k;

	if (strlen(name) > ZRFS_NAME_MAX) { /* the kernel passes up to 1024 bytes */
		zrfs_reply_err(req, -ENAMETOOLONG);
		return;
	}
	v = zrfs_names_begin(fs);

	/* files being written first: their names stand in for others' */
	for (k = 0; k < NSUBTREES && rc == -ENOENT; k++)
		if (subtrees[k]->overlay)
			rc = subtrees[k]->lookup(fs, v, parent, name, &ino);
	rc = unless_gone(fs, v, ino, rc); /* an alias of a file removed */
	if (rc == 0) { /* never cached: the writer's until stored */
		if (!reply_identity(req, fs, v, ino))
			reply_entry(req, fs, v, ino, 0);
		zrfs_names_end(fs);
		return;
	}
	if (rc == ZRFS_ENOENT_LATER) {
		;
	} else if (parent == ZRFS_INO_ROOT) {
		for (k = 0, rc = -ENOENT; k < NSUBTREES && rc == -ENOENT; k++)
			if (!subtrees[k]->overlay)
				rc = subtrees[k]->lookup(fs, v, parent, name, &ino);
	} else if ((t = owner_of(fs, parent)) != NULL) {
		rc = t->lookup(fs, v, parent, name, &ino);
		rc = unless_gone(fs, v, ino, rc); /* removed, not committed yet */
	}
	if ((parent != ZRFS_INO_ROOT && !t) || (rc == -ENOENT && t && t->volatile_names) ||
	    rc == ZRFS_ENOENT_LATER) {
		zrfs_reply_err(req, -ENOENT); /* not cached */
	} else if (rc < 0 && rc != -ENOENT) {
		zrfs_reply_err(req, rc);
	} else if (rc < 0 || !reply_identity(req, fs, v, ino)) {
		reply_entry(req, fs, v, rc < 0 ? 0 : ino,
			    rc == 0 && zrfs_ino_asked_each_time(ino) ? 0 : fs->opts.timeout);
	}
	zrfs_names_end(fs);
}

/* Attributes of @ino as its owner has them now. */
static int attr_now(struct zrfs *fs, fuse_ino_t ino, struct stat *st)
{
	struct zrfs_view *v = zrfs_names_begin(fs);
	int rc = attr_of(fs, v, ino, st);

	zrfs_names_end(fs);
	return rc;
}

/* Answer a GETATTR of @ino with its attributes now. */
static void getattr_now(fuse_req_t req, struct zrfs *fs, fuse_ino_t ino)
{
	struct stat st;
	int rc = attr_now(fs, ino, &st);

	if (rc < 0) {
		zrfs_reply_err(req, rc);
	} else {
		/* an overlay's number (a file being written, or one kept by a
		 * record since) may change under it: not cached */
		const struct zrfs_subtree *t = owner_of(fs, ino);
		bool cached = seen_by(req, fs, ino, &st) && !(t && t->overlay);
		zrfs_reply_attr(req, &st, cached ? fs->opts.timeout : 0);
	}
}

static void zrfs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct zrfs *fs = fuse_req_userdata(req);
	struct zrfs_handle *h = zrfs_handle_of(fi);

	if (h)
		h->ops->getattr(req, fs, h, ino);
	else
		getattr_now(req, fs, ino);
}

/* ---- listings ---- */

/* A directory listing being filled, from view v. */
struct listing {
	fuse_req_t req;
	struct zrfs *fs;
	struct zrfs_view *v;
	bool plus;
	char *buf;
	size_t size, used;
	fuse_ino_t *handed;   /* plus: the numbers its entries hand the kernel */
	size_t nhanded, cap;
	bool uncounted;       /* the last entry could not be counted (let go) */
};

/* Fewer bytes than any entry with attributes takes (struct fuse_direntplus:
 * 128 of attributes and 24 of the entry before its name). */
#define DIRENTPLUS_MIN 128

/* Add one entry to resume after at @next; false when the buffer is full
 * (or, with attributes, the number cannot be counted). */
static bool list_add(struct listing *l, const char *name, fuse_ino_t ino, mode_t type, off_t next,
		     bool uncached)
{
	size_t n;

	if (l->plus) {
		struct fuse_entry_param e;
		memset(&e, 0, sizeof e);
		e.ino = ino;
		e.entry_timeout = e.attr_timeout = uncached ? 0 : l->fs->opts.timeout;
		if (attr_of(l->fs, l->v, ino, &e.attr) < 0) {
			/* listed, but every access goes through lookup and fails there */
			if (type == S_IFDIR)
				zrfs_dir_attr(l->fs, l->v, ino, &e.attr);
			else
				zrfs_file_attr(l->fs, l->v, ino, 0, &e.attr);
			e.entry_timeout = e.attr_timeout = 0;
		}
		n = fuse_add_direntry_plus(l->req, l->buf + l->used, l->size - l->used, name, &e,
					   next);
	} else {
		struct stat st;
		memset(&st, 0, sizeof st);
		st.st_ino = ino;
		st.st_mode = type;
		n = fuse_add_direntry(l->req, l->buf + l->used, l->size - l->used, name, &st, next);
	}
	if (n > l->size - l->used || (l->plus && l->nhanded == l->cap))
		return false;
	/* an entry with attributes is a lookup, but for "." and ".." */
	if (l->plus && next > 2) {
		if (zrfs_inode_hand(l->fs, ino, owner_of(l->fs, ino)) < 0) {
			l->uncounted = true; /* the listing goes on from here next time */
			return false;
		}
		l->handed[l->nhanded++] = ino;
	} else if (next > 2) {
		unhanded(l->fs, ino);
	}
	l->used += n;
	return true;
}

/* The first entry of @dir at a position >= @pos (>= 2): in the root, the
 * subtrees' entries one subtree after the other. 1, 0 past the last, or
 * -errno. */
static int next_entry(struct zrfs *fs, struct zrfs_view *v, const struct zrfs_subtree *t,
		      fuse_ino_t dir, uint64_t pos, struct zrfs_dirent *d)
{
	int rc;

	d->uncached = false;
	if (dir != ZRFS_INO_ROOT && t->overlay) /* a directory of its own */
		return t->entry(fs, v, dir, pos, d);
	if (dir != ZRFS_INO_ROOT) {
		/* the owner's entries, each maybe stood in for by an overlay's,
		 * then the overlays' own */
		bool shadowed = false;
		fuse_ino_t own = 0;
		rc = pos < ZRFS_OVERLAY_POS ? t->entry(fs, v, dir, pos, d) : 0;
		for (; rc > 0; rc = t->entry(fs, v, dir, d->pos + 1, d)) {
			own = d->ino;
			for (size_t k = 0; k < NSUBTREES && !shadowed; k++)
				if (subtrees[k]->overlay && subtrees[k] != t &&
				    (shadowed = subtrees[k]->shadow(fs, v, dir, d)))
					unhanded(fs, own);
			if (shadowed || d->type != S_IFREG || !gone_of(fs, v, own))
				break;
			unhanded(fs, own); /* removed, not committed yet: not listed */
		}
		if (rc != 0) {
			fuse_ino_t id;
			if (rc > 0 && !shadowed && d->type == S_IFREG &&
			    (id = identity_of(fs, v, own, false)) != 0) {
				/* not counted: a listing with attributes hands it,
				 * uncached, so that the next path walk looks it up */
				unhanded(fs, own);
				d->ino = id;
				d->uncached = true;
			}
			return rc;
		}
		for (size_t k = 0; k < NSUBTREES; k++)
			if (subtrees[k]->overlay && subtrees[k] != t &&
			    (rc = subtrees[k]->entry(fs, v, dir, pos > ZRFS_OVERLAY_POS ? pos
											: ZRFS_OVERLAY_POS,
						     d)) != 0)
				return rc;
		return 0;
	}
	for (uint64_t k = pos / ROOT_SPAN, q = pos % ROOT_SPAN; k < NSUBTREES; k++, q = 2) {
		if (subtrees[k]->view && !fs->opts.list_views)
			continue;
		rc = subtrees[k]->entry(fs, v, dir, q > 2 ? q : 2, d);
		if (rc != 0) {
			d->pos += k * ROOT_SPAN;
			return rc;
		}
	}
	return 0;
}

static void readdir_any(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
	struct zrfs *fs = fuse_req_userdata(req);
	struct listing l = {req, fs, zrfs_names_begin(fs), plus, NULL, size, 0, NULL, 0,
			    size / DIRENTPLUS_MIN + 2, false};
	const struct zrfs_subtree *t = ino == ZRFS_INO_ROOT ? NULL : owner_of(fs, ino);
	struct zrfs_dirent d;
	uint64_t pos = off > 2 ? (uint64_t)off : 2;
	/* the first entry before anything is added: a file is ENOTDIR */
	int rc = ino != ZRFS_INO_ROOT && !t ? -ENOENT : next_entry(fs, l.v, t, ino, pos, &d);

	if (rc < 0) {
		zrfs_reply_err(req, rc);
	} else if (!(l.buf = malloc(size)) ||
		   (plus && !(l.handed = malloc(l.cap * sizeof *l.handed)))) {
		zrfs_reply_err(req, -ENOMEM);
	} else {
		if ((off > 0 || list_add(&l, ".", ino, S_IFDIR, 1, false)) &&
		    (off > 1 || list_add(&l, "..", ZRFS_INO_ROOT, S_IFDIR, 2, false))) {
			while (rc == 1 &&
			       list_add(&l, d.name, d.ino, d.type, (off_t)d.pos + 1, d.uncached))
				rc = next_entry(fs, l.v, t, ino, d.pos + 1, &d);
		}
		if (zrfs_reply_buf(req, l.buf, l.used) != 0) /* nothing handed */
			for (size_t i = 0; i < l.nhanded; i++)
				zrfs_inode_forget(fs, l.handed[i], 1);
	}
	if (rc == 1 && !l.uncounted) /* the next entry, not sent */
		unhanded(fs, d.ino);
	free(l.buf);
	free(l.handed);
	zrfs_names_end(fs);
}

static void zrfs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			 struct fuse_file_info *fi)
{
	(void)fi;
	readdir_any(req, ino, size, off, false);
}

static void zrfs_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			     struct fuse_file_info *fi)
{
	(void)fi;
	readdir_any(req, ino, size, off, true);
}

/* ---- contents ---- */

/* SEEK_DATA or SEEK_HOLE from @off in owned file @ino of @v, a view held:
 * its subtree's answer, or one from its size (a file without holes). */
static int64_t seek_in(struct zrfs *fs, const struct zrfs_subtree *t, struct zrfs_view *v,
		       fuse_ino_t ino, uint64_t off, int whence)
{
	int64_t rc = t->seek ? t->seek(fs, v, ino, off, whence) : -ENOSYS;
	struct stat st;

	if (rc != -ENOSYS)
		return rc;
	zrfs_names_begin(fs); /* attr's rule */
	rc = t->attr(fs, v, ino, &st);
	zrfs_names_end(fs);
	if (rc < 0)
		return rc;
	return S_ISREG(st.st_mode) ? zrfs_seek_plain((uint64_t)st.st_size, off, whence) : -EINVAL;
}

/* -o writable: a record's file opened for reading reads the value it
 * opened, whole, until closed (zrfs(8), Replacing a record's value). Its
 * number may be the write layer's by the next READ (a writer opened it and
 * keeps it as the file's, which then shows the bytes written): the read
 * goes to the owner and view of the open. And past the page cache: the
 * writer shares the inode, whose size the kernel changes as it writes. */
struct pinned {
	struct zrfs_reading r;
	const struct zrfs_subtree *t;
};

static void p_read(fuse_req_t req, struct zrfs *fs, struct zrfs_handle *h, fuse_ino_t ino,
		   size_t size, off_t off)
{
	struct pinned *p = (struct pinned *)h;

	p->t->read(req, fs, p->r.v, ino, size, off);
}

static int64_t p_seek(struct zrfs *fs, struct zrfs_handle *h, fuse_ino_t ino, uint64_t off,
		      int whence)
{
	struct pinned *p = (struct pinned *)h;

	return seek_in(fs, p->t, p->r.v, ino, off, whence);
}

void zrfs_reading_write(fuse_req_t req, struct zrfs *fs, struct zrfs_handle *h, const char *buf,
			size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)fs, (void)h, (void)buf, (void)size, (void)off, (void)fi;
	zrfs_reply_err(req, -EBADF); /* opened for reading */
}

void zrfs_reading_flush(fuse_req_t req, struct zrfs *fs, struct zrfs_handle *h,
			struct fuse_file_info *fi)
{
	(void)fs, (void)h, (void)fi;
	zrfs_reply_status(req, 0);
}

void zrfs_reading_fsync(fuse_req_t req, struct zrfs *fs, struct zrfs_handle *h)
{
	(void)fs, (void)h;
	zrfs_reply_status(req, 0); /* nothing written through it */
}

void zrfs_reading_release(fuse_req_t req, struct zrfs *fs, struct zrfs_handle *h)
{
	zrfs_reading_close(fs, (struct zrfs_reading *)h);
	zrfs_reply_status(req, 0);
}

/* fstat(2) of the descriptor: the number's attributes now, as stat(2) */
static void p_getattr(fuse_req_t req, struct zrfs *fs, struct zrfs_handle *h, fuse_ino_t ino)
{
	(void)h;
	getattr_now(req, fs, ino);
}

void zrfs_reading_setattr(fuse_req_t req, struct zrfs *fs, struct zrfs_handle *h, fuse_ino_t ino,
			  const struct stat *attr, int to_set, const struct stat *now)
{
	(void)h;
	zrfs_write_setattr(req, fs, ino, attr, to_set, now); /* by its name's rules */
}

static const struct zrfs_handle_ops pinned_ops = {
	.read = p_read,
	.write = zrfs_reading_write,
	.flush = zrfs_reading_flush,
	.fsync = zrfs_reading_fsync,
	.release = zrfs_reading_release,
	.getattr = p_getattr,
	.setattr = zrfs_reading_setattr,
	.seek = p_seek,
};

static void open_pinned(fuse_req_t req, struct zrfs *fs, fuse_ino_t ino,
			struct fuse_file_info *fi)
{
	struct pinned *p = NULL;
	const struct zrfs_subtree *t;
	struct zrfs_view *v;
	int rc = resolve(fs, ino, &t, &v);

	if (rc == 0 && !(p = malloc(sizeof *p))) /* a record's number: an owner's */
		rc = -ENOMEM;
	if (rc < 0) {
		zrfs_view_put(v);
		zrfs_reply_err(req, rc);
		return;
	}
	*p = (struct pinned){{{&pinned_ops}, v, NULL, NULL, NULL}, t};
	zrfs_reading_open(fs, &p->r);
	fi->fh = (uintptr_t)p;
	fi->direct_io = 1;
	if (zrfs_reply_open(req, fi) != 0) /* the opener is gone: no RELEASE comes */
		zrfs_reading_close(fs, &p->r);
}

static void zrfs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct zrfs *fs = fuse_req_userdata(req);

	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		if (fs->writes)
			zrfs_write_open(req, fs, ino, fi); /* a handle of its own */
		else
			zrfs_reply_err(req, -EROFS);
		return;
	}
	if (fs->no_open) {
		zrfs_reply_err(req, -ENOSYS); /* stateless: no OPEN/RELEASE from now on */
		return;
	}
	fi->noflush = 1; /* nothing to flush: closing costs no request */
	if (fs->writes && zrfs_writing.owns(fs, ino)) {
		zrfs_write_open_read(req, fs, ino, fi); /* reads the value it opened */
		return;
	}
	if (fs->writes && zrfs_is_rec_ino(ino)) {
		open_pinned(req, fs, ino, fi);
		return;
	}
	fi->keep_cache = 1;
	zrfs_reply_open(req, fi);
}

static void zrfs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	struct zrfs *fs = fuse_req_userdata(req);
	struct zrfs_handle *h = zrfs_handle_of(fi);
	const struct zrfs_subtree *t;
	struct zrfs_view *v;
	int rc;


	if (h) {
		h->ops->read(req, fs, h, ino, size, off);
		return;
	}
	if ((rc = resolve(fs, ino, &t, &v)) < 0)
		zrfs_reply_err(req, rc);
	else if (!t)
		zrfs_reply_err(req, -EISDIR); /* the root */
	else
		t->read(req, fs, v, ino, size, off);
	zrfs_view_put(v);
}

/* lseek(2) with SEEK_DATA or SEEK_HOLE (the kernel answers the others): a
 * record's value has the holes its chunk left (cp, tar --sparse, and
 * rsync -S find them without reading zeros) */
static void zrfs_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		       struct fuse_file_info *fi)
{
	struct zrfs *fs = fuse_req_userdata(req);
	struct zrfs_handle *h = zrfs_handle_of(fi);
	const struct zrfs_subtree *t = NULL;
	struct zrfs_view *v = NULL;
	int64_t rc;

	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		rc = -EINVAL;
	else if (off < 0)
		rc = -ENXIO;
	else if (h)
		rc = h->ops->seek(fs, h, ino, (uint64_t)off, whence);
	else if ((rc = resolve(fs, ino, &t, &v)) == 0)
		rc = t ? seek_in(fs, t, v, ino, (uint64_t)off, whence) : -EISDIR;
	zrfs_view_put(v);
	zrfs_reply_seek(req, rc);
}

static void zrfs_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	zrfs_inode_forget(fuse_req_userdata(req), ino, nlookup);
	zrfs_reply_none(req);
}

static void zrfs_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		zrfs_inode_forget(fuse_req_userdata(req), forgets[i].ino, forgets[i].nlookup);
	zrfs_reply_none(req);
}

/* ---- the rest ---- */

static void zrfs_init(void *userdata, struct fuse_conn_info *conn)
{
	struct zrfs *fs = userdata;

	/* a writable mount needs an OPEN per file: a handle for each writer */
	fs->no_open = !fs->writes && (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT) != 0;
	zrfs_notify_setup(fs, conn);
	/* O_TRUNC as a SETATTR with the new handle, answered with the size the
	 * record still has: with it in the OPEN, the kernel would empty the
	 * inode its readers share */
	if (fs->writes)
		conn->want &= ~(unsigned)FUSE_CAP_ATOMIC_O_TRUNC;
	if (!(conn->capable & FUSE_CAP_SPLICE_WRITE))
		fs->opts.splice = 0;
	if (fs->opts.splice)
		conn->want |= FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE;
	else
		conn->want &= ~(unsigned)(FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
	/* bytes never change under an inode number: never revalidate pages */
	conn->want &= ~(unsigned)FUSE_CAP_AUTO_INVAL_DATA;
	/* lookups and listings of one directory in parallel (libfuse before
	 * 3.17 never tells the kernel: transport.c does) */
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	conn->max_readahead = 1 << 20;
	conn->max_background = 64;
	conn->congestion_threshold = 48;
}

static void zrfs_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct zrfs *fs = fuse_req_userdata(req);

	(void)ino;
	if (fs->no_open) {
		zrfs_reply_err(req, -ENOSYS); /* listings are cached, no OPENDIR again */
		return;
	}
	fi->keep_cache = 1;
	fi->cache_readdir = 1;
	if (fs->writes)
		zrfs_write_listing(fs, true);
	if (zrfs_reply_open(req, fi) != 0 && fs->writes) /* no RELEASEDIR will come */
		zrfs_write_listing(fs, false);
}

static void zrfs_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct zrfs *fs = fuse_req_userdata(req);

	(void)ino;
	(void)fi;
	if (fs->writes)
		zrfs_write_listing(fs, false);
	zrfs_reply_status(req, 0);
}

static void zrfs_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct zrfs *fs = fuse_req_userdata(req);
	struct zrfs_view *v = zrfs_view_current(fs);
	struct statvfs sv;

	(void)ino;
	memset(&sv, 0, sizeof sv);
	sv.f_bsize = sv.f_frsize = 4096;
	sv.f_files = v->n * fs->nfields + fs->nfields * 2 + 2;
	zrfs_view_put(v);
	sv.f_namemax = 255;
	sv.f_flag = fs->writes ? 0 : ST_RDONLY;
	if (fs->writes) { /* room for values: the dataset's filesystem's */
		struct statvfs under;
		if (statvfs(fs->dataset, &under) == 0) {
			sv.f_blocks = under.f_blocks * under.f_frsize / sv.f_frsize;
			sv.f_bfree = under.f_bfree * under.f_frsize / sv.f_frsize;
			sv.f_bavail = under.f_bavail * under.f_frsize / sv.f_frsize;
		}
	}
	zrfs_reply_statfs(req, &sv);
}

/* access(2), faccessat(2) and chdir, answered from the mode bits
 * (rights.c): were it not answered, every access() would succeed, X_OK on
 * a file no one may run included (shutil.which, find -executable). */
static void zrfs_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	struct stat st;
	int rc = attr_now(fuse_req_userdata(req), ino, &st);

	zrfs_reply_status(req, rc < 0 ? rc : zrfs_may_access(req, &st, mask));
}

/* ---- changes (-o writable): the write layer, and what no mount can do ---- */

static void zrfs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
			 struct fuse_file_info *fi)
{
	struct zrfs *fs = fuse_req_userdata(req);
	struct zrfs_handle *h = zrfs_handle_of(fi);
	struct stat now;
	int rc = attr_now(fs, ino, &now);

	if (rc < 0)
		zrfs_reply_err(req, rc);
	else if ((to_set & FUSE_SET_ATTR_SIZE) && !S_ISREG(now.st_mode))
		zrfs_reply_err(req, -EISDIR);
	else if (h)
		h->ops->setattr(req, fs, h, ino, attr, to_set, &now);
	else
		zrfs_write_setattr(req, fs, ino, attr, to_set, &now);
}

static void zrfs_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
			struct fuse_file_info *fi)
{
	zrfs_write_create(req, fuse_req_userdata(req), parent, name, mode, fi);
}

static void zrfs_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct zrfs_handle *h = zrfs_handle_of(fi);

	(void)ino;
	if (h)
		h->ops->write(req, fuse_req_userdata(req), h, buf, size, off, fi);
	else
		zrfs_reply_err(req, -EBADF);
}

static void zrfs_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			   struct fuse_file_info *fi)
{
	struct zrfs_handle *h = zrfs_handle_of(fi);

	(void)ino;
	if (h && h->ops->fallocate)
		h->ops->fallocate(req, fuse_req_userdata(req), h, mode, off, len);
	else
		zrfs_reply_err(req, -EBADF); /* not open for writing */
}

static void zrfs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct zrfs_handle *h = zrfs_handle_of(fi);

	(void)ino;
	if (h)
		h->ops->flush(req, fuse_req_userdata(req), h, fi);
	else
		zrfs_reply_status(req, 0); /* opened for reading */
}

static void zrfs_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct zrfs_handle *h = zrfs_handle_of(fi);

	(void)ino;
	(void)datasync;
	if (h)
		h->ops->fsync(req, fuse_req_userdata(req), h);
	else
		zrfs_reply_status(req, 0);
}

static void zrfs_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
			  struct fuse_file_info *fi)
{
	(void)ino, (void)datasync, (void)fi;
	zrfs_write_fsyncdir(req, fuse_req_userdata(req));
}

static void zrfs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct zrfs_handle *h = zrfs_handle_of(fi);

	(void)ino;
	if (h)
		h->ops->release(req, fuse_req_userdata(req), h);
	else
		zrfs_reply_status(req, 0);
}

static void zrfs_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct zrfs *fs = fuse_req_userdata(req);
	/* a file or link of tree/ with hard links keeps one of their names */
	int64_t rc = zrfs_write_hard_promote(fs, parent, name);

	if (rc > 0)
		zrfs_write_unlink(req, fs, parent, name);
	else
		zrfs_reply_status(req, rc);
}

static void zrfs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	zrfs_write_mkdir(req, fuse_req_userdata(req), parent, name, mode);
}

static void zrfs_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	zrfs_write_rmdir(req, fuse_req_userdata(req), parent, name);
}

/* A FIFO, a socket or a device of tree/ (mkfifo, bind, mknod): a name the
 * tree keeps, as a symbolic link. */
static void zrfs_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		       dev_t rdev)
{
	zrfs_write_mknod(req, fuse_req_userdata(req), parent, name, mode, rdev);
}

static void zrfs_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	zrfs_write_symlink(req, fuse_req_userdata(req), link, parent, name);
}

/* A hard link of tree/: answered as a lookup of its name, which gives the
 * number of the file or link it names. */
static void zrfs_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t parent, const char *name)
{
	int rc = zrfs_write_link(fuse_req_userdata(req), ino, parent, name);

	if (rc < 0)
		zrfs_reply_err(req, rc);
	else
		zrfs_lookup(req, parent, name);
}

static void zrfs_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
			const char *newname, unsigned flags)
{
	zrfs_write_rename(req, fuse_req_userdata(req), parent, name, newparent, newname, flags);
}

/* A symbolic link of tree/ (the only ones; its FIFOs and sockets: EINVAL). */
static void zrfs_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char target[PATH_MAX];
	int rc = zrfs_tree_readlink(fuse_req_userdata(req), ino, target, sizeof target);

	if (rc < 0)
		zrfs_reply_err(req, rc);
	else
		zrfs_reply_readlink(req, target);
}

#define READ_OPS                                                                                \
	.init = zrfs_init, .lookup = zrfs_lookup, .forget = zrfs_forget,                        \
	.forget_multi = zrfs_forget_multi, .getattr = zrfs_getattr, .open = zrfs_open,          \
	.read = zrfs_read, .opendir = zrfs_opendir, .readdir = zrfs_readdir,                    \
	.readdirplus = zrfs_readdirplus, .releasedir = zrfs_releasedir, .statfs = zrfs_statfs,  \
	.readlink = zrfs_readlink, .lseek = zrfs_lseek, .access = zrfs_access

const struct fuse_lowlevel_ops zrfs_ops = {READ_OPS};

const struct fuse_lowlevel_ops zrfs_rw_ops = {
	READ_OPS,
	.setattr = zrfs_setattr,
	.create = zrfs_create,
	.write = zrfs_write,
	.fallocate = zrfs_fallocate,
	.flush = zrfs_flush,
	.fsync = zrfs_fsync,
	.fsyncdir = zrfs_fsyncdir,
	.release = zrfs_release,
	.unlink = zrfs_unlink,
	.mkdir = zrfs_mkdir,
	.mknod = zrfs_mknod,
	.rmdir = zrfs_rmdir,
	.symlink = zrfs_symlink,
	.link = zrfs_link,
	.rename = zrfs_rename,
};
