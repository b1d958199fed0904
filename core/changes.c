/*
 * changes.c - the change log: which records of earlier committed states a
 * commit changed, so that a reader following the dataset learns what to
 * forget in time proportional to the changes, not to the dataset.
 *
 * DATASET/changes: "ZRCHANG1", then u64 `first`: the log holds the changes
 * of every commit with a generation above `first`. Then records of 24
 * bytes, {generation u64, field u32, 0 u32, id u64}: at that generation the
 * entry of (field, id) was written through the journal, which is where every
 * change to a record an older state has goes (commit.c). New ids above all
 * older states' lengths are not logged: a reader sees them from the length.
 *
 * A writer appends the records of a commit and makes them durable before
 * the commit point, so a committed generation's changes are always there; a
 * crash before it leaves records of a generation meta.json does not have,
 * which readers never ask for and a later commit of that number only adds
 * to (a change listed that did not happen costs a reader a cache miss,
 * nothing more). Past zr_changes_max bytes (4 MiB) the writer rewrites the log keeping
 * what registered readers may still ask for, but half that bound at most
 * (whole generations, the newest), and renames it into place: the log stays
 * below the bound, and is rewritten once per half of it, whatever a reader
 * holds. A reader that asks for changes from before the log's start is told
 * -ESTALE and compares every record instead (zr_changes).
 *
 * Sections: writing, compaction, reading.
 */
#include "store_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHANGES "changes"
#define CHANGES_TMP "changes.tmp"
#define CHANGES_MAGIC "ZRCHANG1"
#define CHANGES_HDR 16
#define CHANGES_REC 24

uint64_t zr_changes_max = 4u << 20;

static void encode(uint8_t *p, uint64_t generation, unsigned field, uint64_t id)
{
	zr_put_le64(p, generation);
	zr_put_le64(p + 8, field);
	zr_put_le64(p + 16, id);
}

/* The records of the overlay slots set for @generation, encoded: malloc'd,
 * *n records. */
static int collect(zr_dataset *ds, uint64_t generation, uint8_t **out, size_t *n)
{
	zr_overlay *o = &ds->overlay;
	uint8_t *buf;
	size_t k = 0;

	for (uint64_t i = 0; i < o->cap; i++)
		k += o->slots[i].key && o->slots[i].gen == generation;
	buf = malloc(k * CHANGES_REC + 1);
	RETURN_IF(!buf, -ENOMEM, "out of memory");
	k = 0;
	for (uint64_t i = 0; i < o->cap; i++) {
		uint64_t key = o->slots[i].key;
		if (key && o->slots[i].gen == generation)
			encode(buf + CHANGES_REC * k++, generation, (unsigned)((key - 1) % ds->nfields),
			       (key - 1) / ds->nfields);
	}
	*out = buf;
	*n = k;
	return 0;
}

/* ---- compaction ---- */

/* The generation below which records of the log @old (@size bytes) go so
 * that those kept, above @first, take at most @budget bytes: whole
 * generations, the newest kept (records are in order of generation). */
static uint64_t first_within(const uint8_t *old, uint64_t size, uint64_t first, uint64_t budget)
{
	uint64_t kept = 0, end = CHANGES_HDR + (size - CHANGES_HDR) / CHANGES_REC * CHANGES_REC;

	for (uint64_t p = end; p >= CHANGES_HDR + CHANGES_REC; p -= CHANGES_REC) {
		uint64_t g = zr_le64(old + p - CHANGES_REC);
		if (g <= first)
			break;
		if ((kept += CHANGES_REC) > budget)
			return g; /* g and older go */
	}
	return first;
}

/* Rewrite the log as `first` = @first (raised until what is kept of @fd's
 * records takes at most @budget bytes), those records above it, then @add
 * (@nadd records); renamed into place, durable. */
static int rewrite(zr_dataset *ds, int fd, uint64_t size, uint64_t first, uint64_t budget,
		   const uint8_t *add, size_t nadd)
{
	uint8_t *old = malloc(size + 1), *buf = malloc(size + nadd * CHANGES_REC + CHANGES_HDR);
	uint64_t at = CHANGES_HDR;
	int out = -1, rc = 0;

	if (!old || !buf) {
		rc = zr_err(-ENOMEM, "out of memory");
		goto done;
	}
	if (size > CHANGES_HDR && (rc = zr_read_full(fd, old, size, 0)) < 0) {
		rc = zr_err(rc == -ENODATA ? -EIO : rc, "%s/" CHANGES ": read failed", ds->path);
		goto done;
	}
	if (size > CHANGES_HDR)
		first = first_within(old, size, first, budget);
	memcpy(buf, CHANGES_MAGIC, 8);
	zr_put_le64(buf + 8, first);
	for (uint64_t p = CHANGES_HDR; size > CHANGES_HDR && p + CHANGES_REC <= size;
	     p += CHANGES_REC)
		if (zr_le64(old + p) > first) {
			memcpy(buf + at, old + p, CHANGES_REC);
			at += CHANGES_REC;
		}
	memcpy(buf + at, add, nadd * CHANGES_REC);
	at += nadd * CHANGES_REC;
	out = zr_create_fresh(ds->dirfd, CHANGES_TMP, O_WRONLY);
	if (out < 0 || (rc = zr_write_full(out, buf, at, 0)) < 0 || zr_sys.fdatasync(out) < 0 ||
	    zr_sys.renameat(ds->dirfd, CHANGES_TMP, ds->dirfd, CHANGES) < 0)
		rc = zr_err(rc < 0 ? rc : -errno, "%s/" CHANGES ": cannot rewrite: %s", ds->path,
			    strerror(rc < 0 ? -rc : errno));
done:
	if (out >= 0)
		close(out);
	free(old);
	free(buf);
	return rc;
}

/* ---- writing ---- */

int zr_changes_append(zr_dataset *ds, uint64_t generation)
{
	uint8_t hdr[CHANGES_HDR], *recs = NULL;
	struct stat st;
	size_t n = 0;
	int fd, rc;

	FORWARD_IF_ERR(collect(ds, generation, &recs, &n));
	if (n == 0) { /* the journal only carries earlier commits' changes */
		free(recs);
		return 0;
	}
	fd = zr_sys.openat(ds->dirfd, CHANGES, O_RDWR | O_CREAT, 0644);
	if (fd < 0) {
		free(recs);
		return zr_err(-errno, "%s/" CHANGES ": cannot open: %s", ds->path,
			      zr_open_strerror(errno));
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < CHANGES_HDR ||
	    zr_read_full(fd, hdr, CHANGES_HDR, 0) < 0 || memcmp(hdr, CHANGES_MAGIC, 8) != 0) {
		/* new, or damaged: it starts over, complete from the last commit */
		rc = rewrite(ds, fd, 0, ds->generation, 0, recs, n);
	} else if ((uint64_t)st.st_size + n * CHANGES_REC > zr_changes_max) {
		/* keep what the oldest registered reader may still ask for, but
		 * half the bound at most: a reader that holds an old state for
		 * ever then compares instead (-ESTALE), and a commit does not
		 * rewrite an ever larger log */
		uint64_t keep = zr_readers_oldest(ds, ds->generation);
		uint64_t first = zr_le64(hdr + 8) > keep ? zr_le64(hdr + 8) : keep;
		rc = rewrite(ds, fd, (uint64_t)st.st_size, first, zr_changes_max / 2, recs, n);
	} else {
		/* after the last whole record: a crash may have left half of one */
		uint64_t end = CHANGES_HDR +
			       ((uint64_t)st.st_size - CHANGES_HDR) / CHANGES_REC * CHANGES_REC;
		rc = zr_write_full(fd, recs, n * CHANGES_REC, end);
		if (rc == 0 && zr_sys.fdatasync(fd) < 0)
			rc = -errno;
		if (rc < 0)
			rc = zr_err(rc, "%s/" CHANGES ": write failed: %s", ds->path, strerror(-rc));
	}
	close(fd);
	free(recs);
	return rc;
}

/* ---- reading ---- */

int zr_changes(zr_dataset *ds, uint64_t since, zr_change_cb cb, void *ctx)
{
	uint8_t buf[CHANGES_HDR + 2730 * CHANGES_REC];
	uint64_t at = CHANGES_HDR, size;
	struct stat st;
	int fd, rc = 0;

	RETURN_IF(since > ds->generation, -EINVAL,
		  "%s: generation %llu is newer than the handle's (%llu)", ds->path,
		  (unsigned long long)since, (unsigned long long)ds->generation);
	if (since == ds->generation)
		return 0;
	fd = zr_sys.openat(ds->dirfd, CHANGES, O_RDONLY, 0);
	RETURN_IF(fd < 0, errno == ENOENT ? -ESTALE : -errno, "%s/" CHANGES ": %s", ds->path,
		  errno == ENOENT ? "no change log: every record may have changed"
				  : zr_open_strerror(errno));
	if (fstat(fd, &st) < 0 || st.st_size < CHANGES_HDR ||
	    zr_read_full(fd, buf, CHANGES_HDR, 0) < 0 || memcmp(buf, CHANGES_MAGIC, 8) != 0 ||
	    zr_le64(buf + 8) > since) {
		close(fd);
		return zr_err(-ESTALE, "%s/" CHANGES ": does not reach back to generation %llu: "
				       "every record may have changed",
			      ds->path, (unsigned long long)since);
	}
	size = (uint64_t)st.st_size;
	while (at + CHANGES_REC <= size && rc == 0) {
		size_t want = sizeof buf - CHANGES_HDR;
		if (want > size - at)
			want = (size_t)(size - at) / CHANGES_REC * CHANGES_REC;
		if ((rc = zr_read_full(fd, buf, want, at)) < 0) {
			rc = zr_err(rc == -ENODATA ? -EIO : rc, "%s/" CHANGES ": read failed",
				    ds->path);
			break;
		}
		for (size_t p = 0; p < want; p += CHANGES_REC) {
			uint64_t g = zr_le64(buf + p), f = zr_le64(buf + p + 8);
			if (g > since && g <= ds->generation && f < ds->nfields)
				cb(ctx, (unsigned)f, zr_le64(buf + p + 16));
		}
		at += want;
	}
	close(fd);
	return rc;
}
