/*
 * rebalance.c - offline compaction: zr_rebalance(), and rolling it forward.
 *
 * Live records are read in (chunk, offset) order, so the old chunks are read
 * sequentially, and appended in that order to fresh chunks numbered after the
 * old ones, each value with its checksum (a format-1 dataset becomes format
 * 2). New tables are written beside the old as <field>.offset.new.
 * Then the switch:
 *   1. rebalance.json (the new meta.json, next generation) is written to a
 *      temporary file, fsynced and renamed into place: the commit point;
 *   2. each <field>.offset.new is renamed over <field>.offset;
 *   3. meta.json is replaced by the manifest's content;
 *   4. the old chunks and the manifest are removed.
 * Before 1 the old dataset is untouched (the new files are ignored and
 * removed by the next writer). After 1, zr_open() finishes steps 2-4 (a
 * writer) or reads the manifest and the .new tables directly (a reader):
 * the manifest and its rolling forward are manifest.c's.
 */
#include "store_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct ref {
	uint32_t chunk_id;
	uint32_t field;
	uint64_t offset;
	uint64_t id;
};

static int ref_cmp(const void *a, const void *b)
{
	const struct ref *x = a, *y = b;

	if (x->chunk_id != y->chunk_id)
		return x->chunk_id < y->chunk_id ? -1 : 1;
	if (x->offset != y->offset)
		return x->offset < y->offset ? -1 : 1;
	return x->field < y->field ? -1 : x->field > y->field;
}

struct out_chunk {
	int fd;
	uint32_t id;
	uint64_t pos;
	uint32_t records;
};

static int next_chunk(zr_dataset *ds, struct out_chunk *oc, uint32_t id)
{
	char name[32];

	if (oc->fd >= 0) {
		if (zr_sys.fdatasync(oc->fd) < 0)
			return zr_err(-errno, "%s/chunk/%u.zr: fdatasync failed: %s", ds->path,
				      oc->id, strerror(errno));
		close(oc->fd);
	}
	zr_chunk_name(name, sizeof name, id);
	oc->fd = zr_create_fresh(ds->chunkdirfd, name, O_RDWR);
	RETURN_IF(oc->fd < 0, -errno, "%s/chunk/%s: create failed: %s", ds->path, name,
		  strerror(errno));
	oc->id = id;
	oc->pos = 0;
	oc->records = 0;
	return 0;
}

/* Write the new chunks and tables; fill @m with the state they make. */
static int rewrite(zr_dataset *ds, uint32_t chunk_size, zr_meta *m, uint8_t **tables)
{
	uint64_t len = zr_length(ds), nrefs = 0, last_id = UINT64_MAX;
	uint32_t first = ds->chunk_first + atomic_load(&ds->chunk_num), count = 0;
	struct out_chunk oc = {.fd = -1};
	struct ref *refs;
	zr_chunk *held = NULL;
	int rc = 0;

	refs = malloc((len * ds->nfields + 1) * sizeof *refs);
	RETURN_IF(!refs, -ENOMEM, "out of memory (%llu records)", (unsigned long long)len);
	for (unsigned f = 0; f < ds->nfields; f++)
		for (uint64_t id = 0; id < len; id++) {
			zr_entry e;
			if ((rc = zr_entry_get(ds, f, id, &e)) < 0) {
				free(refs);
				return rc;
			}
			if (e.len)
				refs[nrefs++] = (struct ref){e.chunk_id, f, e.offset, id};
			else
				zr_entry_store(tables[f] + id * ZR_ENTRY_SIZE, ZR_FORMAT_VERSION, &e);
		}
	qsort(refs, nrefs, sizeof *refs, ref_cmp);
	for (uint64_t i = 0; i < nrefs && rc == 0; i++) {
		struct ref *r = &refs[i];
		zr_fstate *f = &ds->fields[r->field];
		const uint8_t *bytes;
		zr_entry e;
		zr_chunk_unuse(held); /* the previous record's, copied */
		held = NULL;
		zr_progress_tell(ds, i, nrefs);
		if ((rc = zr_entry_get(ds, r->field, r->id, &e)) < 0 ||
		    (rc = zr_entry_locate(ds, r->field, r->id, &e, &bytes, &held)) < 0)
			break;
		/* a record's fields were appended together: count a record once */
		/* (format 2's offsets stay below 2^40: past it, a fresh chunk) */
		bool room = oc.fd >= 0 && oc.pos + f->align + e.len <= ZR_V2_OFFSET_LIMIT;
		if (r->id != last_id || !room) {
			if (!room || oc.records >= chunk_size) {
				if (first + count >= ZR_V2_CHUNK_LIMIT) {
					rc = zr_err(-EFBIG, "%s: no chunk ids left (format 2 numbers "
						    "chunks below %u)", ds->path, ZR_V2_CHUNK_LIMIT);
					break;
				}
				if ((rc = next_chunk(ds, &oc, first + count++)) < 0)
					break;
			}
			oc.records++;
			last_id = r->id;
		}
		uint64_t off = (oc.pos + f->align - 1) / f->align * f->align;
		if ((rc = zr_write_sparse(oc.fd, bytes, e.len, off)) < 0) {
			rc = zr_err(rc, "%s/chunk/%u.zr: write failed: %s", ds->path, oc.id,
				    strerror(-rc));
			break;
		}
		oc.pos = off + e.len;
		e.chunk_id = oc.id;
		e.offset = off;
		/* the value's checksum goes with it (a damaged value stays one);
		 * a format-1 dataset's values get theirs */
		if (ds->version < 2)
			e.crc = zr_crc32c(0, bytes, e.len);
		zr_entry_store(tables[r->field] + r->id * ZR_ENTRY_SIZE, ZR_FORMAT_VERSION, &e);
	}
	zr_chunk_unuse(held);
	free(refs);
	if (rc == 0)
		zr_progress_tell(ds, nrefs, nrefs);
	if (rc == 0 && oc.fd >= 0 && zr_sys.fdatasync(oc.fd) < 0)
		rc = zr_err(-errno, "%s/chunk/%u.zr: fdatasync failed: %s", ds->path, oc.id,
			    strerror(errno));
	if (oc.fd >= 0)
		close(oc.fd);
	FORWARD_IF_ERR(rc);
	zr_meta_from_ds(ds, m);
	RETURN_IF(!m->unfull || !m->fields, -ENOMEM, "out of memory");
	m->version = ZR_FORMAT_VERSION; /* every value has its checksum now */
	m->generation = ds->generation + 1;
	m->high = m->length; /* readers of older states keep the old tables */
	m->chunk_size = chunk_size;
	m->chunk_first = first;
	m->chunk_num = count;
	m->unfull_count = 0;
	if (count && oc.records < chunk_size)
		m->unfull[m->unfull_count++] = (zr_unfull){oc.id, oc.pos, oc.records};
	return 0;
}

int zr_rebalance(zr_dataset *ds, uint32_t chunk_size, zr_rebalance_report *out)
{
	uint64_t len = zr_length(ds);
	uint8_t *tables[ZR_FIELDS_MAX] = {0};
	int fds[ZR_FIELDS_MAX];
	zr_info before;
	zr_meta m = {0};
	int rc = 0;

	RETURN_IF(!(ds->flags & ZR_RDWR), -EROFS, "%s: opened read-only", ds->path);
	RETURN_IF(atomic_load(&ds->dirty), -EBUSY,
		  "%s: uncommitted changes: commit or discard them before a rebalance", ds->path);
	FORWARD_IF_ERR(zr_info_get(ds, &before));
	if (!chunk_size)
		chunk_size = ds->chunk_size;
	for (unsigned f = 0; f < ds->nfields; f++)
		fds[f] = -1;
	pthread_rwlock_wrlock(&ds->wlock);
	zr_writer_close(ds->default_writer);
	ds->default_writer = NULL;
	for (unsigned f = 0; f < ds->nfields && rc == 0; f++) {
		char name[ZR_NAME_MAX + 16];
		size_t size = len * ZR_ENTRY_SIZE;
		zr_new_table_name(name, sizeof name, ds->fields[f].def.name);
		fds[f] = zr_create_fresh(ds->dirfd, name, O_RDWR);
		if (fds[f] < 0) {
			rc = zr_err(-errno, "%s/%s: %s", ds->path, name, zr_open_strerror(errno));
			break;
		}
		/* the table is stored through a mapping: its blocks first (a
		 * full disk is ENOSPC here, not SIGBUS in rewrite) */
		if ((rc = zr_file_reserve(fds[f], size)) < 0) {
			rc = zr_err(rc, "%s/%s: cannot reserve %zu bytes: %s", ds->path, name, size,
				    strerror(-rc));
			break;
		}
		if (size) {
			void *p = zr_sys.mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fds[f], 0);
			if (p == MAP_FAILED) {
				rc = zr_err(-errno, "%s/%s: mmap failed: %s", ds->path, name,
					    strerror(errno));
				break;
			}
			tables[f] = p;
		}
	}
	if (rc == 0)
		rc = rewrite(ds, chunk_size, &m, tables);
	for (unsigned f = 0; f < ds->nfields; f++) {
		if (tables[f])
			munmap(tables[f], len * ZR_ENTRY_SIZE);
		if (fds[f] >= 0 && rc == 0 && zr_sys.fdatasync(fds[f]) < 0)
			rc = zr_err(-errno, "%s/%s.offset.new: fdatasync failed: %s", ds->path,
				    ds->fields[f].def.name, strerror(errno));
		if (fds[f] >= 0)
			close(fds[f]);
	}
	if (rc == 0 && zr_sys.fsync(ds->chunkdirfd) < 0)
		rc = zr_err(-errno, "%s/chunk: fsync failed: %s", ds->path, strerror(errno));
	if (rc == 0)
		rc = zr_manifest_write(ds, &m); /* the commit point */
	if (rc < 0) {
		/* nothing was switched: remove what was written (or leave it to the
		 * next writer's sweep if even that fails) */
		for (unsigned f = 0; f < ds->nfields; f++) {
			char name[ZR_NAME_MAX + 16];
			zr_new_table_name(name, sizeof name, ds->fields[f].def.name);
			zr_sys.unlinkat(ds->dirfd, name, 0);
		}
		for (uint32_t i = 0; i < m.chunk_num; i++) {
			char name[32];
			zr_chunk_name(name, sizeof name, m.chunk_first + i);
			zr_sys.unlinkat(ds->chunkdirfd, name, 0);
		}
		pthread_rwlock_unlock(&ds->wlock);
		zr_meta_free(&m);
		return rc;
	}
	rc = zr_manifest_finish(ds->dirfd, ds->chunkdirfd, ds->path, &m);
	pthread_rwlock_unlock(&ds->wlock);
	if (rc == 0)
		rc = zr_reload(ds, &m);
	zr_meta_free(&m);
	FORWARD_IF_ERR(rc);
	if (out) {
		zr_info after;
		FORWARD_IF_ERR(zr_info_get(ds, &after));
		out->utilisation_before = before.utilisation;
		out->utilisation_after = after.utilisation;
		out->chunk_bytes_before = before.chunk_bytes;
		out->chunk_bytes_after = after.chunk_bytes;
		out->chunks_before = before.chunk_count;
		out->chunks_after = after.chunk_count;
	}
	return 0;
}
