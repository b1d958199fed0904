/*
 * write.c - a writable mount (-o rw): record files written, created and
 * removed through the mount become commits of the daemon's own writer.
 *
 * The daemon holds the dataset's writer lock for as long as it is mounted
 * rw, and says so in DATASET/writer (a second writer is told the mount).
 * A record file opened for writing gets a value of its own (writer.c: in
 * memory, or an unnamed file in the dataset's directory when large), holding
 * the record's value as it was unless the file was truncated on open.
 * Writes land there in any pattern; readers of the record meanwhile
 * see the committed value whole, and the writer's own reads see its writes
 * (the handle is direct I/O: it shares no pages with the record's readers).
 * When the file is flushed (every close()) or fsync'd after a change, its
 * bytes become the record's value in one commit, and the request is
 * answered only once the mount shows that commit (follow.c): a program
 * that closes a file and opens it again reads what it wrote.
 *
 * These are the FUSE operations on files; names (created, renamed,
 * removed) are write_names.c's, the writer and the values writer.c's.
 * Times can be set and are ignored (cp -p and rsync -a set them); modes
 * and owners cannot be changed on a file at rest.
 *
 * Sections: the mount, storing, just opened, open files, attributes.
 */
#include "write_i.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the mount ---- */

void zrfs_writes_mounted(struct zrfs *fs)
{
	if (!fs->writes)
		return;
	zr_holder_set(fs->writes->ds, fs->writes->holder); /* the daemon's pid now */
	zrfs_committer_start(fs);
}

void zrfs_writes_close(struct zrfs *fs)
{
	if (!fs->writes)
		return;
	zrfs_committer_stop(fs); /* new files not committed yet: committed now */
	zrfs_staged_free_all(fs); /* files never placed: said there */
	zrfs_writer_close(fs);
}

/* ---- storing ---- */

/* Store what @f holds as its value: the generation, 0 (nothing to store
 * yet), or a negative code (logged). Under @f's lock. */
static int64_t store(struct zrfs *fs, struct wfile *f)
{
	int64_t rc;

	if (f->staged)
		return zrfs_staged_store(fs, f);
	pthread_mutex_lock(&fs->writes->lock);
	rc = zrfs_wfile_store(fs, f, f->id, true);
	pthread_mutex_unlock(&fs->writes->lock);
	return rc;
}

/* ---- just opened: O_TRUNC ---- */

static void fresh_add(struct zrfs *fs, struct wfile *f, fuse_req_t req, fuse_ino_t ino)
{
	struct zrfs_writes *w = fs->writes;

	f->ino = ino;
	f->pid = fuse_req_ctx(req)->pid;
	pthread_mutex_lock(&w->fresh_lock);
	f->fresh = true;
	f->fresh_next = w->fresh;
	w->fresh = f;
	pthread_mutex_unlock(&w->fresh_lock);
}

/* @f is used: no SETATTR of its open comes any more. */
static void fresh_end(struct zrfs *fs, struct wfile *f)
{
	struct zrfs_writes *w = fs->writes;

	if (!f || !f->fresh) /* read unlocked: it only goes from true to false */
		return;
	pthread_mutex_lock(&w->fresh_lock);
	for (struct wfile **p = &w->fresh; *p; p = &(*p)->fresh_next)
		if (*p == f) {
			*p = f->fresh_next;
			break;
		}
	f->fresh = false;
	pthread_mutex_unlock(&w->fresh_lock);
}

/* The file that process @pid has just opened for writing on @ino, taken
 * off the list and referenced; NULL if none. */
static struct wfile *fresh_take(struct zrfs *fs, fuse_ino_t ino, pid_t pid)
{
	struct zrfs_writes *w = fs->writes;
	struct wfile *f = NULL;

	pthread_mutex_lock(&w->fresh_lock);
	for (struct wfile **p = &w->fresh; *p; p = &(*p)->fresh_next)
		if ((*p)->ino == ino && (*p)->pid == pid) {
			f = zrfs_wfile_ref(*p);
			*p = f->fresh_next;
			f->fresh = false;
			break;
		}
	pthread_mutex_unlock(&w->fresh_lock);
	return f;
}

static struct wfile *wfile_of(const struct fuse_file_info *fi)
{
	return fi ? (struct wfile *)(uintptr_t)fi->fh : NULL;
}

/* The record file @ino names, if it is one: its field and id. */
static bool record_of(struct zrfs *fs, fuse_ino_t ino, unsigned *field, uint64_t *id)
{
	unsigned version;

	return zrfs_rec_decode(fs, ino, field, id, &version);
}

void zrfs_write_open(fuse_req_t req, struct zrfs *fs, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct wfile *f = NULL;
	unsigned field;
	uint64_t id;
	int rc = 0;

	if (zrfs_write_node(fs, ino, NULL, &f, &field, &id) == 0) {
		/* created and not stored: its handles share the value; placed: its record */
		if (!f && (fi->flags & O_ACCMODE) != O_RDONLY)
			rc = zrfs_wfile_make(fs, field, id, (fi->flags & O_TRUNC) != 0, &f);
	} else if (!record_of(fs, ino, &field, &id)) {
		rc = -EPERM; /* meta.json, views, batches: made, not stored */
	} else if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		rc = zrfs_wfile_make(fs, field, id, (fi->flags & O_TRUNC) != 0, &f);
	}
	if (rc < 0) {
		zrfs_reply_err(req, rc);
		return;
	}
	fi->fh = (uintptr_t)f;
	fi->direct_io = 1; /* shares no pages with the record's readers (dispatch.c) */
	fi->noflush = f == NULL;
	if (f)
		fresh_add(fs, f, req, ino);
	if (fuse_reply_open(req, fi) != 0) {
		fresh_end(fs, f);
		zrfs_wfile_put(f); /* the opener is gone: no RELEASE comes */
	}
}

void zrfs_write_write(fuse_req_t req, struct zrfs *fs, const char *buf, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	struct wfile *f = wfile_of(fi);
	ssize_t n;

	if (!f) {
		fuse_reply_err(req, EBADF);
		return;
	}
	fresh_end(fs, f);
	if ((uint64_t)off + size > zrfs_value_max(&fs->fields[f->field])) {
		fuse_reply_err(req, EFBIG);
		return;
	}
	pthread_mutex_lock(&f->lock);
	n = zrfs_wfile_pwrite(fs, f, buf, size, (uint64_t)off);
	n = n < 0 ? n : (ssize_t)size;
	if (n < 0 && !f->error) {
		f->error = (int)n; /* a full disk: the file cannot be whole */
		f->dirty = true;   /* for the flush to say so */
	}
	if (n > 0)
		f->dirty = true;
	pthread_mutex_unlock(&f->lock);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_write(req, (size_t)n);
}

bool zrfs_write_read(fuse_req_t req, struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	struct wfile *f;
	unsigned field;
	uint64_t id;
	char *buf;
	ssize_t n;

	if (zrfs_write_node(fs, ino, fi, &f, &field, &id) < 0)
		return false;
	fresh_end(fs, f);
	if (!f) { /* placed: the record */
		zrfs_record_read(req, fs, v, ino, field, id, size, off);
		return true;
	}
	if (!(buf = zrfs_scratch(ZRFS_SCRATCH_REPLY, size))) {
		fuse_reply_err(req, ENOMEM);
	} else {
		pthread_mutex_lock(&f->lock);
		n = zrfs_wfile_pread(f, buf, size, (uint64_t)off);
		pthread_mutex_unlock(&f->lock);
		if (n < 0)
			fuse_reply_err(req, (int)-n);
		else
			fuse_reply_buf(req, buf, (size_t)n);
	}
	zrfs_wfile_put(f);
	return true;
}

/* Store @f's value if it changed since it was last stored: the
 * generation, 0 (nothing to commit), or a negative code (logged). A file
 * a write to which failed is never stored: every flush says so, and if it
 * was created and not stored, its name goes (with its private bytes: a
 * full disk gets them back); so does a new file still refused when its
 * last handle is @released. */
static int64_t store_dirty(struct zrfs *fs, struct wfile *f, bool released)
{
	int64_t gen = 0;
	bool drop;

	fresh_end(fs, f);
	pthread_mutex_lock(&f->lock);
	if (f->error) {
		if (f->dirty)
			fuse_log(FUSE_LOG_ERR, "zrfs: %s: %s: a write failed (%s): not stored\n",
				 fs->dataset, fs->fields[f->field].name, strerror(-f->error));
		f->dirty = false;
		gen = f->error;
	} else if (f->dirty) {
		gen = store(fs, f);
		f->dirty = false; /* a value refused stays refused until written again */
		f->refused = gen < 0 ? (int)gen : 0;
	}
	drop = f->error || (released && f->refused);
	pthread_mutex_unlock(&f->lock);
	if (drop)
		zrfs_staged_drop_failed(fs, f);
	return gen;
}

/* Answer @req for a store that gave @gen: once the mount shows it. */
static void answer(fuse_req_t req, struct zrfs *fs, int64_t gen)
{
	if (gen < 0)
		zrfs_reply_err(req, (int)gen);
	else if (gen == 0)
		fuse_reply_err(req, 0);
	else
		zrfs_follow_answer(fs, (uint64_t)gen, req, NULL);
}

void zrfs_write_flush(fuse_req_t req, struct zrfs *fs, struct fuse_file_info *fi)
{
	struct wfile *f = wfile_of(fi);

	answer(req, fs, f ? store_dirty(fs, f, false) : 0); /* no handle: opened for reading */
}

void zrfs_write_release(fuse_req_t req, struct zrfs *fs, struct fuse_file_info *fi)
{
	struct wfile *f = wfile_of(fi);

	if (f) {
		/* every close flushed it; a change after (through a mapping) is
		 * stored now: the closer is gone, so it is logged, not answered */
		store_dirty(fs, f, true);
		zrfs_wfile_put(f);
	}
	fuse_reply_err(req, 0);
}

void zrfs_write_fsync(fuse_req_t req, struct zrfs *fs, struct fuse_file_info *fi)
{
	struct wfile *f = wfile_of(fi);
	int64_t gen = f ? store_dirty(fs, f, false) : 0;

	/* a new file is appended but committed in a group: commit it now */
	if (f && gen == 0)
		gen = zrfs_staged_sync(fs);
	answer(req, fs, gen);
}

void zrfs_write_fsyncdir(fuse_req_t req, struct zrfs *fs)
{
	/* a directory's entries are durable once the new files in it are
	 * committed: all of them, at once (sync DIR). The mount shows them
	 * when this returns; the kernel, which holds the directory's lock
	 * meanwhile, is told of the names that went away just after. */
	int64_t gen = zrfs_staged_sync(fs);

	if (gen < 0)
		zrfs_reply_err(req, (int)gen);
	else
		fuse_reply_err(req, 0);
}

/* ---- attributes ---- */

void zrfs_write_setattr(fuse_req_t req, struct zrfs *fs, fuse_ino_t ino, struct stat *attr,
			int to_set, struct fuse_file_info *fi, const struct stat *now)
{
	struct wfile *f = wfile_of(fi), *own = NULL, *taken = NULL;
	struct stat st = *now;
	unsigned field;
	uint64_t id;
	int64_t rc = 0;

	fresh_end(fs, f);
	/* a mode or owner of a file at rest: refused; of a file being written
	 * (cp -p and rsync -a set them before it is stored): ignored */
	if ((((to_set & FUSE_SET_ATTR_MODE) && (attr->st_mode & 07777) != (now->st_mode & 07777)) ||
	     ((to_set & FUSE_SET_ATTR_UID) && attr->st_uid != now->st_uid) ||
	     ((to_set & FUSE_SET_ATTR_GID) && attr->st_gid != now->st_gid)) &&
	    !f && !(ino & ZRFS_INO_STAGED)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	if (!(to_set & FUSE_SET_ATTR_SIZE)) {
		fuse_reply_attr(req, &st, 0); /* times: the commit's, whatever is asked */
		return;
	}
	if (!f && (f = taken = fresh_take(fs, ino, fuse_req_ctx(req)->pid)) != NULL) {
		/* open(O_TRUNC): the handle the same call just opened */
	} else if (!f) { /* truncate(2) of a file not open: a change of its own */
		if (!record_of(fs, ino, &field, &id)) {
			fuse_reply_err(req, EPERM);
			return;
		}
		if ((rc = zrfs_wfile_make(fs, field, id, false, &own)) < 0) {
			zrfs_reply_err(req, (int)rc);
			return;
		}
		f = own;
	}
	if ((uint64_t)attr->st_size > zrfs_value_max(&fs->fields[f->field])) {
		rc = -EFBIG;
	} else {
		pthread_mutex_lock(&f->lock);
		if ((rc = zrfs_wfile_truncate(fs, f, (uint64_t)attr->st_size)) < 0)
			f->error = f->error ? f->error : (int)rc;
		else
			f->dirty = true;
		pthread_mutex_unlock(&f->lock);
	}
	/* a file created and not stored has the size asked; a record keeps the
	 * size of its committed value until the new one is stored (its inode
	 * is its readers' too: see attr_now in dispatch.c) */
	if (f->staged || (ino & ZRFS_INO_STAGED)) {
		st.st_size = attr->st_size;
		st.st_blocks = (st.st_size + 511) / 512;
	}
	if (rc == 0 && own) {
		pthread_mutex_lock(&own->lock);
		rc = store(fs, own);
		pthread_mutex_unlock(&own->lock);
	}
	zrfs_wfile_put(own);
	zrfs_wfile_put(taken);
	if (rc < 0)
		zrfs_reply_err(req, (int)rc);
	else if (own)
		zrfs_follow_answer(fs, (uint64_t)rc, req, &st);
	else
		fuse_reply_attr(req, &st, 0);
}

int zrfs_write_attr(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino,
		    struct fuse_file_info *fi, struct stat *st)
{
	struct wfile *f;
	unsigned field;
	uint64_t id;

	if (zrfs_write_node(fs, ino, fi, &f, &field, &id) < 0)
		return 1;
	if (!f) /* placed: its record, as the view has it */
		return zrfs_record_attr(fs, v, ino, field, id, st);
	zrfs_file_attr(fs, v, ino, 0, st);
	pthread_mutex_lock(&f->lock);
	st->st_size = (off_t)f->size;
	st->st_blocks = (blkcnt_t)((f->size + 511) / 512);
	pthread_mutex_unlock(&f->lock);
	zrfs_wfile_put(f);
	return 0;
}
