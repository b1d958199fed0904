/*
 * gather.c - records by id, in the order asked: zr_gather() and friends.
 *
 * Raw records are returned as pointers into the mapped chunk files: no copy,
 * no allocation but the batch's own array. Flate records are inflated into
 * one arena per batch, sized from the logical lengths stored in front of
 * each stream, so a batch costs at most two allocations whatever its size.
 */
#include "store_i.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct zr_batch {
	size_t n;
	zr_slice *recs;
	uint8_t *arena;  /* inflated flate records, or NULL */
	size_t npins;
	zr_chunk **pins; /* the chunks raw slices point into: open until release */
};

/* Keep @c (pinned by a locate) for the batch, once per run of records in it. */
static void batch_pin(zr_batch *b, zr_chunk *c)
{
	if (!c)
		return;
	if (b->npins && b->pins[b->npins - 1] == c) {
		zr_chunk_unuse(c);
		return;
	}
	zr_chunk_keep(c); /* the chunk outlives its handle until the release */
	b->pins[b->npins++] = c;
}

static void batch_unpin(zr_batch *b)
{
	for (size_t i = 0; i < b->npins; i++) {
		zr_chunk_unuse(b->pins[i]);
		zr_chunk_drop(b->pins[i]);
	}
	b->npins = 0;
}

static int check_field(zr_dataset *ds, unsigned field)
{
	RETURN_IF(field >= ds->nfields, -ENOENT, "%s: no field %u (the dataset has %u)", ds->path,
		  field, ds->nfields);
	return 0;
}

/* Entry and bytes of one requested record, with its logical length; *held
 * is the chunk the bytes are in, pinned, or NULL. */
static int locate(zr_dataset *ds, unsigned field, uint64_t id, uint64_t len, zr_entry *e,
		  const uint8_t **bytes, uint64_t *logical, zr_chunk **held)
{
	int rc;

	*held = NULL;
	RETURN_IF(id >= len, -ENOENT, "%s: record %llu does not exist (length %llu)", ds->path,
		  (unsigned long long)id, (unsigned long long)len);
	FORWARD_IF_ERR(zr_entry_get(ds, field, id, e));
	FORWARD_IF_ERR(zr_entry_locate(ds, field, id, e, bytes, held));
	if (zr_logical_len(&ds->fields[field], e, *bytes, logical) < 0)
		rc = zr_err(ZR_ECORRUPT,
			    "%s: field '%s' record %llu: flate header claims an impossible length",
			    ds->path, ds->fields[field].def.name, (unsigned long long)id);
	else
		rc = zr_entry_missing(e) ? 0 : zr_shape_check(ds, field, id, *logical);
	if (rc < 0) {
		zr_chunk_unuse(*held);
		*held = NULL;
	}
	return rc;
}

int zr_gather(zr_dataset *ds, unsigned field, const uint64_t *ids, size_t n, zr_batch **out)
{
	bool flate, check;
	uint64_t len = zr_length(ds), total = 0;
	uint32_t *phys = NULL;
	zr_batch *b;
	int rc = 0;

	*out = NULL;
	FORWARD_IF_ERR(check_field(ds, field));
	flate = ds->fields[field].def.spec.compress == ZR_FLATE;
	check = zr_checks(ds, field);
	b = calloc(1, sizeof *b + n * (sizeof *b->recs + sizeof *b->pins) +
			      (flate ? n * sizeof *phys : 0));
	RETURN_IF(!b, -ENOMEM, "out of memory (batch of %zu)", n);
	b->n = n;
	b->recs = (zr_slice *)(b + 1);
	b->pins = (zr_chunk **)(b->recs + n);
	phys = (uint32_t *)(b->pins + n);
	for (size_t i = 0; i < n; i++) {
		zr_entry e;
		const uint8_t *bytes;
		uint64_t logical;
		zr_chunk *held;
		if ((rc = locate(ds, field, ids[i], len, &e, &bytes, &logical, &held)) < 0)
			goto fail;
		batch_pin(b, held);
		if (check && (rc = zr_value_check(ds, field, ids[i], &e, bytes)) < 0)
			goto fail;
		b->recs[i].data = bytes;
		b->recs[i].len = logical;
		if (flate) {
			phys[i] = e.len;
			total += logical;
		}
	}
	if (flate && total) {
		uint8_t *p = b->arena = malloc(total);
		if (!p) {
			rc = zr_err(-ENOMEM, "out of memory (%llu bytes)", (unsigned long long)total);
			goto fail;
		}
		for (size_t i = 0; i < n; i++) {
			if (phys[i] == 0)
				continue; /* missing or empty: nothing to inflate */
			rc = zr_flate_decode(b->recs[i].data, phys[i], p, b->recs[i].len);
			if (rc < 0) {
				rc = zr_err(rc, "%s: field '%s' record %llu: the stream does not inflate to %llu bytes",
					    ds->path, ds->fields[field].def.name,
					    (unsigned long long)ids[i],
					    (unsigned long long)b->recs[i].len);
				goto fail;
			}
			b->recs[i].data = p;
			p += b->recs[i].len;
		}
	}
	if (flate)
		batch_unpin(b); /* nothing points into the chunks */
	*out = b;
	return 0;
fail:
	zr_batch_release(b);
	return rc;
}

const zr_slice *zr_batch_records(const zr_batch *b, size_t *n)
{
	*n = b->n;
	return b->recs;
}

void zr_batch_release(zr_batch *b)
{
	if (b) {
		batch_unpin(b);
		free(b->arena);
		free(b);
	}
}

int zr_batch_bytes(zr_dataset *ds, unsigned field, const uint64_t *ids, size_t n,
		   uint64_t *total)
{
	uint64_t len = zr_length(ds);

	*total = 0;
	FORWARD_IF_ERR(check_field(ds, field));
	for (size_t i = 0; i < n; i++) {
		zr_entry e;
		const uint8_t *bytes;
		uint64_t logical;
		zr_chunk *held;
		FORWARD_IF_ERR(locate(ds, field, ids[i], len, &e, &bytes, &logical, &held));
		zr_chunk_unuse(held);
		*total += logical;
	}
	return 0;
}

/* Scratch for the stored bytes of flate records, one per thread. */
static _Thread_local uint8_t *load_buf;
static _Thread_local size_t load_cap;
static pthread_key_t load_key;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load_key_init(void)
{
	pthread_key_create(&load_key, free);
}

static int64_t record_load(zr_dataset *ds, unsigned field, uint64_t id, void *dst, size_t cap,
			   zr_chunk **held)
{
	zr_record_stat st;
	int rc;

	FORWARD_IF_ERR(zr_stat_held(ds, field, id, &st, held));
	RETURN_IF(!st.present, -ENOENT, "%s: field '%s' record %llu is missing", ds->path,
		  ds->fields[field].def.name, (unsigned long long)id);
	RETURN_IF(st.logical_len > cap, -ENOBUFS, "%s: record of %llu bytes, buffer of %zu",
		  ds->path, (unsigned long long)st.logical_len, cap);
	if (st.physical_len == 0)
		return 0;
	zr_entry e = {st.offset, st.chunk_id, st.physical_len, st.crc};
	if (ds->fields[field].def.spec.compress == ZR_RAW) {
		rc = zr_read_full(st.fd, dst, st.physical_len, st.offset);
		if (rc == 0 && zr_checks(ds, field))
			FORWARD_IF_ERR(zr_value_check(ds, field, id, &e, dst));
	} else {
		if (st.physical_len > load_cap) {
			uint8_t *b = realloc(load_buf, st.physical_len);
			RETURN_IF(!b, -ENOMEM, "out of memory (%u bytes)", st.physical_len);
			pthread_once(&load_once, load_key_init);
			pthread_setspecific(load_key, b); /* freed when the thread exits */
			load_buf = b;
			load_cap = st.physical_len;
		}
		rc = zr_read_full(st.fd, load_buf, st.physical_len, st.offset);
		if (rc == 0)
			FORWARD_IF_ERR(zr_value_check(ds, field, id, &e, load_buf));
		if (rc == 0 && zr_flate_decode(load_buf, st.physical_len, dst, st.logical_len) < 0)
			rc = ZR_ECORRUPT;
	}
	RETURN_IF(rc == ZR_ECORRUPT, ZR_ECORRUPT,
		  "%s: field '%s' record %llu: the stream does not inflate to %llu bytes", ds->path,
		  ds->fields[field].def.name, (unsigned long long)id,
		  (unsigned long long)st.logical_len);
	RETURN_IF(rc < 0, rc == -ENODATA ? -EIO : rc,
		  "%s/chunk/%u.zr: reading record %llu of field '%s' failed: %s", ds->path,
		  st.chunk_id, (unsigned long long)id, ds->fields[field].def.name,
		  rc == -ENODATA ? "the file ends early" : strerror(-rc));
	return (int64_t)st.logical_len;
}

int64_t zr_record_load(zr_dataset *ds, unsigned field, uint64_t id, void *dst, size_t cap)
{
	zr_chunk *held;
	int64_t rc = record_load(ds, field, id, dst, cap, &held);

	zr_chunk_unuse(held); /* its fd was read */
	return rc;
}

int64_t zr_record_copy(zr_dataset *ds, unsigned field, uint64_t id, int fd)
{
	zr_record_stat st;
	zr_chunk *held = NULL;
	uint8_t *buf = NULL;
	int rc;

	if ((rc = zr_stat_held(ds, field, id, &st, &held)) < 0)
		goto out;
	if (!st.present) {
		rc = zr_err(-ENOENT, "%s: field '%s' record %llu is missing", ds->path,
			    ds->fields[field].def.name, (unsigned long long)id);
		goto out;
	}
	bool check = zr_checks(ds, field) && st.physical_len;
	uint32_t crc = 0;
	/* an empty file reads as zeros where nothing is written: runs of
	 * zeros stay holes there, as in the chunk (zr_write_sparse) */
	struct stat fst;
	bool empty = fstat(fd, &fst) == 0 && S_ISREG(fst.st_mode) && fst.st_size == 0;
	if (ds->fields[field].def.spec.compress == ZR_FLATE && st.physical_len) {
		rc = zr_flate_copy(st.fd, st.offset, st.physical_len, st.logical_len, fd,
				   check ? &crc : NULL);
	} else if (st.physical_len && !(buf = malloc(ZR_COPY_PIECE))) {
		rc = zr_err(-ENOMEM, "out of memory");
		goto out;
	}
	for (uint64_t at = 0; buf && rc == 0 && at < st.physical_len; at += ZR_COPY_PIECE) {
		size_t n = st.physical_len - at < ZR_COPY_PIECE ? (size_t)(st.physical_len - at)
								 : ZR_COPY_PIECE;
		if ((rc = zr_read_full(st.fd, buf, n, st.offset + at)) == 0)
			rc = empty ? zr_write_sparse(fd, buf, n, at)
				   : zr_write_full(fd, buf, n, at);
		if (check)
			crc = zr_crc32c(crc, buf, n);
	}
	if (rc == 0 && check) {
		zr_entry e = {st.offset, st.chunk_id, st.physical_len, st.crc};
		if ((rc = zr_crc_check(ds, field, id, &e, crc)) < 0)
			goto out; /* said */
	}
	if (rc == ZR_ECORRUPT)
		rc = zr_err(rc, "%s: field '%s' record %llu: the stream does not inflate to %llu bytes",
			    ds->path, ds->fields[field].def.name, (unsigned long long)id,
			    (unsigned long long)st.logical_len);
	else if (rc == -ENODATA)
		rc = zr_err(-EIO, "%s/chunk/%u.zr: reading record %llu of field '%s' failed: the "
			    "file ends early", ds->path, st.chunk_id, (unsigned long long)id,
			    ds->fields[field].def.name);
	else if (rc < 0)
		rc = zr_err(rc, "%s: copying field '%s' record %llu: %s", ds->path,
			    ds->fields[field].def.name, (unsigned long long)id, strerror(-rc));
out:
	free(buf);
	zr_chunk_unuse(held);
	return rc < 0 ? rc : (int64_t)st.logical_len;
}

/* Where lseek(2) of chunk file @fd finds @whence at or after byte @off of
 * the raw value at [base, base + len): its offset in the value, len for no
 * hole before the end, -ENXIO for no data before it. A filesystem that
 * cannot tell (an error other than ENXIO) has data everywhere. */
static int64_t value_seek(int fd, uint64_t base, uint64_t len, uint64_t off, int whence)
{
	off_t at = lseek(fd, (off_t)(base + off), whence);

	if (at < 0 && errno != ENXIO)
		at = whence == SEEK_DATA ? (off_t)(base + off) : (off_t)(base + len);
	if (at < 0 || (uint64_t)at >= base + len) /* ENXIO: only a hole is left */
		return whence == SEEK_DATA ? -ENXIO : (int64_t)len;
	return (int64_t)((uint64_t)at - base);
}

/* The value of record @id pinned for seeks: 1 with *@st and *@held (raw,
 * stored: its holes are the chunk's), 0 for a value without holes (flate,
 * empty; nothing held), or -errno. */
static int seek_hold(zr_dataset *ds, unsigned field, uint64_t id, zr_record_stat *st,
		     zr_chunk **held)
{
	int rc;

	*held = NULL;
	if ((rc = zr_stat_held(ds, field, id, st, held)) < 0)
		return rc;
	if (!st->present) {
		zr_chunk_unuse(*held);
		*held = NULL;
		return zr_err(-ENOENT, "%s: field '%s' record %llu is missing", ds->path,
			      ds->fields[field].def.name, (unsigned long long)id);
	}
	if (ds->fields[field].def.spec.compress == ZR_RAW && st->physical_len && st->fd >= 0)
		return 1;
	zr_chunk_unuse(*held);
	*held = NULL;
	return 0;
}

int64_t zr_record_seek(zr_dataset *ds, unsigned field, uint64_t id, uint64_t off, int whence)
{
	zr_record_stat st;
	zr_chunk *held;
	int64_t rc;

	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return zr_err(-EINVAL, "zr_record_seek: whence %d is neither SEEK_DATA nor "
				       "SEEK_HOLE", whence);
	if ((rc = seek_hold(ds, field, id, &st, &held)) < 0)
		return rc;
	if (off >= st.logical_len)
		rc = -ENXIO;
	else if (rc == 0)
		rc = whence == SEEK_DATA ? (int64_t)off : (int64_t)st.logical_len;
	else
		rc = value_seek(st.fd, st.offset, st.logical_len, off, whence);
	zr_chunk_unuse(held);
	return rc;
}

int64_t zr_record_holes(zr_dataset *ds, unsigned field, uint64_t id)
{
	zr_record_stat st;
	zr_chunk *held;
	int64_t rc, holes = 0;

	if ((rc = seek_hold(ds, field, id, &st, &held)) <= 0)
		return rc;
	for (uint64_t at = 0; at < st.logical_len;) {
		int64_t data = value_seek(st.fd, st.offset, st.logical_len, at, SEEK_DATA);
		if (data < 0) { /* a hole to the end */
			holes += (int64_t)(st.logical_len - at);
			break;
		}
		holes += data - (int64_t)at;
		at = (uint64_t)value_seek(st.fd, st.offset, st.logical_len, (uint64_t)data,
					  SEEK_HOLE);
	}
	zr_chunk_unuse(held);
	return holes;
}
