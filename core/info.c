/*
 * info.c - questions about an open dataset handle: its path, length,
 * fields and attrs; zr_info's figures (records, bytes, utilisation) and a
 * record's zr_stat. None changes the dataset; each answers from the state
 * the handle reads (store.c opens it).
 *
 * Sections: accessors, info and stat.
 */
#include "store_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- accessors ---- */

uint64_t zr_generation(const zr_dataset *ds)
{
	return ds->generation;
}

unsigned zr_format_version(const zr_dataset *ds)
{
	return ds->version;
}

uint64_t zr_length(const zr_dataset *ds)
{
	return atomic_load_explicit(&ds->length, memory_order_acquire);
}

unsigned zr_field_count(const zr_dataset *ds)
{
	return ds->nfields;
}

const zr_field_spec *zr_field(const zr_dataset *ds, unsigned i)
{
	return i < ds->nfields ? &ds->specs[i] : NULL;
}

int zr_field_find(const zr_dataset *ds, const char *name)
{
	for (unsigned i = 0; i < ds->nfields; i++)
		if (strcmp(ds->fields[i].def.name, name) == 0)
			return (int)i;
	return zr_err(-ENOENT, "%s: no field '%s'", ds->path, name);
}

uint64_t zr_field_record_size(const zr_dataset *ds, unsigned field)
{
	return field < ds->nfields ? ds->fields[field].record_size : 0;
}

const char *zr_path(const zr_dataset *ds)
{
	return ds->path;
}

char *zr_attrs(const zr_dataset *ds)
{
	if (!ds->attrs)
		return strdup("{}");
	return json_dumps(ds->attrs, JSON_COMPACT | JSON_SORT_KEYS);
}

/* ---- info and stat ---- */

int zr_stat(zr_dataset *ds, unsigned field, uint64_t id, zr_record_stat *out)
{
	zr_chunk *held;
	int rc = zr_stat_held(ds, field, id, out, &held);

	zr_chunk_unuse(held);
	return rc;
}

int zr_stat_held(zr_dataset *ds, unsigned field, uint64_t id, zr_record_stat *out,
		 zr_chunk **held)
{
	uint8_t hdr[ZR_FLATE_HDR + 8];
	zr_entry e;
	zr_chunk *c;
	int rc;

	*held = NULL;
	memset(out, 0, sizeof *out);
	out->fd = -1;
	RETURN_IF(field >= ds->nfields, -ENOENT, "%s: no field %u", ds->path, field);
	RETURN_IF(id >= zr_length(ds), -ENOENT, "%s: record %llu does not exist (length %llu)",
		  ds->path, (unsigned long long)id, (unsigned long long)zr_length(ds));
	FORWARD_IF_ERR(zr_entry_get(ds, field, id, &e));
	if (zr_entry_missing(&e))
		return 0;
	FORWARD_IF_ERR(zr_entry_check(ds, field, id, &e, &c));
	*held = c;
	out->present = 1;
	out->physical_len = e.len;
	out->chunk_id = e.chunk_id;
	out->offset = e.offset;
	out->crc = e.crc;
	out->fd = c ? c->fd : -1;
	out->logical_len = e.len;
	if (ds->fields[field].def.spec.compress != ZR_FLATE || e.len == 0)
		return zr_shape_check(ds, field, id, e.len);
	/* the length header with pread, not through the mapping: a chunk cut
	 * short under a reader gives EIO here, not SIGBUS */
	rc = zr_read_full(c->fd, hdr, e.len < sizeof hdr ? e.len : sizeof hdr, e.offset);
	RETURN_IF(rc < 0, rc == -ENODATA ? -EIO : rc,
		  "%s/chunk/%u.zr: reading record %llu of field '%s' failed: %s", ds->path,
		  e.chunk_id, (unsigned long long)id, ds->fields[field].def.name,
		  rc == -ENODATA ? "the file ends early" : strerror(-rc));
	if (zr_logical_len(&ds->fields[field], &e, hdr, &out->logical_len) < 0)
		return zr_err(ZR_ECORRUPT, "%s: field '%s' record %llu: bad flate header",
			      ds->path, ds->fields[field].def.name, (unsigned long long)id);
	return zr_shape_check(ds, field, id, out->logical_len);
}

int zr_present(zr_dataset *ds, unsigned field, uint64_t id)
{
	zr_entry e;

	RETURN_IF(field >= ds->nfields, -ENOENT, "%s: no field %u", ds->path, field);
	RETURN_IF(id >= zr_length(ds), -ENOENT, "%s: record %llu does not exist (length %llu)",
		  ds->path, (unsigned long long)id, (unsigned long long)zr_length(ds));
	FORWARD_IF_ERR(zr_entry_get(ds, field, id, &e));
	return !zr_entry_missing(&e);
}

uint64_t zr_chunk_bytes(zr_dataset *ds)
{
	uint32_t num = atomic_load(&ds->chunk_num);
	uint64_t sum = 0;

	for (uint32_t i = 0; i < num; i++)
		sum += zr_chunk_extent(ds, atomic_load(&ds->chunks)[i]);
	return sum;
}

uint64_t zr_chunk_bytes_estimate(zr_dataset *ds)
{
	uint32_t num = atomic_load(&ds->chunk_num), step, looked = 0, unknown = 0;
	uint64_t known = 0, sampled = 0;

	if (num <= 64)
		return zr_chunk_bytes(ds);
	/* up to 64 chunks not opened yet are looked at, spread over the ids */
	step = num / 64;
	for (uint32_t i = 0; i < num; i++) {
		zr_chunk *c = atomic_load(&ds->chunks)[i];
		uint64_t extent = atomic_load(&c->extent);
		if (extent != ZR_EXTENT_UNKNOWN) {
			known += extent;
		} else if (i % step == 0 && looked < 64) {
			sampled += zr_chunk_extent(ds, c);
			looked++;
		} else {
			unknown++;
		}
	}
	return known + sampled + (looked ? sampled / looked * unknown : 0);
}

int zr_info_get(zr_dataset *ds, zr_info *out)
{
	uint32_t num = atomic_load(&ds->chunk_num);
	uint64_t len = zr_length(ds);

	memset(out, 0, sizeof *out);
	out->length = len;
	out->generation = ds->generation;
	out->chunk_size = ds->chunk_size;
	out->chunk_count = num;
	out->mtime = ds->modified;
	/* every chunk file is looked at: a dataset whose files are not all
	 * there is refused, naming the first (zr verify names its records) */
	for (uint32_t i = 0; i < num; i++) {
		uint64_t extent;
		FORWARD_IF_ERR(zr_chunk_stat(ds, atomic_load(&ds->chunks)[i], &extent));
		out->chunk_bytes += extent;
	}
	for (unsigned f = 0; f < ds->nfields; f++)
		for (uint64_t id = 0; id < len; id++) {
			zr_entry e;
			const uint8_t *bytes;
			uint64_t logical;
			zr_chunk *held = NULL;
			FORWARD_IF_ERR(zr_entry_get(ds, f, id, &e));
			if (zr_entry_missing(&e)) {
				out->missing++;
				continue;
			}
			out->live_bytes += e.len;
			if (zr_entry_locate(ds, f, id, &e, &bytes, &held) == 0 &&
			    zr_logical_len(&ds->fields[f], &e, bytes, &logical) == 0)
				out->logical_bytes += logical;
			zr_chunk_unuse(held);
		}
	out->utilisation = out->chunk_bytes ? (double)out->live_bytes / (double)out->chunk_bytes
					    : 1.0;
	return 0;
}
