/*
 * values.c - the bytes of a value being written: in memory while small,
 * else in a private file (O_TMPFILE) in the dataset's directory, so that
 * nothing is written outside the dataset and the daemon's memory stays
 * bounded. An O_TMPFILE costs the filesystem an inode made and freed
 * (400 us on ext4, more than the rest of a small file's trip through the
 * mount), so small values never get one.
 *
 * Sections: memory, files, values.
 */
#include "write_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

/* ---- memory ---- */

static atomic_size_t mem_used; /* by every value in memory */

/* Make room for @size bytes in @v's memory: true, or false if it does not
 * fit there (the value then goes to a file). */
static bool mem_reserve(struct zrfs_value *v, uint64_t size)
{
	size_t cap = v->cap ? v->cap : 4096;
	char *mem;

	if (v->fd >= 0 || size > VALUE_MEM_MAX)
		return false;
	if (size <= v->cap)
		return true;
	while (cap < size)
		cap *= 2;
	if (atomic_fetch_add(&mem_used, cap - v->cap) + (cap - v->cap) > VALUE_MEM_BUDGET ||
	    !(mem = realloc(v->mem, cap))) {
		atomic_fetch_sub(&mem_used, cap - v->cap);
		return false;
	}
	v->mem = mem;
	v->cap = cap;
	return true;
}

static void mem_free(struct zrfs_value *v)
{
	free(v->mem);
	atomic_fetch_sub(&mem_used, v->cap);
	v->mem = NULL;
	v->cap = 0;
}

/* ---- files ---- */

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

/* Private files open at once: a quarter of the daemon's descriptors at
 * most (chunk files may take half, core/chunk.c), so that a program
 * keeping thousands of large values open leaves the rest to commits,
 * the follower and other programs' files. Past it, the value that needs
 * one is refused ENOSPC: the mount has no room for it until some close. */
static atomic_size_t files_used;
static size_t files_max = 16;

void zrfs_values_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		files_max = rl.rlim_cur / 4 > 16 ? (size_t)(rl.rlim_cur / 4) : 16;
	else
		files_max = 1 << 20;
}

static int private_file(int dirfd)
{
	int fd;

	if (atomic_fetch_add(&files_used, 1) >= files_max) {
		atomic_fetch_sub(&files_used, 1);
		if (zrfs_log_admit())
			fuse_log(FUSE_LOG_ERR,
				 "zrfs: %zu values being written are in private files, the most "
				 "a mount keeps open (a quarter of its descriptors): a write that "
				 "needs another is refused (ENOSPC) until some are closed\n",
				 files_max);
		return -ENOSPC;
	}
	if ((fd = openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600)) < 0) {
		atomic_fetch_sub(&files_used, 1);
		return -errno;
	}
	return fd;
}

static void private_close(int fd)
{
	close(fd);
	atomic_fetch_sub(&files_used, 1);
}

/* Move @v's bytes from memory to a private file: 0 or -errno. */
static int spill(struct zrfs_value *v, int dirfd)
{
	uint64_t size = atomic_load(&v->size);
	int fd, rc;

	if (v->fd >= 0)
		return 0;
	if ((fd = private_file(dirfd)) < 0)
		return fd;
	if ((rc = pwrite_full(fd, v->mem, size, 0)) < 0 ||
	    (ftruncate(fd, (off_t)size) < 0 && (rc = -errno) < 0)) {
		private_close(fd);
		return rc;
	}
	mem_free(v);
	v->fd = fd;
	return 0;
}

/* ---- values ---- */

#define MAP_EXTENTS_MAX 1024 /* a value's data mapped piece by piece up to this */

uint64_t zrfs_value_max(const struct zrfs_field *f)
{
	return f->record_size ? f->record_size : ZR_RECORD_MAX;
}

void zrfs_value_init(struct zrfs_value *v)
{
	v->mem = NULL;
	v->cap = 0;
	v->fd = -1;
	atomic_init(&v->size, 0);
}

void zrfs_value_free(struct zrfs_value *v)
{
	if (v->fd >= 0)
		private_close(v->fd);
	mem_free(v);
	v->fd = -1;
	atomic_store(&v->size, 0);
}

int zrfs_value_write(struct zrfs_value *v, int dirfd, const void *buf, size_t n, uint64_t off)
{
	uint64_t size = atomic_load(&v->size);
	int rc;

	if (n == 0)
		return 0;
	if (mem_reserve(v, off + n)) {
		if (off > size) /* a hole reads as zeros */
			memset(v->mem + size, 0, off - size);
		memcpy(v->mem + off, buf, n);
	} else if ((rc = spill(v, dirfd)) < 0 || (rc = pwrite_full(v->fd, buf, n, off)) < 0) {
		return rc;
	}
	if (off + n > size)
		atomic_store(&v->size, off + n);
	return 0;
}

ssize_t zrfs_value_read(const struct zrfs_value *v, void *buf, size_t n, uint64_t off)
{
	uint64_t size = atomic_load(&v->size);

	if (off >= size)
		return 0;
	if (n > size - off)
		n = (size_t)(size - off);
	if (v->fd >= 0) {
		ssize_t got = pread(v->fd, buf, n, (off_t)off);
		return got < 0 ? -errno : got;
	}
	memcpy(buf, v->mem + off, n);
	return (ssize_t)n;
}

int64_t zrfs_value_seek(const struct zrfs_value *v, uint64_t off, int whence)
{
	uint64_t size = atomic_load(&v->size);
	off_t at;

	if (off >= size || v->fd < 0)
		return zrfs_seek_plain(size, off, whence);
	if ((at = lseek(v->fd, (off_t)off, whence)) < 0 && errno != ENXIO)
		return zrfs_seek_plain(size, off, whence); /* a filesystem that cannot tell */
	if (at < 0 || (uint64_t)at >= size) /* ENXIO: a hole to the end */
		return whence == SEEK_DATA ? -ENXIO : (int64_t)size;
	return at;
}

int zrfs_value_truncate(struct zrfs_value *v, int dirfd, uint64_t size)
{
	uint64_t old = atomic_load(&v->size);
	int rc;

	if (mem_reserve(v, size)) {
		if (size > old)
			memset(v->mem + old, 0, size - old);
	} else if ((rc = spill(v, dirfd)) < 0) {
		return rc;
	} else if (ftruncate(v->fd, (off_t)size) < 0) {
		return -errno;
	}
	atomic_store(&v->size, size);
	return 0;
}

int zrfs_value_zero(struct zrfs_value *v, uint64_t off, uint64_t n)
{
	static const char zeros[64 << 10];
	uint64_t size = atomic_load(&v->size);
	int rc;

	if (off >= size)
		return 0;
	n = n < size - off ? n : size - off;
	if (v->fd < 0) {
		memset(v->mem + off, 0, n);
		return 0;
	}
	/* a hole in its file, where the filesystem makes them; else zeros */
	if (fallocate(v->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)n) == 0)
		return 0;
	if (errno != EOPNOTSUPP)
		return -errno;
	for (uint64_t done = 0; done < n; done += sizeof zeros) {
		size_t k = n - done < sizeof zeros ? (size_t)(n - done) : sizeof zeros;
		if ((rc = pwrite_full(v->fd, zeros, k, off + done)) < 0)
			return rc;
	}
	return 0;
}

int zrfs_value_load(struct zrfs_value *v, int dirfd, zr_dataset *ds, unsigned field,
		    uint64_t id)
{
	zr_record_stat rs = {0};
	int64_t got;
	int rc, fd;

	zrfs_value_free(v);
	if (id >= zr_length(ds))
		return 0; /* not a record yet: empty */
	if ((rc = zr_stat(ds, field, id, &rs)) < 0)
		return rc;
	if (!rs.present || rs.logical_len == 0)
		return 0; /* missing: empty */
	if (mem_reserve(v, rs.logical_len)) {
		got = zr_record_load(ds, field, id, v->mem, v->cap);
	} else {
		if ((fd = private_file(dirfd)) < 0)
			return fd;
		v->fd = fd;
		got = zr_record_copy(ds, field, id, fd);
	}
	if (got < 0) {
		zrfs_value_free(v);
		return (int)got;
	}
	atomic_store(&v->size, (uint64_t)got);
	return 0;
}

/* Map the data of @fd's first @size bytes over @base, an anonymous mapping
 * of that length, where its holes stay: they read as the zero page, not as
 * page cache pages zeroed for them (4 GiB of hole took 4 s of memset). 0,
 * or -1 where the file's extents cannot be told or are too many to map one
 * by one (the caller maps the file whole). */
static int map_data(int fd, uint8_t *base, uint64_t size)
{
	const uint64_t page = 4096;
	unsigned maps = 0;

	for (uint64_t at = 0; at < size;) {
		off_t data = lseek(fd, (off_t)at, SEEK_DATA), hole;
		if (data < 0 && errno == ENXIO)
			return 0; /* holes to the end */
		if (data < 0 || (hole = lseek(fd, data, SEEK_HOLE)) < 0 || ++maps > MAP_EXTENTS_MAX)
			return -1;
		uint64_t from = (uint64_t)data / page * page;
		uint64_t to = (uint64_t)hole < size ? (uint64_t)hole : size;
		to = (to + page - 1) / page * page;
		if (mmap(base + from, to - from, PROT_READ, MAP_SHARED | MAP_FIXED, fd,
			 (off_t)from) == MAP_FAILED)
			return -1;
		at = to;
	}
	return 0;
}

int zrfs_value_bytes(const struct zrfs_value *v, zr_value *out, void **map)
{
	uint64_t size = atomic_load(&v->size);
	void *p;

	*map = NULL;
	out->len = (size_t)size;
	out->data = v->mem ? v->mem : ""; /* present, even when empty */
	if (v->fd < 0 || size == 0)
		return 0;
	/* the page cache's pages, not a copy in the daemon's memory */
	p = mmap(NULL, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p != MAP_FAILED && map_data(v->fd, p, size) < 0) {
		munmap(p, size);
		p = MAP_FAILED;
	}
	if (p == MAP_FAILED &&
	    (p = mmap(NULL, size, PROT_READ, MAP_SHARED, v->fd, 0)) == MAP_FAILED)
		return -errno;
	*map = p;
	out->data = p;
	return 0;
}

void zrfs_value_unmap(void *map, size_t len)
{
	if (map)
		munmap(map, len);
}
