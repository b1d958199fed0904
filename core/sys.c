/*
 * sys.c - the system calls of the store, behind one table of pointers.
 *
 * Every call that touches the dataset's files goes through zr_sys, so tests
 * can make any of them fail (EIO, ENOSPC, short writes) at a chosen moment
 * without touching the code under test. Also the full-transfer helpers.
 */
#include "store_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

/* Size and type of the file @name under @dirfd ("": @dirfd itself, an
 * open file) as its filesystem has it now: on a filesystem shared with
 * other machines (FUSE clients such as GlusterFS, NFS) a forced
 * revalidation, so that bytes another machine appended and committed are
 * seen, and pages this machine cached before they were written are
 * dropped; on a local filesystem the same as fstat. 0 or -errno. */
int zr_fresh_stat(int dirfd, const char *name, struct statx *sx)
{
	int flags = AT_STATX_FORCE_SYNC | (name[0] ? AT_SYMLINK_NOFOLLOW : AT_EMPTY_PATH);

	return statx(dirfd, name, flags, STATX_TYPE | STATX_SIZE, sx) < 0 ? -errno : 0;
}

/* Whether the filesystem of @fd may be shared with other machines, whose
 * commits a client here can see late (its cache of sizes): FUSE (GlusterFS,
 * CephFS's and others' clients), NFS, SMB, CephFS, 9P, Lustre, GPFS, AFS,
 * OCFS2, GFS2. Local filesystems never are. */
bool zr_fs_shared(int fd)
{
	static const unsigned long shared[] = {
		0x65735546, /* FUSE */   0x6969,     /* NFS */    0xff534d42, /* CIFS */
		0xfe534d42, /* SMB2 */   0x00c36400, /* Ceph */   0x01021997, /* 9P */
		0x0bd00bd0, /* Lustre */ 0x47504653, /* GPFS */   0x5346414f, /* AFS */
		0x7461636f, /* OCFS2 */  0x01161970, /* GFS2 */
	};
	struct statfs sf;

	if (zr_sys.fstatfs(fd, &sf) < 0)
		return false;
	for (size_t i = 0; i < sizeof shared / sizeof shared[0]; i++)
		if ((unsigned long)sf.f_type == shared[i])
			return true;
	return false;
}

/* A dataset's files are opened by single names relative to its directory
 * and never through a symbolic link: otherwise whoever can write into a
 * dataset directory could make a reader (zrfs, perhaps root) read any file
 * on the machine and serve it. Nor is anything but a regular file (or the
 * directory asked for) taken: a FIFO would block the open, or every read,
 * forever, so the open does not wait, and what it opened is looked at
 * before anyone reads it (ENXIO: see zr_open_strerror). */
static int sys_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	int fd = openat(dirfd, path, flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, mode);
	struct stat st;

	if (fd < 0) {
		/* with O_DIRECTORY, a link is ENOTDIR: say what it is */
		if (errno == ENOTDIR && (flags & O_DIRECTORY) &&
		    fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
			errno = ELOOP;
		return -1; /* a FIFO opened for writing with no reader: ENXIO */
	}
	if (fstat(fd, &st) < 0)
		goto fail;
	if (!((flags & O_DIRECTORY) ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode))) {
		errno = ENXIO;
		goto fail;
	}
	/* back to blocking reads: only the status flags change */
	if (!(flags & O_NONBLOCK) && fcntl(fd, F_SETFL, flags & ~(O_NONBLOCK | O_ACCMODE)) < 0)
		goto fail;
	return fd;
fail:;
	int e = errno;
	close(fd);
	errno = e;
	return -1;
}

int zr_create_fresh(int dirfd, const char *name, int access)
{
	if (zr_sys.unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
		return -1;
	return zr_sys.openat(dirfd, name, access | O_CREAT | O_EXCL, 0644);
}

const char *zr_open_strerror(int e)
{
	if (e == ENXIO)
		return "not a regular file: refused";
	return e == ELOOP ? "a symbolic link (not followed out of a dataset)" : strerror(e);
}

int zr_write_durable(int dirfd, const char *dir, const char *name, const void *buf, size_t n)
{
	int fd = zr_create_fresh(dirfd, name, O_WRONLY), rc;

	if (fd < 0)
		return zr_err(-errno, "%s/%s: %s", dir, name, zr_open_strerror(errno));
	rc = zr_write_full(fd, buf, n, 0);
	if (rc == 0 && zr_sys.fsync(fd) < 0)
		rc = -errno;
	close(fd);
	if (rc < 0) {
		zr_sys.unlinkat(dirfd, name, 0);
		return zr_err(rc, "%s/%s: write failed: %s", dir, name, strerror(-rc));
	}
	return 0;
}

int zr_replace_durable(int dirfd, const char *dir, const char *tmp, const char *name,
		       const void *buf, size_t n)
{
	int rc = zr_write_durable(dirfd, dir, tmp, buf, n);

	if (rc < 0)
		return rc;
	if (zr_sys.renameat(dirfd, tmp, dirfd, name) < 0) {
		rc = -errno;
		zr_sys.unlinkat(dirfd, tmp, 0);
		return zr_err(rc, "%s/%s: rename failed: %s", dir, name, strerror(-rc));
	}
	if (zr_sys.fsync(dirfd) < 0)
		return zr_err(-errno, "%s: fsync of the directory failed: %s", dir,
			      strerror(errno));
	return 0;
}

static void *sys_mremap(void *old, size_t old_len, size_t new_len, int flags)
{
	return mremap(old, old_len, new_len, flags);
}

/* One initializer for both: C does not let a const object initialise another. */
#define REAL_SYS                                                                                   \
	{                                                                                          \
		.openat = sys_openat, .pread = pread, .pwrite = pwrite, .fsync = fsync,            \
		.fdatasync = fdatasync, .renameat = renameat, .unlinkat = unlinkat,                \
		.ftruncate = ftruncate, .fallocate = fallocate, .mmap = mmap,                      \
		.mremap = sys_mremap, .fstatfs = fstatfs,                                          \
	}

static const struct zr_sys real_sys = REAL_SYS;

struct zr_sys zr_sys = REAL_SYS;

void zr_sys_reset(void)
{
	zr_sys = real_sys;
}

/* Make @fd at least @size bytes with every block behind them allocated,
 * before anything stores through a shared mapping of it: a full disk is
 * then ENOSPC here, never SIGBUS at the store. Where fallocate is not
 * supported, the missing bytes are written as zeros (slower, as sure).
 * 0 or -errno. */
int zr_file_reserve(int fd, uint64_t size)
{
	static const uint8_t zeros[65536];
	struct stat st;

	if (size == 0 || zr_sys.fallocate(fd, 0, 0, (off_t)size) == 0)
		return 0;
	if (errno != EOPNOTSUPP && errno != ENOSYS)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	for (uint64_t at = (uint64_t)st.st_size; at < size;) {
		size_t n = size - at < sizeof zeros ? (size_t)(size - at) : sizeof zeros;
		int rc = zr_write_full(fd, zeros, n, at);
		if (rc < 0)
			return rc;
		at += n;
	}
	return 0;
}

int zr_write_full(int fd, const void *buf, size_t n, uint64_t off)
{
	const uint8_t *p = buf;

	while (n > 0) {
		ssize_t w = zr_sys.pwrite(fd, p, n, (off_t)off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (w == 0)
			return -EIO;
		p += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

#define PAGE 4096

static bool page_zero(const uint8_t *p)
{
	static const uint8_t zeros[PAGE];

	return p[0] == 0 && p[PAGE - 1] == 0 && memcmp(p, zeros, PAGE) == 0;
}

int zr_write_sparse(int fd, const void *buf, size_t n, uint64_t off)
{
	const uint8_t *p = buf;
	size_t done = 0, i = (size_t)((PAGE - off % PAGE) % PAGE), run = SIZE_MAX;
	int rc;

	if (n < ZR_HOLE_MIN)
		return zr_write_full(fd, p, n, off);
	/* whole pages of zeros make a run; one long enough, ended by a page
	 * with data or by the last whole page, is skipped */
	for (bool last = false; !last; i += PAGE) {
		last = i + PAGE > n;
		if (!last && page_zero(p + i)) {
			if (run == SIZE_MAX)
				run = i;
			continue;
		}
		if (run != SIZE_MAX && i - run >= ZR_HOLE_MIN) {
			if ((rc = zr_write_full(fd, p + done, run - done, off + done)) < 0)
				return rc;
			done = i;
		}
		run = SIZE_MAX;
	}
	if (done < n)
		return zr_write_full(fd, p + done, n - done, off + done);
	/* the value ends in a hole: the file still ends at its last byte */
	return zr_sys.ftruncate(fd, (off_t)(off + n)) < 0 ? -errno : 0;
}

int zr_read_full(int fd, void *buf, size_t n, uint64_t off)
{
	uint8_t *p = buf;

	while (n > 0) {
		ssize_t r = zr_sys.pread(fd, p, n, (off_t)off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -ENODATA; /* end of file before n bytes */
		p += r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}
