/*
 * writer.c - the bottom of a writable mount (-o rw): the dataset's writer,
 * held for as long as the mount, and the values being written (struct
 * wfile: in memory, or a private O_TMPFILE in the dataset's directory when
 * large, so that nothing is written outside the dataset), stored as
 * records' values.
 *
 * Sections: the writer, values, files being written.
 */
#include "write_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the writer ---- */

int zrfs_writes_open(struct zrfs *fs, const char *mountpoint)
{
	struct zrfs_writes *w = calloc(1, sizeof *w);
	char *where = realpath(mountpoint, NULL);
	int rc;

	if (!w) {
		free(where);
		fprintf(stderr, "zrfs: out of memory\n");
		return -1;
	}
	pthread_mutex_init(&w->lock, NULL);
	pthread_mutex_init(&w->names_lock, NULL);
	pthread_mutex_init(&w->fresh_lock, NULL);
	pthread_cond_init(&w->wake, NULL);
	w->commit_ms = fs->opts.commit_ms;
	w->commit_bytes = fs->opts.commit_bytes;
	w->dirfd = -1;
	fs->writes = w;
	if ((rc = zr_open(&w->ds, fs->dataset, ZR_RDWR)) < 0) {
		fprintf(stderr, "zrfs: cannot mount read-write: %s\n", zr_errmsg(NULL));
		free(where);
		return -1;
	}
	w->dirfd = open(fs->dataset, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (w->dirfd < 0) {
		fprintf(stderr, "zrfs: %s: %s\n", fs->dataset, strerror(errno));
		free(where);
		return -1;
	}
	/* named before the mount appears, so that a writer refused from then
	 * on is told which mount holds the dataset */
	snprintf(w->holder, sizeof w->holder, "zrfs mount on %s", where ? where : mountpoint);
	free(where);
	zr_holder_set(w->ds, w->holder); /* only a message: best effort */
	return 0;
}

void zrfs_writer_close(struct zrfs *fs)
{
	struct zrfs_writes *w = fs->writes;

	zr_close(w->ds); /* every change was committed when it was stored */
	if (w->dirfd >= 0)
		close(w->dirfd);
	pthread_mutex_destroy(&w->lock);
	pthread_mutex_destroy(&w->names_lock);
	pthread_mutex_destroy(&w->fresh_lock);
	pthread_cond_destroy(&w->wake);
	free(w);
	fs->writes = NULL;
}

/* ---- values ---- */

/* Make (@field, @id) hold @v, not committed. Under the writer's lock. */
static int set_value(struct zrfs *fs, unsigned field, uint64_t id, zr_value v)
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
	if (rc < 0) /* a change made but not committed goes with the next commit */
		fuse_log(FUSE_LOG_ERR, "zrfs: %s: %s/%llu: cannot store: %s\n", fs->dataset,
			 fs->fields[field].name, (unsigned long long)id, zr_errmsg(ds));
	return rc;
}

int64_t zrfs_commit_now(struct zrfs *fs)
{
	struct zrfs_writes *w = fs->writes;
	int rc = zr_commit(w->ds);

	if (rc < 0) {
		fuse_log(FUSE_LOG_ERR, "zrfs: %s: cannot commit: %s\n", fs->dataset,
			 zr_errmsg(w->ds));
		return rc;
	}
	w->commits++;
	pthread_cond_signal(&w->wake); /* new files it took along are committed */
	return (int64_t)zr_generation(w->ds);
}

int64_t zrfs_change(struct zrfs *fs, unsigned field, uint64_t id, zr_value v)
{
	int rc = set_value(fs, field, id, v);

	return rc < 0 ? rc : zrfs_commit_now(fs);
}

int64_t zrfs_wfile_store(struct zrfs *fs, struct wfile *f, uint64_t id, bool commit)
{
	const struct zrfs_field *fd = &fs->fields[f->field];
	void *map = NULL;
	int64_t rc;

	if (fd->record_size && f->size != fd->record_size) {
		fuse_log(FUSE_LOG_ERR, "zrfs: %s: %s/%llu: %llu bytes written, the field's shape "
			 "takes %llu: not stored\n", fs->dataset, fd->name,
			 (unsigned long long)id, (unsigned long long)f->size,
			 (unsigned long long)fd->record_size);
		return -EINVAL;
	}
	if (f->fd >= 0 && f->size &&
	    (map = mmap(NULL, f->size, PROT_READ, MAP_SHARED, f->fd, 0)) == MAP_FAILED)
		return -errno;
	rc = set_value(fs, f->field, id, (zr_value){map ? map : f->mem ? f->mem : "", f->size});
	if (rc == 0 && commit)
		rc = zrfs_commit_now(fs);
	if (map)
		munmap(map, f->size);
	return rc;
}

/* ---- files being written ---- */

/* A value is kept in memory while it is written, up to WFILE_MEM_MAX
 * bytes and while all of them together take less than WFILE_MEM_BUDGET;
 * beyond, it moves to a private file (an O_TMPFILE costs the filesystem
 * an inode made and freed: 400 us on ext4, more than the rest of a small
 * file's trip through the mount). */
#define WFILE_MEM_MAX (1u << 20)
#define WFILE_MEM_BUDGET ((size_t)64 << 20)

static atomic_size_t mem_used; /* by every value in memory */

static int pwrite_full(int fd, const void *buf, size_t n, uint64_t off)
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
uint64_t zrfs_value_max(const struct zrfs_field *f)
{
	return f->record_size ? f->record_size : ZR_RECORD_MAX;
}

/* Make room for @size bytes in @f's memory: true, or false if it does not
 * fit there (the value then goes to a file). */
static bool mem_reserve(struct wfile *f, uint64_t size)
{
	size_t cap = f->cap ? f->cap : 4096;
	char *mem;

	if (f->fd >= 0 || size > WFILE_MEM_MAX)
		return false;
	if (size <= f->cap)
		return true;
	while (cap < size)
		cap *= 2;
	if (atomic_fetch_add(&mem_used, cap - f->cap) + (cap - f->cap) > WFILE_MEM_BUDGET ||
	    !(mem = realloc(f->mem, cap))) {
		atomic_fetch_sub(&mem_used, cap - f->cap);
		return false;
	}
	f->mem = mem;
	f->cap = cap;
	return true;
}

static void mem_free(struct wfile *f)
{
	free(f->mem);
	atomic_fetch_sub(&mem_used, f->cap);
	f->mem = NULL;
	f->cap = 0;
}

/* Move @f's bytes from memory to a private file: 0 or -errno. */
static int spill(struct zrfs *fs, struct wfile *f)
{
	int fd, rc;

	if (f->fd >= 0)
		return 0;
	fd = openat(fs->writes->dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if ((rc = pwrite_full(fd, f->mem, f->size, 0)) < 0 ||
	    (ftruncate(fd, (off_t)f->size) < 0 && (rc = -errno) < 0)) {
		close(fd);
		return rc;
	}
	mem_free(f);
	f->fd = fd;
	return 0;
}

int zrfs_wfile_pwrite(struct zrfs *fs, struct wfile *f, const void *buf, size_t n, uint64_t off)
{
	int rc;

	if (n == 0)
		return 0;
	if (mem_reserve(f, off + n)) {
		if (off > f->size) /* a hole reads as zeros */
			memset(f->mem + f->size, 0, off - f->size);
		memcpy(f->mem + off, buf, n);
	} else if ((rc = spill(fs, f)) < 0 || (rc = pwrite_full(f->fd, buf, n, off)) < 0) {
		return rc;
	}
	if (off + n > f->size)
		f->size = off + n;
	return 0;
}

ssize_t zrfs_wfile_pread(struct wfile *f, void *buf, size_t n, uint64_t off)
{
	if (f->fd >= 0) {
		ssize_t got = pread(f->fd, buf, n, (off_t)off);
		return got < 0 ? -errno : got;
	}
	if (off >= f->size)
		return 0;
	if (n > f->size - off)
		n = (size_t)(f->size - off);
	memcpy(buf, f->mem + off, n);
	return (ssize_t)n;
}

int zrfs_wfile_truncate(struct zrfs *fs, struct wfile *f, uint64_t size)
{
	int rc;

	if (mem_reserve(f, size)) {
		if (size > f->size)
			memset(f->mem + f->size, 0, size - f->size);
	} else if ((rc = spill(fs, f)) < 0) {
		return rc;
	} else if (ftruncate(f->fd, (off_t)size) < 0) {
		return -errno;
	}
	f->size = size;
	return 0;
}

int zrfs_wfile_make(struct zrfs *fs, unsigned field, uint64_t id, bool truncate,
		    struct wfile **out)
{
	zr_dataset *ds = fs->writes->ds;
	struct wfile *f = calloc(1, sizeof *f);
	zr_record_stat rs = {0};
	int rc = 0;

	if (!f)
		return -ENOMEM;
	pthread_mutex_init(&f->lock, NULL);
	atomic_init(&f->refs, 1);
	f->field = field;
	f->id = id;
	f->dirty = truncate;
	f->fd = -1;
	if (!truncate && id != NO_ID && id < zr_length(ds) && (rc = zr_stat(ds, field, id, &rs)) == 0 &&
	    rs.present && rs.logical_len > 0) {
		void *buf = malloc(rs.logical_len);
		int64_t got = buf ? zr_record_load(ds, field, id, buf, rs.logical_len) : -ENOMEM;
		if (got >= 0)
			got = zrfs_wfile_pwrite(fs, f, buf, (size_t)got, 0);
		rc = got < 0 ? (int)got : 0;
		free(buf);
	}
	if (rc < 0) {
		zrfs_wfile_put(f);
		return rc;
	}
	*out = f;
	return 0;
}

struct wfile *zrfs_wfile_ref(struct wfile *f)
{
	atomic_fetch_add(&f->refs, 1);
	return f;
}

void zrfs_wfile_put(struct wfile *f)
{
	if (!f || atomic_fetch_sub(&f->refs, 1) != 1)
		return;
	if (f->fd >= 0)
		close(f->fd);
	mem_free(f);
	pthread_mutex_destroy(&f->lock);
	free(f);
}
