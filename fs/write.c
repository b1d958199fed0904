/*
 * write.c - a writable mount (-o rw): record files written, created and
 * removed through the mount become commits of the daemon's own writer.
 *
 * The daemon holds the dataset's writer lock for as long as it is mounted
 * rw, and says so in DATASET/writer (a second writer is told the mount).
 * A record file opened for writing gets a file of its own, unnamed, in the
 * dataset's directory (O_TMPFILE: nothing is written outside the dataset),
 * holding the record's value as it was unless the file was truncated on
 * open. Writes land there in any pattern; readers of the record meanwhile
 * see the committed value whole, and the writer's own reads see its writes
 * (the handle is direct I/O: it shares no pages with the record's readers).
 * When the file is flushed (every close()) or fsync'd after a change, its
 * bytes become the record's value in one commit, and the request is
 * answered only once the mount shows that commit (follow.c): a program
 * that closes a file and opens it again reads what it wrote.
 *
 * Names: a field directory holds "<id>[.ext]" for ids below the length N.
 * Creating "<id>[.ext]" for a missing value fills it in, and creating
 * "<N>[.ext]" appends record N (its other fields missing). Removing a
 * record file makes that value missing: ids never move under a mount.
 * Nothing else can be created, removed or renamed (EPERM): the tree is the
 * dataset's, not the user's. Times can be set and are ignored (cp -p and
 * rsync -a set them); modes and owners cannot be changed.
 *
 * Sections: the writer, values, open files, names, attributes.
 */
#include "zrfs_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct wfile;

struct zrfs_writes {
	zr_dataset *ds;       /* the writer: ZR_RDWR */
	int dirfd;            /* the dataset's directory, for private files */
	pthread_mutex_t lock; /* one change and its commit at a time */
	pthread_mutex_t created_lock; /* taken before a file's, never after */
	struct wfile *created; /* files created and still open: their inodes
				  have attributes before the record has a value */
};

/* A record file open for writing: fi->fh. */
struct wfile {
	pthread_mutex_t lock;
	unsigned field;
	uint64_t id;
	int fd;               /* the value as written so far */
	uint64_t size;
	bool dirty;           /* changed since it was last stored */
	fuse_ino_t ino;       /* created: its inode, and the next created */
	struct wfile *next;
};

/* ---- the writer ---- */

int zrfs_writes_open(struct zrfs *fs)
{
	struct zrfs_writes *w = calloc(1, sizeof *w);
	int rc;

	if (!w) {
		fprintf(stderr, "zrfs: out of memory\n");
		return -1;
	}
	pthread_mutex_init(&w->lock, NULL);
	pthread_mutex_init(&w->created_lock, NULL);
	w->dirfd = -1;
	fs->writes = w;
	if ((rc = zr_open(&w->ds, fs->dataset, ZR_RDWR)) < 0) {
		fprintf(stderr, "zrfs: cannot mount read-write: %s\n", zr_errmsg(NULL));
		return -1;
	}
	w->dirfd = open(fs->dataset, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (w->dirfd < 0) {
		fprintf(stderr, "zrfs: %s: %s\n", fs->dataset, strerror(errno));
		return -1;
	}
	return 0;
}

void zrfs_writes_mounted(struct zrfs *fs, const char *mountpoint)
{
	char what[4200];

	if (!fs->writes)
		return;
	snprintf(what, sizeof what, "zrfs mount on %s", mountpoint);
	zr_holder_set(fs->writes->ds, what); /* only a message: best effort */
}

void zrfs_writes_close(struct zrfs *fs)
{
	struct zrfs_writes *w = fs->writes;

	if (!w)
		return;
	zr_close(w->ds); /* every change was committed when it was stored */
	if (w->dirfd >= 0)
		close(w->dirfd);
	pthread_mutex_destroy(&w->lock);
	pthread_mutex_destroy(&w->created_lock);
	free(w);
	fs->writes = NULL;
}

/* ---- values ---- */

/* Make (@field, @id) hold @v (data NULL: missing), appending record @id
 * if it is the next one, and commit; the generation committed. Under the
 * writer's lock. */
static int64_t change(struct zrfs *fs, unsigned field, uint64_t id, zr_value v)
{
	zr_dataset *ds = fs->writes->ds;
	uint64_t n = zr_length(ds);
	int rc;

	if (id == n) {
		zr_value *row = calloc(fs->nfields, sizeof *row);
		if (!row)
			return -ENOMEM;
		row[field] = v;
		rc = zr_append(ds, row, NULL);
		free(row);
	} else {
		rc = id < n ? zr_modify(ds, field, id, v) : -ENOENT;
	}
	if (rc == 0)
		rc = zr_commit(ds);
	if (rc < 0) /* a change made but not committed goes with the next commit */
		fuse_log(FUSE_LOG_ERR, "zrfs: %s: %s/%llu: cannot store: %s\n", fs->dataset,
			 fs->fields[field].name, (unsigned long long)id, zr_errmsg(ds));
	return rc < 0 ? rc : (int64_t)zr_generation(ds);
}

/* Store what @f holds as its record's value and commit: the generation,
 * or a negative code (logged). Under @f's lock. */
static int64_t store(struct zrfs *fs, struct wfile *f)
{
	const struct zrfs_field *fd = &fs->fields[f->field];
	void *map = NULL;
	int64_t rc;

	if (fd->record_size && f->size != fd->record_size) {
		fuse_log(FUSE_LOG_ERR, "zrfs: %s: %s/%llu: %llu bytes written, the field's shape "
			 "takes %llu: not stored\n", fs->dataset, fd->name,
			 (unsigned long long)f->id, (unsigned long long)f->size,
			 (unsigned long long)fd->record_size);
		return -EINVAL;
	}
	if (f->size && (map = mmap(NULL, f->size, PROT_READ, MAP_SHARED, f->fd, 0)) == MAP_FAILED)
		return -errno;
	pthread_mutex_lock(&fs->writes->lock);
	rc = change(fs, f->field, f->id, (zr_value){map ? map : "", f->size});
	pthread_mutex_unlock(&fs->writes->lock);
	if (map)
		munmap(map, f->size);
	return rc;
}

/* ---- open files ---- */

/* Write all @n bytes at @off of @fd: 0 or -errno. */
static int write_at(int fd, const void *buf, size_t n, uint64_t off)
{
	const char *p = buf;

	while (n > 0) {
		ssize_t w = pwrite(fd, p, n, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

/* The longest value a record of field @f may take. */
static uint64_t value_max(const struct zrfs_field *f)
{
	return f->record_size ? f->record_size : ZR_RECORD_MAX;
}

/* A private file holding record (@field, @id) as it is now, unless
 * @truncate: 0 or -errno. */
static int wfile_make(struct zrfs *fs, unsigned field, uint64_t id, bool truncate,
		      struct wfile **out)
{
	zr_dataset *ds = fs->writes->ds;
	struct wfile *f = calloc(1, sizeof *f);
	zr_record_stat rs = {0};
	int rc = 0;

	if (!f)
		return -ENOMEM;
	pthread_mutex_init(&f->lock, NULL);
	f->field = field;
	f->id = id;
	f->dirty = truncate;
	f->fd = openat(fs->writes->dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (f->fd < 0)
		rc = -errno;
	else if (!truncate && id < zr_length(ds) && (rc = zr_stat(ds, field, id, &rs)) == 0 &&
		 rs.present && rs.logical_len > 0) {
		void *buf = malloc(rs.logical_len);
		int64_t got = buf ? zr_record_load(ds, field, id, buf, rs.logical_len) : -ENOMEM;
		if (got >= 0 && (rc = write_at(f->fd, buf, (size_t)got, 0)) < 0)
			got = rc;
		rc = got < 0 ? (int)got : 0;
		f->size = got < 0 ? 0 : (uint64_t)got;
		free(buf);
	}
	if (rc < 0) {
		if (f->fd >= 0)
			close(f->fd);
		pthread_mutex_destroy(&f->lock);
		free(f);
		return rc;
	}
	*out = f;
	return 0;
}

static void wfile_free(struct wfile *f)
{
	close(f->fd);
	pthread_mutex_destroy(&f->lock);
	free(f);
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
	struct wfile *f;
	unsigned field;
	uint64_t id;
	int rc;

	if (!record_of(fs, ino, &field, &id)) {
		fuse_reply_err(req, EPERM); /* meta.json, views, batches: made, not stored */
		return;
	}
	if ((rc = wfile_make(fs, field, id, (fi->flags & O_TRUNC) != 0, &f)) < 0) {
		zrfs_reply_err(req, rc);
		return;
	}
	fi->fh = (uintptr_t)f;
	fi->direct_io = 1;
	if (fuse_reply_open(req, fi) != 0)
		wfile_free(f); /* the opener is gone: no RELEASE comes */
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
	if ((uint64_t)off + size > value_max(&fs->fields[f->field])) {
		fuse_reply_err(req, EFBIG);
		return;
	}
	pthread_mutex_lock(&f->lock);
	n = write_at(f->fd, buf, size, (uint64_t)off);
	n = n < 0 ? n : (ssize_t)size;
	if (n > 0) {
		f->dirty = true;
		if ((uint64_t)off + size > f->size)
			f->size = (uint64_t)off + size;
	}
	pthread_mutex_unlock(&f->lock);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_write(req, (size_t)n);
}

void zrfs_write_read(fuse_req_t req, struct zrfs *fs, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct wfile *f = wfile_of(fi);
	char *buf = zrfs_scratch(ZRFS_SCRATCH_REPLY, size);
	ssize_t n;

	(void)fs;
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	n = pread(f->fd, buf, size, off);
	if (n < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

/* Store @f's value if it changed; answer @req when the mount shows it. */
static void settle(fuse_req_t req, struct zrfs *fs, struct wfile *f)
{
	int64_t gen = 0;

	pthread_mutex_lock(&f->lock);
	if (f->dirty) {
		gen = store(fs, f);
		f->dirty = false; /* a value refused stays refused: said once */
	}
	pthread_mutex_unlock(&f->lock);
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

	if (!f)
		fuse_reply_err(req, 0); /* opened for reading */
	else
		settle(req, fs, f);
}

void zrfs_write_release(fuse_req_t req, struct zrfs *fs, struct fuse_file_info *fi)
{
	struct wfile *f = wfile_of(fi);

	if (!f) {
		fuse_reply_err(req, 0);
		return;
	}
	/* every close flushed it; a change after (through a mapping) is stored now */
	pthread_mutex_lock(&f->lock);
	if (f->dirty)
		store(fs, f); /* the closer is gone: logged, not answered */
	pthread_mutex_unlock(&f->lock);
	if (f->ino) {
		pthread_mutex_lock(&fs->writes->created_lock);
		for (struct wfile **p = &fs->writes->created; *p; p = &(*p)->next)
			if (*p == f) {
				*p = f->next;
				break;
			}
		pthread_mutex_unlock(&fs->writes->created_lock);
	}
	wfile_free(f);
	if (req)
		fuse_reply_err(req, 0);
}

void zrfs_write_fsync(fuse_req_t req, struct zrfs *fs, struct fuse_file_info *fi)
{
	zrfs_write_flush(req, fs, fi); /* a change is a commit: durable when answered */
}

/* ---- names ---- */

/* The record @name names in field directory @parent, among ids up to the
 * length (@next: and the next one): 0, -EPERM (not a field directory or not
 * a record's name). */
static int name_of(struct zrfs *fs, fuse_ino_t parent, const char *name, bool next,
		   unsigned *field, uint64_t *id)
{
	uint64_t n = zr_length(fs->writes->ds);

	if (parent < ZRFS_INO_DIR || parent >= ZRFS_INO_DIR + fs->nfields)
		return -EPERM;
	*field = (unsigned)(parent - ZRFS_INO_DIR);
	if (zrfs_record_name_parse(&fs->fields[*field], name, next ? n + 1 : n, id) < 0) {
		fuse_log(FUSE_LOG_INFO, "zrfs: %s: %s/%s: not a record's name (records are "
			 "named by id; the next is %llu)\n", fs->dataset, fs->fields[*field].name,
			 name, (unsigned long long)n);
		return -EPERM;
	}
	return 0;
}

void zrfs_write_create(fuse_req_t req, struct zrfs *fs, fuse_ino_t parent, const char *name,
		       mode_t mode, struct fuse_file_info *fi)
{
	struct fuse_entry_param e;
	zr_record_stat rs = {0};
	struct zrfs_view *v;
	struct wfile *f;
	unsigned field;
	uint64_t id;
	int rc;

	(void)mode; /* every record file has the same mode */
	pthread_mutex_lock(&fs->writes->lock);
	rc = name_of(fs, parent, name, true, &field, &id);
	if (rc == 0 && id < zr_length(fs->writes->ds) &&
	    zr_stat(fs->writes->ds, field, id, &rs) == 0 && rs.present)
		rc = -EEXIST;
	pthread_mutex_unlock(&fs->writes->lock);
	if (rc == 0)
		rc = wfile_make(fs, field, id, true, &f);
	if (rc < 0) {
		zrfs_reply_err(req, rc);
		return;
	}
	memset(&e, 0, sizeof e);
	v = zrfs_names_begin(fs);
	e.ino = zrfs_rec_ino(field, id, zrfs_rec_version(fs, field, id));
	zrfs_file_attr(fs, v, e.ino, 0, &e.attr);
	zrfs_names_end(fs);
	/* not cached: until the value is committed the name is the writer's */
	e.attr_timeout = e.entry_timeout = 0;
	fi->fh = (uintptr_t)f;
	fi->direct_io = 1;
	f->ino = e.ino;
	pthread_mutex_lock(&fs->writes->created_lock);
	f->next = fs->writes->created;
	fs->writes->created = f;
	pthread_mutex_unlock(&fs->writes->created_lock);
	if (fuse_reply_create(req, &e, fi) != 0)
		zrfs_write_release(NULL, fs, fi); /* the creator is gone */
}

void zrfs_write_unlink(fuse_req_t req, struct zrfs *fs, fuse_ino_t parent, const char *name)
{
	zr_record_stat rs = {0};
	unsigned field;
	uint64_t id;
	int64_t rc;

	pthread_mutex_lock(&fs->writes->lock);
	rc = name_of(fs, parent, name, false, &field, &id);
	if (rc == 0 && (rc = zr_stat(fs->writes->ds, field, id, &rs)) == 0 && !rs.present)
		rc = -ENOENT;
	if (rc == 0)
		rc = change(fs, field, id, (zr_value){NULL, 0});
	pthread_mutex_unlock(&fs->writes->lock);
	if (rc < 0) {
		zrfs_reply_err(req, (int)rc);
		return;
	}
	zrfs_follow_publish(fs); /* the kernel holds the directory's lock: not told yet */
	fuse_reply_err(req, 0);
}

/* ---- attributes ---- */

void zrfs_write_setattr(fuse_req_t req, struct zrfs *fs, fuse_ino_t ino, struct stat *attr,
			int to_set, struct fuse_file_info *fi, const struct stat *now)
{
	struct wfile *f = wfile_of(fi), *own = NULL;
	struct stat st = *now;
	unsigned field;
	uint64_t id;
	int64_t rc = 0;

	if (((to_set & FUSE_SET_ATTR_MODE) && (attr->st_mode & 07777) != (now->st_mode & 07777)) ||
	    ((to_set & FUSE_SET_ATTR_UID) && attr->st_uid != now->st_uid) ||
	    ((to_set & FUSE_SET_ATTR_GID) && attr->st_gid != now->st_gid)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	if (!(to_set & FUSE_SET_ATTR_SIZE)) {
		fuse_reply_attr(req, &st, 0); /* times: the commit's, whatever is asked */
		return;
	}
	if (!f) { /* truncate(2) of a file not open: a change of its own */
		if (!record_of(fs, ino, &field, &id)) {
			fuse_reply_err(req, EPERM);
			return;
		}
		if ((rc = wfile_make(fs, field, id, false, &own)) < 0) {
			zrfs_reply_err(req, (int)rc);
			return;
		}
		f = own;
	}
	if ((uint64_t)attr->st_size > value_max(&fs->fields[f->field])) {
		rc = -EFBIG;
	} else {
		pthread_mutex_lock(&f->lock);
		if (ftruncate(f->fd, attr->st_size) < 0) {
			rc = -errno;
		} else {
			f->size = (uint64_t)attr->st_size;
			f->dirty = true;
		}
		pthread_mutex_unlock(&f->lock);
	}
	st.st_size = attr->st_size;
	st.st_blocks = (st.st_size + 511) / 512;
	if (rc == 0 && own) {
		pthread_mutex_lock(&own->lock);
		rc = store(fs, own);
		pthread_mutex_unlock(&own->lock);
	}
	if (own)
		wfile_free(own);
	if (rc < 0)
		zrfs_reply_err(req, (int)rc);
	else if (own)
		zrfs_follow_answer(fs, (uint64_t)rc, req, &st);
	else
		fuse_reply_attr(req, &st, 0);
}

bool zrfs_write_attr(struct zrfs *fs, fuse_ino_t ino, struct fuse_file_info *fi, struct stat *st)
{
	struct wfile *f = wfile_of(fi);
	uint64_t size;

	pthread_mutex_lock(&fs->writes->created_lock);
	for (struct wfile *c = fs->writes->created; c && !f; c = c->next)
		if (c->ino == ino)
			f = c;
	if (f) {
		pthread_mutex_lock(&f->lock);
		size = f->size;
		pthread_mutex_unlock(&f->lock);
	}
	pthread_mutex_unlock(&fs->writes->created_lock);
	if (!f)
		return false;
	st->st_size = (off_t)size;
	st->st_blocks = (blkcnt_t)((size + 511) / 512);
	return true;
}
