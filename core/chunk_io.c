/*
 * chunk_io.c - a chunk's bytes: the read-only mapping reads go through
 * (reserved zr_chunk_map_step at a time while the chunk grows, old
 * mappings kept, store_i.h (a)), and a writer's appends (pwrite, never
 * through the mapping: a full disk fails with ENOSPC, not SIGBUS) and
 * trims. The files themselves are chunk.c's.
 *
 * An append writes past everything written to its chunk (a writer takes a
 * chunk trimmed to its committed bytes, and a failed append trims it back),
 * where the file reads as zeros: runs of zeros of 64 KiB or more that fill
 * whole pages of the file are not written but left as holes, as in a
 * sparse file (zr_write_sparse). A value written with a hole (a file
 * written through the mount at a far offset, a mostly empty array) then
 * takes the disk space of its data; it reads the same, and its checksum
 * is of its bytes.
 *
 * Sections: mapping, writer side.
 */
#include "store_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

uint64_t zr_chunk_map_step = UINT64_C(1) << 30;
static atomic_bool advise_random;

void zr_advise_random(int on)
{
	atomic_store(&advise_random, on != 0);
}

/* ---- mapping ---- */

static uint64_t map_size_for(const zr_chunk *c, uint64_t need)
{
	if (!c->writable)
		return need;
	return (need + zr_chunk_map_step - 1) / zr_chunk_map_step * zr_chunk_map_step;
}

/* Map (or grow the mapping of) @c to cover @need bytes. */
static int map_cover(zr_dataset *ds, zr_chunk *c, uint64_t need)
{
	zr_map *cur, *m;
	uint64_t size = map_size_for(c, need);
	void *p;

	pthread_mutex_lock(&c->map_lock);
	cur = atomic_load_explicit(&c->map, memory_order_acquire);
	if (cur && cur->size >= need) {
		pthread_mutex_unlock(&c->map_lock);
		return 0;
	}
	m = malloc(sizeof *m);
	if (!m) {
		pthread_mutex_unlock(&c->map_lock);
		return zr_err(-ENOMEM, "out of memory");
	}
	p = MAP_FAILED;
	if (cur)
		p = zr_sys.mremap(cur->base, cur->size, size, 0); /* in place, or not at all */
	if (p == MAP_FAILED && (p = zr_sys.mmap(NULL, size, PROT_READ, MAP_SHARED, c->fd, 0)) !=
				      MAP_FAILED &&
	    atomic_load_explicit(&advise_random, memory_order_relaxed))
		madvise(p, size, MADV_RANDOM);
	if (p == MAP_FAILED) {
		int e = errno;
		free(m);
		pthread_mutex_unlock(&c->map_lock);
		return zr_err(-e, "%s/chunk/%u.zr: mmap of %llu bytes failed: %s", ds->path, c->id,
			      (unsigned long long)size, strerror(e));
	}
	m->base = p;
	m->size = size;
	m->alias = false;
	m->next = NULL;
	if (cur) {
		cur->alias = cur->base == m->base; /* grown in place: unmap once */
		cur->next = c->retired;
		c->retired = cur;
	}
	atomic_store_explicit(&c->map, m, memory_order_release);
	pthread_mutex_unlock(&c->map_lock);
	return 0;
}

int zr_chunk_map(zr_dataset *ds, zr_chunk *c, const uint8_t **base)
{
	zr_map *m = atomic_load_explicit(&c->map, memory_order_acquire);
	uint64_t extent = atomic_load_explicit(&c->extent, memory_order_acquire);
	int rc = 0;

	/* unmapped, or mapped by a sharing handle of an older state for less */
	if (!m || m->size < extent) {
		bool rw = ds->flags & ZR_RDWR;
		if (rw)
			pthread_mutex_lock(&ds->grow_lock);
		extent = atomic_load_explicit(&c->extent, memory_order_acquire);
		if (rw && c->reserve_end > extent)
			extent = c->reserve_end; /* bytes a writer is putting there now */
		if (extent > 0)
			rc = map_cover(ds, c, extent);
		if (rw)
			pthread_mutex_unlock(&ds->grow_lock);
		FORWARD_IF_ERR(rc);
		m = atomic_load_explicit(&c->map, memory_order_acquire);
		RETURN_IF(!m, ZR_ECORRUPT, "%s/chunk/%u.zr: empty", ds->path, c->id);
	}
	*base = m->base;
	return 0;
}

/* ---- writer side ---- */

int zr_chunk_trim(zr_dataset *ds, zr_chunk *c, uint64_t len)
{
	if (zr_sys.ftruncate(c->fd, (off_t)len) < 0)
		return zr_err(-errno, "%s/chunk/%u.zr: ftruncate failed: %s", ds->path, c->id,
			      strerror(errno));
	atomic_store_explicit(&c->extent, len, memory_order_release);
	c->write_pos = len;
	return 0;
}

int zr_chunk_acquire(zr_dataset *ds, zr_writer *w)
{
	zr_chunk *c = NULL;
	uint32_t num, id;
	char name[32];
	int fd, rc = 0;

	pthread_mutex_lock(&ds->grow_lock);
	num = atomic_load(&ds->chunk_num);
	for (uint32_t i = 0; i < num && !c && ds->chunks_spare; i++) {
		zr_chunk *t = atomic_load(&ds->chunks)[i];
		if (t->writable && t->owner < 0 && t->records < ds->chunk_size)
			c = t;
	}
	if (c) {
		ds->chunks_spare--;
		struct stat st;
		/* drop what an interrupted writer left after the committed data */
		if (fstat(c->fd, &st) == 0 && (uint64_t)st.st_size > c->write_pos)
			rc = zr_chunk_trim(ds, c, c->write_pos);
		if (rc == 0)
			c->owner = w->slot;
		goto out;
	}
	if (num >= (ds->version >= 2 ? ZR_V2_CHUNK_LIMIT : UINT32_MAX - 1) - ds->chunk_first) {
		rc = zr_err(-EFBIG, "%s: no chunk ids left (format 2 numbers chunks below %u)",
			    ds->path, ZR_V2_CHUNK_LIMIT);
		goto out;
	}
	id = ds->chunk_first + num;
	zr_chunk_name(name, sizeof name, id);
	if ((rc = zr_chunks_grow(ds)) < 0)
		goto out;
	fd = zr_create_fresh(ds->chunkdirfd, name, O_RDWR);
	if (fd < 0) {
		rc = zr_err(-errno, "%s/chunk/%s: create failed: %s", ds->path, name,
			    strerror(errno));
		goto out;
	}
	c = zr_chunk_new(id, fd);
	if (!c) {
		close(fd);
		zr_sys.unlinkat(ds->chunkdirfd, name, 0);
		rc = zr_err(-ENOMEM, "out of memory");
		goto out;
	}
	c->writable = true;
	c->rdwr = true;
	c->created = true;
	c->owner = w->slot;
	atomic_load(&ds->chunks)[num] = c;
	atomic_store_explicit(&ds->chunk_num, num + 1, memory_order_release);
out:
	if (rc == 0)
		w->chunk = c;
	pthread_mutex_unlock(&ds->grow_lock);
	return rc;
}

void zr_chunk_release(zr_dataset *ds, zr_writer *w)
{
	if (!w->chunk)
		return;
	pthread_mutex_lock(&ds->grow_lock);
	w->chunk->owner = -1;
	if (w->chunk->writable && w->chunk->records < ds->chunk_size)
		ds->chunks_spare++;
	w->chunk = NULL;
	pthread_mutex_unlock(&ds->grow_lock);
}

int zr_chunk_check_whole(zr_dataset *ds, zr_chunk *c)
{
	struct stat st;

	if (fstat(c->fd, &st) < 0)
		return zr_err(-errno, "%s/chunk/%u.zr: fstat failed: %s", ds->path, c->id,
			      strerror(errno));
	if ((uint64_t)st.st_size >= c->write_pos)
		return 0;
	pthread_mutex_lock(&ds->grow_lock);
	c->writable = false; /* its owner hands it back; nobody takes it again */
	pthread_mutex_unlock(&ds->grow_lock);
	return zr_err(-EIO,
		      "%s/chunk/%u.zr: %llu bytes, shorter than the %llu written to it: cut short "
		      "from outside; nothing more is appended to it (zr verify names the records "
		      "lost)",
		      ds->path, c->id, (unsigned long long)st.st_size,
		      (unsigned long long)c->write_pos);
}

int zr_chunk_append(zr_dataset *ds, zr_chunk *c, const void *p1, size_t n1, const void *p2,
		    size_t n2, unsigned align, uint64_t *off_out)
{
	uint64_t off = (c->write_pos + align - 1) / align * align;
	zr_map *m = atomic_load_explicit(&c->map, memory_order_acquire);
	int rc;

	/* the first append since a commit: the file still holds what was
	 * written (appending past a cut would grow it back with a hole, and
	 * the records before would read as zeros) */
	if (!c->dirty)
		FORWARD_IF_ERR(zr_chunk_check_whole(ds, c));

	/* A reader may map the chunk at any moment: decide under the lock whether
	 * the mapping must grow, unless it visibly covers the new bytes already. */
	if (!m || m->size < off + n1 + n2) {
		rc = 0;
		pthread_mutex_lock(&ds->grow_lock);
		c->reserve_end = off + n1 + n2; /* a mapping made from now on covers it */
		if (atomic_load_explicit(&c->map, memory_order_acquire))
			rc = map_cover(ds, c, off + n1 + n2);
		pthread_mutex_unlock(&ds->grow_lock);
		FORWARD_IF_ERR(rc);
	}
	rc = zr_write_sparse(c->fd, p1, n1, off);
	if (rc == 0 && n2)
		rc = zr_write_sparse(c->fd, p2, n2, off + n1);
	if (rc < 0) {
		/* leave no partial record behind the committed data */
		zr_sys.ftruncate(c->fd, (off_t)c->write_pos);
		return zr_err(rc, "%s/chunk/%u.zr: write of %zu bytes at %llu failed: %s",
			      ds->path, c->id, n1 + n2, (unsigned long long)off, strerror(-rc));
	}
	c->write_pos = off + n1 + n2;
	c->dirty = true;
	/* (b): the bytes are in the file before readers may reach them */
	atomic_store_explicit(&c->extent, c->write_pos, memory_order_release);
	*off_out = off;
	return 0;
}
