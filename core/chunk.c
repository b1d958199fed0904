/*
 * chunk.c - chunk files: naming, the pool of open chunks, opening and
 * closing.
 *
 * Writes go through pwrite(), not through the mapping: a full disk then
 * fails the append with ENOSPC instead of raising SIGBUS on a store into a
 * sparse page, and the file never has a sparse tail to trim. Reads go
 * through a shared read-only mapping made on first use. The mapping of a
 * chunk that is being appended to is reserved zr_chunk_map_step (1 GiB) at a
 * time and grown with mremap(); see store_i.h (a) for why old mappings stay.
 *
 * Read-only handles of one dataset share chunk objects (zr_reopen): a
 * committed chunk id always names the same bytes, so a handle of a newer
 * state takes the chunk objects an older one has (counted in refs). A
 * shared chunk keeps its own old mappings until it is closed.
 *
 * A chunk's file is opened on first use, not at open: a dataset may have
 * more chunks than the process may open files (or map: vm.max_map_count).
 * Open chunks form one pool per process, bounded by zr_chunks_open_max
 * (default: half the descriptor limit); to make room a clock hand closes
 * one that was not used since the hand last passed and is not pinned. A
 * pin (zr_chunk_use) is taken by every read of a chunk's fd or mapping and
 * held by a zr_batch for its zero-copy slices; pin and open share one word
 * (use: ZR_CHUNK_OPEN | pins), so closing is a compare-and-swap from
 * "open, no pins" that no pin can race. A writer's chunk that receives
 * appends is outside the pool until it is full.
 *
 * A chunk's bytes (mapping, appending, trimming) are chunk_io.c's.
 *
 * Sections: naming and lookup, the pool, open/close.
 */
#include "store_i.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

struct retired_array {
	void *p;
	struct retired_array *next;
};

int zr_chunk_name(char *buf, size_t cap, uint32_t id)
{
	return snprintf(buf, cap, "%u.zr", id);
}

zr_chunk *zr_chunk_get(zr_dataset *ds, uint32_t chunk_id)
{
	uint32_t num = atomic_load_explicit(&ds->chunk_num, memory_order_acquire);
	zr_chunk **arr;

	if (chunk_id < ds->chunk_first || chunk_id - ds->chunk_first >= num)
		return NULL;
	arr = atomic_load_explicit(&ds->chunks, memory_order_acquire);
	return arr[chunk_id - ds->chunk_first];
}

void zr_retire(zr_dataset *ds, zr_map *m)
{
	m->next = ds->retired;
	ds->retired = m;
}

/* Make room for one more chunk pointer; caller holds grow_lock. */
int zr_chunks_grow(zr_dataset *ds)
{
	zr_chunk **old = atomic_load_explicit(&ds->chunks, memory_order_relaxed);
	uint32_t num = atomic_load_explicit(&ds->chunk_num, memory_order_relaxed);
	uint32_t cap = ds->chunks_cap ? ds->chunks_cap * 2 : 64;
	zr_chunk **arr;
	struct retired_array *r;

	if (num < ds->chunks_cap)
		return 0;
	arr = calloc(cap, sizeof *arr);
	r = malloc(sizeof *r);
	if (!arr || !r) {
		free(arr);
		free(r);
		return zr_err(-ENOMEM, "out of memory");
	}
	if (old)
		memcpy(arr, old, num * sizeof *arr);
	/* readers may still hold the old array: keep it until close */
	r->p = old;
	r->next = ds->retired_arrays;
	ds->retired_arrays = r;
	ds->chunks_cap = cap;
	atomic_store_explicit(&ds->chunks, arr, memory_order_release);
	return 0;
}

zr_chunk *zr_chunk_new(uint32_t id, int fd)
{
	zr_chunk *c = calloc(1, sizeof *c);

	if (!c)
		return NULL;
	c->id = id;
	c->fd = fd;
	c->owner = -1;
	c->pool_slot = -1;
	atomic_init(&c->refs, 1);
	atomic_init(&c->use, fd >= 0 ? ZR_CHUNK_OPEN : 0);
	atomic_init(&c->recent, false);
	pthread_mutex_init(&c->map_lock, NULL);
	atomic_init(&c->map, NULL);
	atomic_init(&c->extent, 0);
	return c;
}

static void map_free(zr_map *m)
{
	if (m) {
		if (!m->alias)
			munmap(m->base, m->size);
		free(m);
	}
}

/* ---- the pool of open chunks ---- */

unsigned zr_chunks_open_max;

/* Open chunks that may be closed again, swept by a clock hand: a chunk used
 * since the hand last passed gets another round, a pinned one is skipped. */
static struct {
	pthread_mutex_t lock;
	zr_chunk **slots;
	unsigned n, cap, hand;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER};

static unsigned pool_max(void)
{
	struct rlimit rl;

	if (zr_chunks_open_max)
		return zr_chunks_open_max;
	/* half the descriptors: the rest are the caller's */
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur > 32768)
		return 16384;
	return rl.rlim_cur < 32 ? 16 : (unsigned)rl.rlim_cur / 2;
}

unsigned zr_chunks_open(void)
{
	unsigned n;

	pthread_mutex_lock(&pool.lock);
	n = pool.n;
	pthread_mutex_unlock(&pool.lock);
	return n;
}

/* Under pool.lock. */
static void pool_remove(zr_chunk *c)
{
	unsigned i = (unsigned)c->pool_slot;

	pool.slots[i] = pool.slots[--pool.n];
	pool.slots[i]->pool_slot = (int)i;
	c->pool_slot = -1;
}

/* Close @c's file and mappings; the caller holds its map_lock and has
 * taken its last use away (use == 0). */
static void chunk_shut(zr_chunk *c)
{
	map_free(atomic_load(&c->map));
	atomic_store(&c->map, NULL);
	while (c->retired) {
		zr_map *m = c->retired;
		c->retired = m->next;
		map_free(m);
	}
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

/* Close one unpinned chunk, not used since the hand last passed it; under
 * pool.lock. False if every chunk is pinned or busy. */
static bool evict_one(void)
{
	for (unsigned tries = 0; tries < 2 * pool.n + 1 && pool.n; tries++) {
		zr_chunk *c;
		uint64_t open = ZR_CHUNK_OPEN;

		if (pool.hand >= pool.n)
			pool.hand = 0;
		c = pool.slots[pool.hand];
		if (atomic_exchange(&c->recent, false) ||
		    pthread_mutex_trylock(&c->map_lock) != 0) {
			pool.hand++;
			continue;
		}
		if (!atomic_compare_exchange_strong(&c->use, &open, 0)) { /* pinned */
			pthread_mutex_unlock(&c->map_lock);
			pool.hand++;
			continue;
		}
		pool_remove(c); /* the last slot's chunk moves under the hand */
		chunk_shut(c);
		pthread_mutex_unlock(&c->map_lock);
		return true;
	}
	return false;
}

/* Let @c be closed again when room is needed, making room if the pool is
 * full; with every chunk pinned it goes over the bound (a batch that spans
 * more chunks than that holds them all). */
static void pool_add(zr_chunk *c)
{
	unsigned max = pool_max();

	pthread_mutex_lock(&pool.lock);
	while (pool.n >= max && evict_one())
		;
	if (pool.n == pool.cap) {
		unsigned cap = pool.cap ? pool.cap * 2 : 256;
		zr_chunk **s = realloc(pool.slots, cap * sizeof *s);
		if (!s) { /* stays open, never evicted: correct, only unbounded */
			pthread_mutex_unlock(&pool.lock);
			return;
		}
		pool.slots = s;
		pool.cap = cap;
	}
	c->pool_slot = (int)pool.n;
	pool.slots[pool.n++] = c;
	pthread_mutex_unlock(&pool.lock);
}

/* openat(), closing unpinned chunks once if the process is out of descriptors. */
static int open_making_room(zr_dataset *ds, const char *name, int flags)
{
	int fd = zr_sys.openat(ds->chunkdirfd, name, flags, 0);

	if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
		pthread_mutex_lock(&pool.lock);
		for (unsigned k = pool.n / 2 + 1; k > 0 && evict_one(); k--)
			;
		pthread_mutex_unlock(&pool.lock);
		fd = zr_sys.openat(ds->chunkdirfd, name, flags, 0);
	}
	return fd;
}

static int chunk_open(zr_dataset *ds, zr_chunk *c)
{
	char name[32];
	struct statx sx;
	uint64_t extent;
	int fd, rc = 0;

	pthread_mutex_lock(&c->map_lock);
	if (atomic_load(&c->use) & ZR_CHUNK_OPEN) { /* opened meanwhile */
		atomic_fetch_add(&c->use, 1);
		goto out;
	}
	zr_chunk_name(name, sizeof name, c->id);
	fd = open_making_room(ds, name, c->rdwr ? O_RDWR : O_RDONLY);
	if (fd < 0) {
		rc = zr_err(errno == ENOENT || errno == ENXIO ? ZR_ECORRUPT : -errno,
			    "%s/chunk/%s: %s", ds->path, name, zr_open_strerror(errno));
		goto out;
	}
	if (zr_fresh_stat(fd, "", &sx) < 0 || !S_ISREG(sx.stx_mode)) {
		close(fd);
		rc = zr_err(ZR_ECORRUPT, "%s/chunk/%s: not a regular file", ds->path, name);
		goto out;
	}
	/* a full chunk's data is its file; a file cut short below the data
	 * a state says it has (damage) bounds what is touched: the records
	 * past its end read as damaged, through pread and mapping alike */
	extent = atomic_load(&c->extent);
	if (extent == ZR_EXTENT_UNKNOWN || sx.stx_size < extent)
		atomic_store(&c->extent, sx.stx_size);
	c->fd = fd;
	atomic_store(&c->recent, true);
	pool_add(c);
	atomic_store(&c->use, ZR_CHUNK_OPEN | 1);
out:
	pthread_mutex_unlock(&c->map_lock);
	return rc;
}

int zr_chunk_use(zr_dataset *ds, zr_chunk *c)
{
	uint64_t s = atomic_load_explicit(&c->use, memory_order_acquire);

	while (s & ZR_CHUNK_OPEN)
		if (atomic_compare_exchange_weak(&c->use, &s, s + 1)) {
			if (!atomic_load_explicit(&c->recent, memory_order_relaxed))
				atomic_store_explicit(&c->recent, true, memory_order_relaxed);
			return 0;
		}
	return chunk_open(ds, c);
}

void zr_chunk_unuse(zr_chunk *c)
{
	if (c)
		atomic_fetch_sub_explicit(&c->use, 1, memory_order_release);
}

void zr_chunk_evictable(zr_chunk *c)
{
	pthread_mutex_lock(&c->map_lock);
	if (c->pool_slot < 0 && c->fd >= 0)
		pool_add(c);
	pthread_mutex_unlock(&c->map_lock);
}

int zr_chunk_stat(zr_dataset *ds, zr_chunk *c, uint64_t *extent)
{
	uint64_t unknown = ZR_EXTENT_UNKNOWN;
	char name[32];
	struct statx sx;
	int rc;

	zr_chunk_name(name, sizeof name, c->id);
	rc = zr_fresh_stat(ds->chunkdirfd, name, &sx);
	RETURN_IF(rc < 0, rc == -ENOENT ? ZR_ECORRUPT : rc, "%s/chunk/%s: %s", ds->path, name,
		  strerror(-rc));
	RETURN_IF(S_ISLNK(sx.stx_mode), -ELOOP, "%s/chunk/%s: %s", ds->path, name,
		  zr_open_strerror(ELOOP));
	RETURN_IF(!S_ISREG(sx.stx_mode), ZR_ECORRUPT, "%s/chunk/%s: not a regular file", ds->path,
		  name);
	atomic_compare_exchange_strong(&c->extent, &unknown, (uint64_t)sx.stx_size);
	*extent = atomic_load(&c->extent);
	return 0;
}

uint64_t zr_chunk_extent(zr_dataset *ds, zr_chunk *c)
{
	uint64_t extent = atomic_load(&c->extent);

	if (extent == ZR_EXTENT_UNKNOWN && zr_chunk_stat(ds, c, &extent) < 0)
		return 0;
	return extent;
}

/* Let go of @c: the last reference frees it, its mappings and its file. */
static void chunk_put(zr_chunk *c)
{
	if (atomic_fetch_sub(&c->refs, 1) != 1)
		return;
	pthread_mutex_lock(&pool.lock);
	if (c->pool_slot >= 0)
		pool_remove(c);
	pthread_mutex_unlock(&pool.lock);
	chunk_shut(c);
	pthread_mutex_destroy(&c->map_lock);
	free(c);
}

void zr_chunk_keep(zr_chunk *c)
{
	atomic_fetch_add(&c->refs, 1);
}

void zr_chunk_drop(zr_chunk *c)
{
	chunk_put(c);
}

/* Whether reads of open chunk @c reach byte @extent - 1: a FUSE client may
 * drop the size a forced stat brought when a read raced it, and keep the
 * old one, past which reads end (a mapping faults). */
static bool reaches(zr_chunk *c, uint64_t extent)
{
	uint8_t b;
	bool yes = true;

	pthread_mutex_lock(&c->map_lock);
	if (extent && (atomic_load(&c->use) & ZR_CHUNK_OPEN))
		yes = pread(c->fd, &b, 1, (off_t)(extent - 1)) == 1;
	pthread_mutex_unlock(&c->map_lock);
	return yes;
}

/* @donor's chunk @id, shared with the handle opening @m (its extent raised
 * to what @m says) into *@out, or NULL if @donor has no such chunk. A chunk
 * that grew is looked at first: on a filesystem shared with other machines
 * this machine may not see the bytes another wrote yet (a client's cache
 * of sizes), and the state is refused until it does (-ESTALE). */
static int chunk_share(zr_dataset *donor, uint32_t id, const zr_unfull *u, zr_chunk **out)
{
	zr_chunk *c = donor ? zr_chunk_get(donor, id) : NULL;
	uint64_t extent, cur;
	char name[32];
	struct statx sx;

	*out = NULL;
	if (!c)
		return 0;
	zr_chunk_name(name, sizeof name, id);
	if (u)
		extent = u->write_pos;
	else if (c->committed_unfull) /* filled up since: its size is its data */
		extent = ZR_EXTENT_UNKNOWN;
	else
		extent = atomic_load(&c->extent);
	cur = atomic_load(&c->extent);
	if (cur != ZR_EXTENT_UNKNOWN && (extent == ZR_EXTENT_UNKNOWN || extent > cur)) {
		/* it grew: ask the filesystem, not its cache (a FUSE or NFS
		 * client then also drops pages cached before the bytes came) */
		int rc = zr_fresh_stat(donor->chunkdirfd, name, &sx);
		if (rc < 0)
			return zr_err(rc == -ENOENT ? ZR_ECORRUPT : rc, "%s/chunk/%s: %s",
				      donor->path, name, strerror(-rc));
		if (extent == ZR_EXTENT_UNKNOWN)
			extent = sx.stx_size;
		else if (sx.stx_size < extent || !reaches(c, extent))
			return zr_err(-ESTALE,
				      "%s/chunk/%s: %llu bytes here, but the state committed has %llu "
				      "(written on another machine, not visible here yet)",
				      donor->path, name, (unsigned long long)sx.stx_size,
				      (unsigned long long)extent);
	}
	while ((cur < extent || cur == ZR_EXTENT_UNKNOWN) && extent != ZR_EXTENT_UNKNOWN &&
	       !atomic_compare_exchange_weak(&c->extent, &cur, extent))
		;
	atomic_fetch_add(&c->refs, 1);
	*out = c;
	return 0;
}

int zr_chunk_open_all(zr_dataset *ds, const zr_meta *m, zr_dataset *donor)
{
	bool rw = ds->flags & ZR_RDWR;

	/* Nothing is opened here but a writer's unfull chunks: the others are
	 * opened on first use (a dataset may have more chunks than the process
	 * may open files), so opening costs no system call per chunk. */
	ds->chunk_first = m->chunk_first;
	ds->chunks_spare = 0;
	atomic_store(&ds->chunk_num, 0);
	for (uint32_t i = 0; i < m->chunk_num; i++) {
		uint32_t id = m->chunk_first + i;
		const zr_unfull *u = NULL;
		char name[32];
		struct stat st;
		zr_chunk *c;
		int fd = -1, rc;

		for (uint32_t j = 0; j < m->unfull_count; j++)
			if (m->unfull[j].chunk_id == id)
				u = &m->unfull[j];
		if (!rw && (rc = chunk_share(donor, id, u, &c)) < 0)
			return rc;
		if (!rw && c) {
			if ((rc = zr_chunks_grow(ds)) < 0) {
				chunk_put(c);
				return rc;
			}
			atomic_load(&ds->chunks)[i] = c;
			atomic_store_explicit(&ds->chunk_num, i + 1, memory_order_release);
			continue;
		}
		if (rw && u) {
			zr_chunk_name(name, sizeof name, id);
			fd = zr_sys.openat(ds->chunkdirfd, name, O_RDWR, 0);
			if (fd < 0)
				return zr_err(errno == ENOENT || errno == ENXIO ? ZR_ECORRUPT
										: -errno,
					      "%s/chunk/%s: %s", ds->path, name,
					      zr_open_strerror(errno));
			if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
				close(fd);
				return zr_err(ZR_ECORRUPT, "%s/chunk/%s: not a regular file",
					      ds->path, name);
			}
			/* an unfull chunk cut short below its committed data
			 * (damage) is taken as a full one: its records past the
			 * end read as damaged (EIO; zr verify names them), the
			 * others as ever, and nothing more is appended to it */
			if ((uint64_t)st.st_size < u->write_pos) {
				close(fd);
				fd = -1;
				u = NULL;
			}
		}
		FORWARD_IF_ERR(zr_chunks_grow(ds));
		c = zr_chunk_new(id, fd);
		if (!c) {
			if (fd >= 0)
				close(fd);
			return zr_err(-ENOMEM, "out of memory");
		}
		/* an unfull chunk's committed data ends at write_pos; bytes after it
		 * are an interrupted writer's and belong to no record */
		atomic_store(&c->extent, u ? u->write_pos : ZR_EXTENT_UNKNOWN);
		c->write_pos = c->committed_pos = u ? u->write_pos : 0;
		c->records = c->committed_records = u ? u->records : m->chunk_size;
		c->committed_unfull = u != NULL;
		c->writable = rw && u;
		c->rdwr = rw && u;
		ds->chunks_spare += c->writable && c->records < m->chunk_size;
		atomic_load(&ds->chunks)[i] = c;
		atomic_store_explicit(&ds->chunk_num, i + 1, memory_order_release);
	}
	return 0;
}

void zr_chunk_close_all(zr_dataset *ds)
{
	zr_chunk **arr = atomic_load(&ds->chunks);
	uint32_t num = atomic_load(&ds->chunk_num);

	for (uint32_t i = 0; arr && i < num; i++)
		chunk_put(arr[i]);
	free(arr);
	while (ds->retired) {
		zr_map *m = ds->retired;
		ds->retired = m->next;
		map_free(m);
	}
	while (ds->retired_arrays) {
		struct retired_array *r = ds->retired_arrays;
		ds->retired_arrays = r->next;
		free(r->p);
		free(r);
	}
	atomic_store(&ds->chunks, NULL);
	atomic_store(&ds->chunk_num, 0);
}

/* Give up every chunk, keeping the mappings valid until close. */
void zr_chunk_retire_all(zr_dataset *ds)
{
	zr_chunk **arr = atomic_load(&ds->chunks);
	uint32_t num = atomic_load(&ds->chunk_num);
	struct retired_array *r = malloc(sizeof *r);

	/* a writer's chunks: shared with no other handle */
	for (uint32_t i = 0; arr && i < num; i++) {
		zr_chunk *c = arr[i];
		zr_map *m;
		pthread_mutex_lock(&c->map_lock); /* not while the pool closes it */
		if ((m = atomic_load(&c->map)) != NULL)
			zr_retire(ds, m);
		while (c->retired) {
			m = c->retired;
			c->retired = m->next;
			zr_retire(ds, m);
		}
		atomic_store(&c->map, NULL);
		pthread_mutex_unlock(&c->map_lock);
		chunk_put(c);
	}
	if (r) {
		r->p = arr;
		r->next = ds->retired_arrays;
		ds->retired_arrays = r;
	} else {
		free(arr);
	}
	atomic_store(&ds->chunks, NULL);
	atomic_store(&ds->chunk_num, 0);
	ds->chunks_cap = 0;
}

/* Remove chunk files that no commit references: a crashed writer's, and
 * those a rebalance replaced once no reader holds a state that has them
 * (readers open chunks on first use, so the files must stay until then). */
void zr_chunks_sweep(zr_dataset *ds)
{
	bool old_too = !zr_readers_before(ds, ds->generation);
	/* a fresh descriptor: a dup() would share (and leave at the end) the
	 * directory offset of chunkdirfd, so a second sweep would see nothing */
	int fd = openat(ds->chunkdirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	uint32_t first = ds->chunk_first, end = first + atomic_load(&ds->chunk_num);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	ds->chunks_stale = !old_too;
	while ((de = readdir(d))) {
		char *endp;
		unsigned long id = strtoul(de->d_name, &endp, 10);
		if (de->d_name[0] < '0' || de->d_name[0] > '9' || strcmp(endp, ".zr") != 0 ||
		    id > UINT32_MAX)
			continue;
		if ((id < first && old_too) || id >= end)
			zr_sys.unlinkat(ds->chunkdirfd, de->d_name, 0);
	}
	closedir(d);
}
