/*
 * readers.c - which committed states readers may still be reading.
 *
 * A read-only handle holds a shared lock on one byte of DATASET/readers, the
 * byte whose offset is the generation it reads, for as long as it is open.
 * Before a writer changes anything a reader of an older state could look at
 * (table entries of records that state has, see commit.c), it asks the
 * kernel whether any byte below the current generation is locked. The file
 * is empty: only its locks mean something.
 *
 * The locks are open file description locks (F_OFD_*): they go away when
 * the reader's process dies, however it dies, so a crashed reader never
 * blocks a writer for good; and unlike classic POSIX locks, a reader and a
 * writer in one process see each other's. Where the file cannot be opened
 * or locks are not supported, readers read without registering and writers
 * see none: the protocol degrades to the one without readers (FORMAT.md).
 *
 * A writer also holds an exclusive lock on one byte far above every
 * generation: its flock(2) on the directory keeps writers on one machine
 * apart, this lock those on machines that share the filesystem.
 *
 * Sections: opening, a reader's lock, the writer's lock, a writer's questions.
 */
#include "store_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#define READERS "readers"

/* ---- opening ---- */

int zr_readers_open(zr_dataset *ds)
{
	bool rw = ds->flags & ZR_RDWR;

	ds->readersfd = zr_sys.openat(ds->dirfd, READERS, rw ? O_RDWR | O_CREAT : O_RDONLY, 0644);
	/* a reader of a dataset no writer of this version has opened yet, or
	 * on read-only media: it reads without registering */
	RETURN_IF(ds->readersfd < 0 && rw, -errno, "%s/" READERS ": cannot open: %s", ds->path,
		  zr_open_strerror(errno));
	return 0;
}

/* ---- a reader's lock ---- */

int zr_readers_hold(zr_dataset *ds, uint64_t generation)
{
	struct flock l = {.l_type = F_RDLCK, .l_whence = SEEK_SET,
			  .l_start = (off_t)generation, .l_len = 1};

	if (ds->readersfd < 0 || generation > INT64_MAX)
		return 0;
	/* another reader's shared lock never conflicts, and writers only ask:
	 * this cannot block */
	if (fcntl(ds->readersfd, F_OFD_SETLK, &l) < 0 && errno != EINVAL && errno != ENOLCK)
		return zr_err(-errno, "%s/" READERS ": cannot lock: %s", ds->path, strerror(errno));
	return 0;
}

/* ---- the writer's lock ---- */

/* The byte a writer locks exclusively, far above any generation. */
#define WRITER_BYTE (INT64_MAX - 1)

int zr_readers_claim_writer(zr_dataset *ds)
{
	struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = WRITER_BYTE,
			  .l_len = 1};

	/* the writer's flock on the directory is only seen on this machine
	 * where the filesystem is shared (GlusterFS): this lock is seen by
	 * the other machines' writers too, where the filesystem has locks */
	if (ds->readersfd < 0 || fcntl(ds->readersfd, F_OFD_SETLK, &l) == 0)
		return 0;
	if (errno == EAGAIN || errno == EACCES)
		return -EBUSY;
	return errno == EINVAL || errno == ENOLCK || errno == EOPNOTSUPP
		       ? 0
		       : zr_err(-errno, "%s/" READERS ": cannot lock: %s", ds->path,
				strerror(errno));
}

/* ---- a writer's questions ---- */

/* Whether some reader holds a byte in [@from, @to). */
static bool locked(const zr_dataset *ds, uint64_t from, uint64_t to)
{
	struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = (off_t)from,
			  .l_len = (off_t)(to - from)};

	if (ds->readersfd < 0 || from >= to || from > INT64_MAX)
		return false;
	if (to > INT64_MAX)
		l.l_len = 0; /* to the end */
	if (fcntl(ds->readersfd, F_OFD_GETLK, &l) < 0)
		return false; /* no locks here: no readers the writer can know of */
	return l.l_type != F_UNLCK;
}

bool zr_readers_before(const zr_dataset *ds, uint64_t generation)
{
	return locked(ds, 0, generation);
}

bool zr_readers_at(const zr_dataset *ds, uint64_t generation)
{
	return locked(ds, generation, generation + 1);
}

uint64_t zr_readers_oldest(const zr_dataset *ds, uint64_t below)
{
	uint64_t lo = 0, hi = below;

	if (!locked(ds, 0, below))
		return below;
	/* the smallest k with a lock in [0, k + 1): a binary search of
	 * questions, as the kernel names one conflicting lock, not the first */
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (locked(ds, 0, mid + 1))
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}
