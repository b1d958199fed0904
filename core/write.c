/*
 * write.c - changing a dataset: append, modify, delete; writers; the overlay.
 *
 * Appends get their ids from zr_reserve(), which raises the visible length
 * with the new entries zeroed (missing); zr_writer_put() then appends the
 * bytes to the writer's own chunk and publishes the entries. Modify appends
 * the new bytes the same way and redirects one entry; move gives one
 * record's entry to another (no bytes copied); delete copies the last
 * record's entries into the hole and shrinks the length.
 *
 * Entries of records a committed state has (id < high) are not written in
 * place: they go to the overlay (overlay.c), which zr_commit() journals and
 * applies once no reader holds an older state (store_i.h (c)).
 *
 * Sections: validation and encoding, writers, public calls.
 */
#include "store_i.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- validation and encoding ---- */

static int check_writable(zr_dataset *ds)
{
	RETURN_IF(!(ds->flags & ZR_RDWR), -EROFS, "%s: opened read-only", ds->path);
	return 0;
}

static int check_value(zr_dataset *ds, unsigned field, zr_value v)
{
	const zr_fstate *f = &ds->fields[field];

	if (!v.data)
		return 0;
	RETURN_IF(f->record_size && v.len != f->record_size, -EINVAL,
		  "field '%s': a record of this shape is %llu bytes, not %zu", f->def.name,
		  (unsigned long long)f->record_size, v.len);
	RETURN_IF(v.len % zr_dtype_size(f->def.spec.dtype) != 0, -EINVAL,
		  "field '%s': a record of %s is whole %u-byte items, not %zu bytes", f->def.name,
		  zr_dtype_name(f->def.spec.dtype), zr_dtype_size(f->def.spec.dtype), v.len);
	RETURN_IF(f->def.spec.compress == ZR_RAW && v.len > ZR_RECORD_MAX, -EINVAL,
		  "field '%s': a raw record is at most %u bytes, not %zu", f->def.name,
		  ZR_RECORD_MAX, v.len);
	return 0;
}

/* A record's values up to STAGE_VALUE bytes are gathered in the writer's
 * stage, up to STAGE_MAX bytes, and written together (stage_flush()): a
 * file imported with its name, times and mode costs one write, not one a
 * value. Bigger values are written as they come. */
#define STAGE_VALUE (64u * 1024)
#define STAGE_MAX (256u * 1024)

/* Write what the stage holds at the end of the writer's chunk (where it
 * was laid out), before any entry points at it. */
static int stage_flush(zr_writer *w)
{
	size_t n = w->stage_len;
	uint64_t off;
	int rc;

	if (!n)
		return 0;
	w->stage_len = 0;
	rc = zr_chunk_append(w->ds, w->chunk, w->stage, n, NULL, 0, 1, &off);
	if (rc < 0 && !w->chunk->writable)
		zr_chunk_release(w->ds, w); /* cut short: the next append takes another */
	return rc;
}

/* @n bytes at @p into the stage at the next multiple of @align: their
 * offset in the chunk into *@off. 0, or -ENOMEM, or a failed flush. */
static int stage_add(zr_writer *w, const void *p, size_t n, unsigned align, uint64_t *off)
{
	uint64_t pos = w->chunk->write_pos + w->stage_len;
	size_t pad = (size_t)((pos + align - 1) / align * align - pos);

	if (w->stage_len + pad + n > STAGE_MAX) {
		FORWARD_IF_ERR(stage_flush(w));
		pos = w->chunk->write_pos;
		pad = (size_t)((pos + align - 1) / align * align - pos);
	}
	if (!w->stage)
		RETURN_IF(!(w->stage = malloc(STAGE_MAX)), -ENOMEM, "out of memory (%u bytes)",
			  STAGE_MAX);
	memset(w->stage + w->stage_len, 0, pad);
	memcpy(w->stage + w->stage_len + pad, p, n);
	w->stage_len += pad + n;
	*off = pos + pad;
	return 0;
}

/* Append one field value to the writer's chunk, or to its stage (written
 * by stage_flush()); the entry that points at it. */
static int store_value(zr_writer *w, unsigned field, zr_value v, zr_entry *e)
{
	zr_dataset *ds = w->ds;
	const zr_fstate *f = &ds->fields[field];
	const void *p = v.data;
	size_t n = v.len;
	uint64_t off;

	memset(e, 0, sizeof *e);
	if (!v.data)
		return 0; /* missing */
	if (v.len == 0) {
		e->chunk_id = ZR_CHUNK_EMPTY;
		return 0;
	}
	if (f->def.spec.compress == ZR_FLATE) {
		size_t bound = zr_flate_bound(v.len);
		if (bound > w->buf_cap) {
			uint8_t *b = realloc(w->buf, bound);
			RETURN_IF(!b, -ENOMEM, "out of memory (%zu bytes)", bound);
			w->buf = b;
			w->buf_cap = bound;
		}
		FORWARD_IF_ERR(zr_flate_encode(v.data, v.len, w->buf, w->buf_cap, &n));
		RETURN_IF(n > ZR_RECORD_MAX, -EFBIG,
			  "field '%s': %zu bytes compress to %zu, more than a record may hold",
			  f->def.name, v.len, n);
		p = w->buf;
	}
	if (ds->version >= 2)
		e->crc = zr_crc32c(0, p, n);
	int rc = n <= STAGE_VALUE ? stage_add(w, p, n, f->align, &off) : stage_flush(w);
	if (rc == 0 && n > STAGE_VALUE &&
	    (rc = zr_chunk_append(ds, w->chunk, p, n, NULL, 0, f->align, &off)) < 0 &&
	    !w->chunk->writable)
		zr_chunk_release(ds, w); /* cut short: the next append takes another */
	if (rc < 0)
		return rc;
	e->chunk_id = w->chunk->id;
	e->offset = off;
	e->len = (uint32_t)n;
	return 0;
}

/* The writer's chunk takes no more appends: handed back, full. */
static void chunk_full(zr_writer *w)
{
	zr_dataset *ds = w->ds;
	zr_chunk *full = w->chunk;

	pthread_mutex_lock(&ds->grow_lock);
	full->writable = false;
	full->owner = -1;
	w->chunk = NULL;
	pthread_mutex_unlock(&ds->grow_lock);
	zr_chunk_evictable(full); /* read from now on, like any other */
}

/* One more record in the writer's chunk; hand the chunk back when full. */
static void count_record(zr_writer *w)
{
	if (++w->chunk->records >= w->ds->chunk_size)
		chunk_full(w);
}

/* Format 2 keeps offsets below 2^40: a chunk the record's values might
 * take past it is full (they go to a fresh one). */
static void chunk_room(zr_writer *w, const zr_value *values)
{
	zr_dataset *ds = w->ds;
	uint64_t need = 0;

	if (ds->version < 2 || !w->chunk)
		return;
	for (unsigned f = 0; f < ds->nfields; f++)
		if (values[f].data)
			need += (ds->fields[f].def.spec.compress == ZR_FLATE
					 ? zr_flate_bound(values[f].len)
					 : values[f].len) +
				ds->fields[f].align;
	if (w->chunk->write_pos + need > ZR_V2_OFFSET_LIMIT && w->chunk->write_pos)
		chunk_full(w);
}

/* ---- writers ---- */

int zr_writer_open(zr_dataset *ds, zr_writer **out)
{
	zr_writer *w;
	int slot = -1;

	*out = NULL;
	FORWARD_IF_ERR(check_writable(ds));
	w = calloc(1, sizeof *w);
	RETURN_IF(!w, -ENOMEM, "out of memory");
	pthread_mutex_lock(&ds->grow_lock);
	for (int i = 0; i < ZR_WRITERS_MAX && slot < 0; i++)
		if (!ds->writers[i])
			slot = i;
	if (slot >= 0)
		ds->writers[slot] = w;
	pthread_mutex_unlock(&ds->grow_lock);
	if (slot < 0) {
		free(w);
		return zr_err(-EMFILE, "%s: %d writers are open already", ds->path, ZR_WRITERS_MAX);
	}
	w->ds = ds;
	w->slot = slot;
	*out = w;
	return 0;
}

void zr_writer_close(zr_writer *w)
{
	zr_dataset *ds;

	if (!w)
		return;
	ds = w->ds;
	zr_chunk_release(ds, w);
	pthread_mutex_lock(&ds->grow_lock);
	ds->writers[w->slot] = NULL;
	pthread_mutex_unlock(&ds->grow_lock);
	free(w->buf);
	free(w->stage);
	free(w);
}

static int reserve_locked(zr_dataset *ds, uint64_t n, uint64_t *first)
{
	uint64_t start, end;
	int rc = 0;

	pthread_mutex_lock(&ds->grow_lock);
	start = atomic_load(&ds->length);
	end = start + n;
	if (n > ZR_LENGTH_MAX || end > ZR_LENGTH_MAX) {
		rc = zr_err(-EFBIG, "%s: more than %llu records", ds->path,
			    (unsigned long long)ZR_LENGTH_MAX);
		goto out;
	}
	for (unsigned f = 0; f < ds->nfields && rc == 0; f++)
		rc = zr_table_reserve(ds, &ds->fields[f], end);
	if (rc < 0)
		goto out;
	/* the new ids read as missing until written; a stale entry left by a
	 * delete or an interrupted writer must not show through */
	for (unsigned f = 0; f < ds->nfields; f++) {
		static const zr_entry zero;
		uint64_t id = start;
		for (; id < end && id < ds->high && rc == 0; id++)
			rc = zr_overlay_set(ds, f, id, &zero, ds->generation + 1);
		if (id < end) {
			atomic_store(&ds->fields[f].unsynced, true);
			memset(zr_table_slot(&ds->fields[f], id), 0, (end - id) * ZR_ENTRY_SIZE);
		}
	}
	if (rc == 0) {
		atomic_store(&ds->dirty, true);
		atomic_store_explicit(&ds->length, end, memory_order_release); /* (b) */
		*first = start;
	}
out:
	pthread_mutex_unlock(&ds->grow_lock);
	return rc;
}

int zr_reserve(zr_dataset *ds, uint64_t n, uint64_t *first)
{
	int rc;

	FORWARD_IF_ERR(check_writable(ds));
	pthread_rwlock_rdlock(&ds->wlock);
	rc = reserve_locked(ds, n, first);
	pthread_rwlock_unlock(&ds->wlock);
	return rc;
}

/* A put into @id failed: give the id back if it is still the last one.
 * Nothing of it was committed, and the next append takes it (cleared again
 * by reserve_locked). If another writer reserved after it, it stays, and
 * reads as missing: the caller decides whether to commit it or close
 * without committing. */
static void unreserve(zr_dataset *ds, uint64_t id)
{
	pthread_mutex_lock(&ds->grow_lock);
	if (atomic_load(&ds->length) == id + 1)
		atomic_store_explicit(&ds->length, id, memory_order_release);
	pthread_mutex_unlock(&ds->grow_lock);
}

static int put_locked(zr_writer *w, uint64_t id, const zr_value *values)
{
	zr_dataset *ds = w->ds;
	zr_entry entries[ZR_FIELDS_MAX];

	RETURN_IF(id >= atomic_load(&ds->length), -ENOENT,
		  "%s: record %llu has not been reserved (length %llu)", ds->path,
		  (unsigned long long)id, (unsigned long long)atomic_load(&ds->length));
	for (unsigned f = 0; f < ds->nfields; f++)
		FORWARD_IF_ERR(check_value(ds, f, values[f]));
	int rc = 0;

	if (!w->chunk)
		FORWARD_IF_ERR(zr_chunk_acquire(ds, w));
	chunk_room(w, values);
	if (!w->chunk)
		FORWARD_IF_ERR(zr_chunk_acquire(ds, w));
	for (unsigned f = 0; f < ds->nfields && rc == 0; f++)
		rc = store_value(w, f, values[f], &entries[f]);
	if (rc == 0)
		rc = stage_flush(w);
	w->stage_len = 0; /* what a failed put staged is dropped */
	FORWARD_IF_ERR(rc);
	count_record(w);
	for (unsigned f = 0; f < ds->nfields; f++)
		FORWARD_IF_ERR(zr_entry_put(ds, f, id, &entries[f]));
	return 0;
}

int zr_writer_put(zr_writer *w, uint64_t id, const zr_value *values)
{
	int rc;

	pthread_rwlock_rdlock(&w->ds->wlock);
	rc = put_locked(w, id, values);
	pthread_rwlock_unlock(&w->ds->wlock);
	return rc;
}

int zr_writer_append(zr_writer *w, const zr_value *values, uint64_t *id_out)
{
	zr_dataset *ds = w->ds;
	uint64_t id;
	int rc;

	for (unsigned f = 0; f < ds->nfields; f++)
		FORWARD_IF_ERR(check_value(ds, f, values[f]));
	pthread_rwlock_rdlock(&ds->wlock);
	rc = reserve_locked(ds, 1, &id);
	if (rc == 0 && (rc = put_locked(w, id, values)) < 0)
		unreserve(ds, id);
	pthread_rwlock_unlock(&ds->wlock);
	if (rc == 0 && id_out)
		*id_out = id;
	return rc;
}

/* ---- the default writer, behind zr_append and zr_modify ---- */

static int default_writer(zr_dataset *ds, zr_writer **w)
{
	if (!ds->default_writer)
		FORWARD_IF_ERR(zr_writer_open(ds, &ds->default_writer));
	*w = ds->default_writer;
	return 0;
}

int zr_append(zr_dataset *ds, const zr_value *values, uint64_t *id_out)
{
	return zr_append_many(ds, values, 1, id_out);
}

int zr_append_many(zr_dataset *ds, const zr_value *values, size_t n, uint64_t *first_id_out)
{
	zr_writer *w;
	uint64_t id;
	int rc;

	FORWARD_IF_ERR(check_writable(ds));
	pthread_mutex_lock(&ds->default_lock);
	rc = default_writer(ds, &w);
	for (size_t i = 0; i < n && rc == 0; i++) {
		rc = zr_writer_append(w, values + i * ds->nfields, &id);
		if (rc == 0 && i == 0 && first_id_out)
			*first_id_out = id;
	}
	pthread_mutex_unlock(&ds->default_lock);
	return rc;
}

int zr_modify(zr_dataset *ds, unsigned field, uint64_t id, zr_value v)
{
	zr_writer *w;
	zr_entry e;
	int rc;

	FORWARD_IF_ERR(check_writable(ds));
	RETURN_IF(field >= ds->nfields, -ENOENT, "%s: no field %u", ds->path, field);
	FORWARD_IF_ERR(check_value(ds, field, v));
	pthread_rwlock_rdlock(&ds->wlock);
	pthread_mutex_lock(&ds->default_lock);
	if (id >= atomic_load(&ds->length)) {
		rc = zr_err(-ENOENT, "%s: record %llu does not exist (length %llu)", ds->path,
			    (unsigned long long)id, (unsigned long long)atomic_load(&ds->length));
		goto out;
	}
	if ((rc = default_writer(ds, &w)) < 0)
		goto out;
	if (!w->chunk && (rc = zr_chunk_acquire(ds, w)) < 0)
		goto out;
	rc = store_value(w, field, v, &e);
	if (rc == 0)
		rc = stage_flush(w);
	w->stage_len = 0;
	if (rc < 0)
		goto out;
	count_record(w);
	rc = zr_entry_put(ds, field, id, &e);
	atomic_store(&ds->dirty, true);
out:
	pthread_mutex_unlock(&ds->default_lock);
	pthread_rwlock_unlock(&ds->wlock);
	return rc;
}

int zr_move(zr_dataset *ds, unsigned field, uint64_t from, uint64_t to)
{
	zr_entry e, none = {0};
	uint64_t len;
	int rc = 0;

	FORWARD_IF_ERR(check_writable(ds));
	RETURN_IF(field >= ds->nfields, -ENOENT, "%s: no field %u", ds->path, field);
	pthread_rwlock_wrlock(&ds->wlock);
	len = atomic_load(&ds->length);
	if (from >= len || to >= len) {
		rc = zr_err(-ENOENT, "%s: record %llu does not exist (length %llu)", ds->path,
			    (unsigned long long)(from >= len ? from : to), (unsigned long long)len);
		goto out;
	}
	if (from == to)
		goto out;
	/* the bytes stay where they are: only the entries change, so the move
	 * is as durable as the commit that carries it */
	if ((rc = zr_entry_get(ds, field, from, &e)) == 0 &&
	    (rc = zr_entry_put(ds, field, to, &e)) == 0)
		rc = zr_entry_put(ds, field, from, &none);
	atomic_store(&ds->dirty, true);
out:
	pthread_rwlock_unlock(&ds->wlock);
	return rc;
}

int zr_delete(zr_dataset *ds, uint64_t id)
{
	uint64_t len, last;
	int rc = 0;

	FORWARD_IF_ERR(check_writable(ds));
	pthread_rwlock_wrlock(&ds->wlock);
	len = atomic_load(&ds->length);
	if (id >= len) {
		rc = zr_err(-ENOENT, "%s: record %llu does not exist (length %llu)", ds->path,
			    (unsigned long long)id, (unsigned long long)len);
		goto out;
	}
	last = len - 1;
	for (unsigned f = 0; f < ds->nfields && id != last && rc == 0; f++) {
		zr_entry e;
		if ((rc = zr_entry_get(ds, f, last, &e)) == 0)
			rc = zr_entry_put(ds, f, id, &e);
	}
	if (rc < 0)
		goto out;
	atomic_store(&ds->length, last);
	atomic_store(&ds->dirty, true);
out:
	pthread_rwlock_unlock(&ds->wlock);
	return rc;
}
