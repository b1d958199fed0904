/*
 * fields.c - the field tree, a subtree of the mount: meta.json, one directory
 * per field holding one file per present record (records.c), FIELD.npy,
 * the whole field as one array, for fixed-shape fields, and
 * FIELD.present.npy, a bool per record: whether it has a value (a missing
 * record reads as zeros in FIELD.npy, and 0 is a real label).
 *
 * Everything is computed from the view in O(1) per entry. Its entries in
 * the root, by position: 2 meta.json, 3 + 3f field f's directory, 4 + 3f
 * its .npy, 5 + 3f its .present.npy; in a field's directory: 2 + id
 * record id (missing records are absent). Files carry versions in their
 * inode numbers (view.c): meta.json the generation, FIELD.npy and
 * FIELD.present.npy the generation the field last changed in, a record
 * file its own; a number that is not the current one's shows the view it
 * is pinned to.
 *
 * Sections: nodes, lookup and attributes, listings, contents.
 */
#include "zrfs_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- nodes ---- */

enum node { N_NONE, N_META, N_DIR, N_NPY, N_PRESENT, N_REC };

/* What @ino is; with its field, id and version where it has them. */
static enum node fields_decode(const struct zrfs *fs, fuse_ino_t ino, unsigned *field, uint64_t *id,
			uint64_t *version)
{
	unsigned rv;

	if (zrfs_rec_decode(fs, ino, field, id, &rv)) { /* the most asked for, first */
		*version = rv;
		return N_REC;
	}
	if (ino >> 59 == 1) {
		*version = ino & ZRFS_GEN_MASK;
		return (ino & ~ZRFS_GEN_MASK) == ZRFS_INO_META ? N_META : N_NONE;
	}
	if (ino >= ZRFS_INO_DIR && ino < ZRFS_INO_DIR + fs->nfields) {
		*field = (unsigned)(ino - ZRFS_INO_DIR);
		return N_DIR;
	}
	/* FIELD.npy (fixed shapes only) and FIELD.present.npy (every field) */
	bool present = ino & ZRFS_INO_PRESENT;
	if (ino >> 58 == 1 && (ino & 0xff) < fs->nfields &&
	    (ino & ~(ZRFS_GEN_MASK << 8 | 0xff | ZRFS_INO_PRESENT)) == ZRFS_INO_NPY &&
	    (present || fs->fields[ino & 0xff].has_npy)) {
		*field = (unsigned)(ino & 0xff);
		*version = (ino >> 8) & ZRFS_GEN_MASK;
		return present ? N_PRESENT : N_NPY;
	}
	return N_NONE;
}

static fuse_ino_t meta_ino(const struct zrfs_view *v)
{
	return ZRFS_INO_META | (v->gen & ZRFS_GEN_MASK);
}

static fuse_ino_t npy_ino(const struct zrfs *fs, unsigned field)
{
	return ZRFS_INO_NPY | (zrfs_npy_version(fs, field) & ZRFS_GEN_MASK) << 8 | field;
}

static fuse_ino_t present_ino(const struct zrfs *fs, unsigned field)
{
	return npy_ino(fs, field) | ZRFS_INO_PRESENT;
}

/* The header of field @field's .present.npy in @v: a bool per record. */
static int present_header(const struct zrfs_view *v, struct zrfs_npy *h)
{
	static const zr_field_spec one = {.name = "present", .dtype = ZR_BOOL, .fixed = 1};

	return zrfs_npy_header(&one, v->n, 1, h);
}

static bool fields_owns(const struct zrfs *fs, fuse_ino_t ino)
{
	unsigned field;
	uint64_t id, version;

	return fields_decode(fs, ino, &field, &id, &version) != N_NONE;
}

static struct zrfs_view *fields_view_of(struct zrfs *fs, struct zrfs_view *cur, fuse_ino_t ino)
{
	unsigned field = 0;
	uint64_t id = 0, version = 0;
	bool current = true;

	switch (fields_decode(fs, ino, &field, &id, &version)) {
	case N_META:
		current = version == (cur->gen & ZRFS_GEN_MASK);
		break;
	case N_NPY:
	case N_PRESENT:
		current = version == (zrfs_npy_version(fs, field) & ZRFS_GEN_MASK);
		break;
	case N_REC:
		current = version == zrfs_rec_version(fs, field, id);
		break;
	case N_DIR:
	case N_NONE:
		break;
	}
	/* an older number: the view it was pinned to when its bytes changed */
	return current ? zrfs_view_ref(cur) : zrfs_inode_view(fs, ino);
}

/* ---- lookup and attributes ---- */

static fuse_ino_t root_child(const struct zrfs *fs, const struct zrfs_view *v, const char *name)
{
	size_t len = strlen(name);

	if (strcmp(name, "meta.json") == 0)
		return meta_ino(v);
	for (unsigned f = 0; f < fs->nfields; f++) {
		const struct zrfs_field *fd = &fs->fields[f];
		if (len == fd->name_len && memcmp(name, fd->spec->name, len) == 0)
			return ZRFS_INO_DIR + f;
		if (fd->has_npy && len == fd->name_len + 4 &&
		    memcmp(name, fd->spec->name, fd->name_len) == 0 &&
		    memcmp(name + fd->name_len, ".npy", 4) == 0)
			return npy_ino(fs, f);
		if (len == fd->name_len + 12 && memcmp(name, fd->spec->name, fd->name_len) == 0 &&
		    memcmp(name + fd->name_len, ".present.npy", 12) == 0)
			return present_ino(fs, f);
	}
	return 0;
}

static int fields_lookup(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t parent, const char *name,
		       fuse_ino_t *out)
{
	unsigned field = 0;
	uint64_t id, version;

	if (parent == ZRFS_INO_ROOT) {
		*out = root_child(fs, v, name);
		return *out ? 0 : -ENOENT;
	}
	if (fields_decode(fs, parent, &field, &id, &version) != N_DIR)
		return -ENOTDIR;
	if (zrfs_record_name_parse(fs, field, name, ZR_LENGTH_MAX, &id) < 0)
		return -ENOENT;
	if (id >= v->n) /* a record appended later will have it */
		return ZRFS_ENOENT_LATER;
	/* a value removed or moved away: its last number may be a file's
	 * that a rename took elsewhere (write/overlay.c), not this name's */
	if (!zrfs_record_listed(v, field, id))
		return -ENOENT;
	*out = zrfs_rec_ino(field, id, zrfs_rec_version(fs, field, id));
	return 0;
}

static int fields_attr(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino, struct stat *st)
{
	unsigned field = 0;
	uint64_t id = 0, version;

	switch (fields_decode(fs, ino, &field, &id, &version)) {
	case N_META:
		zrfs_file_attr(fs, v, ino, v->meta_len, st);
		return 0;
	case N_DIR:
		zrfs_dir_attr(fs, v, ino, st);
		zrfs_write_dir_meta(fs, field, st);
		return 0;
	case N_NPY:
		zrfs_file_attr(fs, v, ino, v->npy[field].size, st);
		return 0;
	case N_PRESENT: {
		struct zrfs_npy h;
		int rc = present_header(v, &h);
		if (rc == 0)
			zrfs_file_attr(fs, v, ino, h.size, st);
		return rc;
	}
	case N_REC:
		return zrfs_record_attr(fs, v, ino, field, id, st);
	case N_NONE:
		break;
	}
	return -ENOENT;
}

/* ---- listings ---- */

static int root_entry(struct zrfs *fs, struct zrfs_view *v, uint64_t pos, struct zrfs_dirent *out)
{
	for (uint64_t p = pos; p < 3 + 3 * (uint64_t)fs->nfields; p++) {
		unsigned fi = (unsigned)((p - 3) / 3);
		const struct zrfs_field *f = &fs->fields[fi];
		out->pos = p;
		out->type = S_IFREG;
		if (p == 2) {
			snprintf(out->name, sizeof out->name, "meta.json");
			out->ino = meta_ino(v);
		} else if ((p - 3) % 3 == 0) {
			snprintf(out->name, sizeof out->name, "%s", f->spec->name);
			out->ino = ZRFS_INO_DIR + fi;
			out->type = S_IFDIR;
		} else if ((p - 3) % 3 == 1 && f->has_npy) {
			snprintf(out->name, sizeof out->name, "%s.npy", f->spec->name);
			out->ino = npy_ino(fs, fi);
		} else if ((p - 3) % 3 == 2) {
			snprintf(out->name, sizeof out->name, "%s.present.npy", f->spec->name);
			out->ino = present_ino(fs, fi);
		} else {
			continue;
		}
		return 1;
	}
	return 0;
}

static int fields_entry(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t dir, uint64_t pos,
		      struct zrfs_dirent *out)
{
	unsigned field = 0;
	uint64_t id, version;

	if (dir == ZRFS_INO_ROOT)
		return root_entry(fs, v, pos, out);
	if (fields_decode(fs, dir, &field, &id, &version) != N_DIR)
		return -ENOTDIR;
	for (id = pos - 2; id < v->n; id++) {
		if (!zrfs_record_listed(v, field, id))
			continue; /* missing: absent from the directory */
		zrfs_record_name_format(fs, field, id, out->name, sizeof out->name);
		out->ino = zrfs_rec_ino(field, id, zrfs_rec_version(fs, field, id));
		out->type = S_IFREG;
		out->pos = id + 2;
		return 1;
	}
	return 0;
}

/* ---- contents ---- */

/* Bytes [off, off + size) of field @field's .npy view in @v. */
static void read_view(fuse_req_t req, struct zrfs *fs, struct zrfs_view *v, unsigned field,
		      size_t size, off_t off)
{
	const struct zrfs_field *f = &fs->fields[field];
	const struct zrfs_npy *h = &v->npy[field];
	uint64_t pos = (uint64_t)off, end = pos + size, lo, hi;
	struct zrfs_pieces p = {0};
	struct zrfs_row *rows = NULL;
	uint64_t *ids = NULL;
	zr_batch *g = NULL;
	int rc = 0;

	if (pos >= h->size) {
		zrfs_reply_buf(req, NULL, 0);
		return;
	}
	zrfs_npy_span(h, pos, end, &lo, &hi);
	size_t n = (size_t)(hi - lo);
	ids = malloc((n ? n : 1) * sizeof *ids);
	rows = malloc((n ? n : 1) * sizeof *rows);
	if (!ids || !rows || zrfs_pieces_init(&p, 2 + n) < 0)
		rc = -ENOMEM;
	for (size_t i = 0; rc == 0 && i < n; i++)
		ids[i] = lo + i;
	if (rc == 0)
		rc = f->whole ? zrfs_records_inflate_rows(fs, v, field, ids, n, rows)
			      : zrfs_records_locate(fs, v, field, ids, n, rows, &g);
	if (rc == 0)
		rc = zrfs_npy_pieces(&p, h, rows, lo, pos, end);
	if (rc == 0)
		zrfs_reply_pieces(req, fs, v, &p, false);
	else
		zrfs_reply_err(req, rc);
	zr_batch_release(g);
	zrfs_pieces_free(&p);
	free(rows);
	free(ids);
}

/* Bytes [off, off + size) of field @field's .present.npy in @v: made for
 * the records under them, one entry each. */
static void present_read(fuse_req_t req, struct zrfs_view *v, unsigned field, size_t size,
			 off_t off)
{
	uint64_t pos = (uint64_t)off, end;
	struct zrfs_npy h;
	uint8_t *buf;
	int rc = present_header(v, &h);

	if (rc < 0 || pos >= h.size) {
		if (rc < 0)
			zrfs_reply_err(req, rc);
		else
			zrfs_reply_buf(req, NULL, 0);
		return;
	}
	end = h.size - pos < size ? h.size : pos + size;
	if (!(buf = malloc(end - pos))) {
		zrfs_reply_err(req, -ENOMEM);
		return;
	}
	for (uint64_t at = pos; rc == 0 && at < end; at++) {
		if (at < h.hdr_len) {
			buf[at - pos] = (uint8_t)h.hdr[at];
		} else {
			rc = zr_present(v->ds, field, at - h.hdr_len);
			buf[at - pos] = rc > 0;
			rc = rc < 0 ? rc : 0;
		}
	}
	if (rc < 0)
		zrfs_reply_err(req, rc);
	else
		zrfs_reply_buf(req, (const char *)buf, end - pos);
	free(buf);
}

static void fields_read(fuse_req_t req, struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino,
		      size_t size, off_t off)
{
	unsigned field = 0;
	uint64_t id = 0, version;

	switch (fields_decode(fs, ino, &field, &id, &version)) {
	case N_META:
		zrfs_reply_slice(req, v->meta, v->meta_len, size, off);
		return;
	case N_NPY:
		read_view(req, fs, v, field, size, off);
		return;
	case N_PRESENT:
		present_read(req, v, field, size, off);
		return;
	case N_REC:
		zrfs_record_read(req, fs, v, zrfs_rec_cache_key(ino), 0, field, id, size, off);
		return;
	case N_DIR:
		zrfs_reply_err(req, -EISDIR);
		return;
	case N_NONE:
		break;
	}
	zrfs_reply_err(req, -ENOENT);
}

/* A record file's holes are its value's; the other files have none. */
static int64_t fields_seek(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino, uint64_t off,
			   int whence)
{
	unsigned field = 0;
	uint64_t id = 0, version;

	if (fields_decode(fs, ino, &field, &id, &version) != N_REC)
		return -ENOSYS;
	return zrfs_record_seek(fs, v, field, id, off, whence);
}

const struct zrfs_subtree zrfs_fields = {
	.name = "fields",
	.owns = fields_owns,
	.view_of = fields_view_of,
	.older_unlinked = true,
	.lookup = fields_lookup,
	.attr = fields_attr,
	.entry = fields_entry,
	.read = fields_read,
	.seek = fields_seek,
};
