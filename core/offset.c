/*
 * offset.c - offset tables: one mapped file of 16-byte entries per field.
 *
 * Entry i of a field lives at byte 16*i of <field>.offset. A writer grows the
 * table with fallocate(), so that the blocks behind a mapped store exist
 * before the store: a full disk fails the growth with ENOSPC instead of
 * raising SIGBUS later. Growth doubles from 4096 entries (64 KiB) up to
 * zr_table_step (1 Mi entries, 16 MiB), then goes zr_table_step at a time:
 * a small dataset takes little disk, a big one few remaps. On close the
 * file is trimmed back to the entries a committed state has, but never
 * below its size at open: a reader may map that much (store_i.h (c)).
 *
 * An entry is written as two aligned 8-byte stores, the offset first and then
 * chunk_id|len with release order; a reader loads chunk_id|len with acquire
 * first. So a concurrent reader sees an old or a new entry, never a torn one.
 *
 * Sections: open/close, growth, entry access, entry validation.
 */
#include "store_i.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

uint64_t zr_table_step = UINT64_C(1) << 20;

#define ZR_TABLE_FIRST 4096 /* entries of the first growth */

static zr_map empty_map; /* the mapping of a table with no entries */

static int table_map(zr_dataset *ds, zr_fstate *f, uint64_t entries)
{
	zr_map *cur = atomic_load_explicit(&f->map, memory_order_acquire), *m;
	size_t size = entries * ZR_ENTRY_SIZE;
	int prot = (ds->flags & ZR_RDWR) ? PROT_READ | PROT_WRITE : PROT_READ;
	void *p = MAP_FAILED;

	if (cur && cur->size >= size)
		return 0;
	m = calloc(1, sizeof *m);
	RETURN_IF(!m, -ENOMEM, "out of memory");
	if (cur && cur != &empty_map)
		p = zr_sys.mremap(cur->base, cur->size, size, 0);
	if (p == MAP_FAILED)
		p = zr_sys.mmap(NULL, size, prot, MAP_SHARED, f->fd, 0);
	if (p == MAP_FAILED) {
		int e = errno;
		free(m);
		return zr_err(-e, "%s/%s.offset: mmap failed: %s", ds->path, f->def.name,
			      strerror(e));
	}
	m->base = p;
	m->size = size;
	if (cur && cur != &empty_map) {
		cur->alias = cur->base == m->base;
		zr_retire(ds, cur);
	}
	atomic_store_explicit(&f->map, m, memory_order_release);
	return 0;
}

int zr_table_open(zr_dataset *ds, zr_fstate *f, const char *name, bool create)
{
	bool rw = ds->flags & ZR_RDWR;
	uint64_t need = atomic_load(&ds->length), have;
	struct statx sx;

	f->fd = zr_sys.openat(ds->dirfd, name, (rw ? O_RDWR : O_RDONLY) | (create ? O_CREAT : 0),
			      0644);
	if (f->fd < 0)
		return zr_err(errno == ENOENT || errno == ENXIO ? ZR_ECORRUPT : -errno, "%s/%s: %s",
			      ds->path, name,
			      zr_open_strerror(errno));
	atomic_init(&f->map, &empty_map);
	atomic_init(&f->unsynced, true); /* whatever wrote it last may not have */
	/* the size now, not a client's cached one: a table grows with commits */
	if (zr_fresh_stat(f->fd, "", &sx) < 0 || !S_ISREG(sx.stx_mode))
		return zr_err(ZR_ECORRUPT, "%s/%s: not a regular file", ds->path, name);
	have = sx.stx_size / ZR_ENTRY_SIZE;
	/* on a filesystem shared with other machines, a commit made on another
	 * may show its meta.json here before its table's new size: the caller
	 * tries again (on a local one, meta.json is renamed into place only
	 * after the table was written: the table was cut short) */
	if (have < need && zr_fs_shared(f->fd))
		return zr_err(-ESTALE,
			      "%s/%s: holds %llu entries, meta.json says %llu records (written on "
			      "another machine, not visible here yet, or a truncated table)",
			      ds->path, name, (unsigned long long)have, (unsigned long long)need);
	RETURN_IF(have < need, ZR_ECORRUPT,
		  "%s/%s: holds %llu entries, meta.json says %llu records (truncated table)",
		  ds->path, name, (unsigned long long)have, (unsigned long long)need);
	/* a reader maps what the committed state uses; a writer all the file has */
	f->cap = rw ? have : need;
	f->open_cap = have;
	if (f->cap > 0)
		FORWARD_IF_ERR(table_map(ds, f, f->cap));
	return 0;
}

void zr_table_close(zr_fstate *f)
{
	zr_map *m = atomic_load(&f->map);

	if (m && m != &empty_map) {
		if (!m->alias)
			munmap(m->base, m->size);
		free(m);
	}
	atomic_store(&f->map, NULL);
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
}

/* Give up the table, keeping its mapping valid until close. */
void zr_table_retire(zr_dataset *ds, zr_fstate *f)
{
	zr_map *m = atomic_load(&f->map);

	if (m && m != &empty_map)
		zr_retire(ds, m);
	atomic_store(&f->map, NULL);
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
}

/* ---- growth (callers hold grow_lock) ---- */

int zr_table_reserve(zr_dataset *ds, zr_fstate *f, uint64_t entries)
{
	uint64_t cap;

	if (entries <= f->cap)
		return 0;
	cap = f->cap < ZR_TABLE_FIRST ? ZR_TABLE_FIRST : f->cap;
	while (cap < entries && cap < zr_table_step)
		cap *= 2;
	if (cap < entries || cap > zr_table_step)
		cap = (entries + zr_table_step - 1) / zr_table_step * zr_table_step;
	int rc = zr_file_reserve(f->fd, cap * ZR_ENTRY_SIZE);

	atomic_store(&f->unsynced, true);

	RETURN_IF(rc < 0, rc, "%s/%s.offset: cannot grow to %llu entries: %s", ds->path,
		  f->def.name, (unsigned long long)cap, strerror(-rc));
	FORWARD_IF_ERR(table_map(ds, f, cap));
	f->cap = cap;
	return 0;
}

int zr_table_trim(zr_dataset *ds, zr_fstate *f, uint64_t entries)
{
	atomic_store(&f->unsynced, true);
	if (zr_sys.ftruncate(f->fd, (off_t)(entries * ZR_ENTRY_SIZE)) < 0)
		return zr_err(-errno, "%s/%s.offset: ftruncate failed: %s", ds->path, f->def.name,
			      strerror(errno));
	f->cap = entries;
	return 0;
}

/* ---- entry access ---- */

static void entry_load(const uint8_t *slot, unsigned version, zr_entry *e)
{
	uint64_t w[2];

	w[1] = le64toh(__atomic_load_n((const uint64_t *)(slot + 8), __ATOMIC_ACQUIRE));
	w[0] = le64toh(__atomic_load_n((const uint64_t *)slot, __ATOMIC_RELAXED));
	zr_entry_unwords(w, version, e);
}

void zr_entry_store(uint8_t *slot, unsigned version, const zr_entry *e)
{
	uint64_t w[2];

	zr_entry_words(e, version, w);
	__atomic_store_n((uint64_t *)slot, htole64(w[0]), __ATOMIC_RELAXED);
	__atomic_store_n((uint64_t *)(slot + 8), htole64(w[1]), __ATOMIC_RELEASE);
}

int zr_entry_get(zr_dataset *ds, unsigned field, uint64_t id, zr_entry *e)
{
	sigjmp_buf jump;

	if (atomic_load_explicit(&ds->overlay.count, memory_order_acquire) &&
	    zr_overlay_find(ds, field, id, e))
		return 0;
	if (!atomic_load_explicit(&zr_guarded, memory_order_relaxed)) {
		entry_load(zr_table_slot(&ds->fields[field], id), ds->version, e);
		return 0;
	}
	/* fault.c: the table may be cut short under the mapping */
	if (sigsetjmp(jump, 0)) {
		memset(e, 0, sizeof *e);
		return zr_err(-EIO, "%s/%s.offset: entry %llu is gone: the file was cut short "
				    "while in use", ds->path, ds->fields[field].def.name,
			      (unsigned long long)id);
	}
	zr_fault_jump = &jump;
	entry_load(zr_table_slot(&ds->fields[field], id), ds->version, e);
	zr_fault_jump = NULL;
	return 0;
}

int zr_entry_put(zr_dataset *ds, unsigned field, uint64_t id, const zr_entry *e)
{
	/* (c): entries a committed state has change only through the journal */
	if (id < ds->high)
		return zr_overlay_set(ds, field, id, e, ds->generation + 1);
	atomic_store(&ds->fields[field].unsynced, true);
	zr_entry_store(zr_table_slot(&ds->fields[field], id), ds->version, e);
	return 0;
}

/* ---- validation ---- */

int zr_entry_check(zr_dataset *ds, unsigned field, uint64_t id, const zr_entry *e,
		   zr_chunk **out)
{
	const char *name = ds->fields[field].def.name;
	zr_chunk *c;
	uint64_t extent;

	*out = NULL;
	if (e->len == 0)
		return 0;
	c = zr_chunk_get(ds, e->chunk_id);
	RETURN_IF(!c, ZR_ECORRUPT, "%s: field '%s' record %llu: chunk %u does not exist",
		  ds->path, name, (unsigned long long)id, e->chunk_id);
	FORWARD_IF_ERR(zr_chunk_use(ds, c)); /* open: its extent is known */
	extent = atomic_load_explicit(&c->extent, memory_order_acquire);
	if (e->offset > extent || e->len > extent - e->offset) {
		zr_chunk_unuse(c);
		return zr_err(ZR_ECORRUPT,
			      "%s: field '%s' record %llu: bytes %llu..%llu lie outside chunk/%u.zr (%llu bytes)",
			      ds->path, name, (unsigned long long)id,
			      (unsigned long long)e->offset, (unsigned long long)(e->offset + e->len),
			      e->chunk_id, (unsigned long long)extent);
	}
	*out = c;
	return 0;
}

int zr_crc_check(zr_dataset *ds, unsigned field, uint64_t id, const zr_entry *e, uint32_t crc)
{
	RETURN_IF(crc != e->crc, ZR_ECORRUPT,
		  "%s/chunk/%u.zr: field '%s' record %llu: the %u bytes at %llu do not match "
		  "their checksum (CRC-32C %08x, the entry says %08x): the bytes or their entry "
		  "changed since they were written",
		  ds->path, e->chunk_id, ds->fields[field].def.name, (unsigned long long)id, e->len,
		  (unsigned long long)e->offset, crc, e->crc);
	return 0;
}

int zr_value_check(zr_dataset *ds, unsigned field, uint64_t id, const zr_entry *e,
		   const uint8_t *bytes)
{
	if (ds->version < 2 || e->len == 0)
		return 0;
	return zr_crc_check(ds, field, id, e, zr_crc32c(0, bytes, e->len));
}

/* A present record of a fixed-shape field whose length is not the
 * shape's is damaged, whatever reads it: a wrong label served as data
 * would train a model on it (zr verify reports it the same way). */
int zr_shape_check(zr_dataset *ds, unsigned field, uint64_t id, uint64_t logical)
{
	const zr_fstate *f = &ds->fields[field];

	RETURN_IF(f->def.spec.fixed && logical != f->record_size, ZR_ECORRUPT,
		  "%s: field '%s' record %llu: %llu bytes, but records of this shape are %llu",
		  ds->path, f->def.name, (unsigned long long)id, (unsigned long long)logical,
		  (unsigned long long)f->record_size);
	return 0;
}

static const uint8_t empty_record[1];

int zr_entry_locate(zr_dataset *ds, unsigned field, uint64_t id, const zr_entry *e,
		    const uint8_t **bytes, zr_chunk **held)
{
	const uint8_t *base;
	zr_chunk *c;
	int rc;

	*bytes = NULL;
	*held = NULL;
	if (zr_entry_missing(e))
		return 0;
	if (e->len == 0) {
		*bytes = empty_record;
		return 0;
	}
	FORWARD_IF_ERR(zr_entry_check(ds, field, id, e, &c));
	if ((rc = zr_chunk_map(ds, c, &base)) < 0) {
		zr_chunk_unuse(c);
		return rc;
	}
	*bytes = base + e->offset;
	*held = c;
	return 0;
}
