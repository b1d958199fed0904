/*
 * tree.c - the field tree, a subtree of the mount: meta.json, one directory
 * per field holding one file per present record (records.c), and
 * FIELD.npy, the whole field as one array, for fixed-shape fields.
 *
 * Everything is computed from the dataset in O(1) per entry. Its entries in
 * the root, by position: 2 meta.json, 3 + 2f field f's directory, 4 + 2f
 * its .npy; in a field's directory: 2 + id record id (missing records are
 * absent).
 *
 * Sections: nodes, lookup and attributes, listings, contents.
 */
#include "zrfs_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- nodes ---- */

enum node { N_NONE, N_META, N_DIR, N_NPY, N_REC };

static enum node decode(const struct zrfs *fs, fuse_ino_t ino, unsigned *field, uint64_t *id)
{
	if (zrfs_rec_decode(fs, ino, field, id)) /* the most asked for, first */
		return N_REC;
	if (ino == ZRFS_INO_META)
		return N_META;
	if (ino >= ZRFS_INO_DIR && ino < ZRFS_INO_DIR + fs->nfields) {
		*field = (unsigned)(ino - ZRFS_INO_DIR);
		return N_DIR;
	}
	if (ino >= ZRFS_INO_NPY && ino < ZRFS_INO_NPY + fs->nfields &&
	    fs->fields[ino - ZRFS_INO_NPY].has_npy) {
		*field = (unsigned)(ino - ZRFS_INO_NPY);
		return N_NPY;
	}
	return N_NONE;
}

static bool tree_owns(const struct zrfs *fs, fuse_ino_t ino)
{
	unsigned field;
	uint64_t id;

	return decode(fs, ino, &field, &id) != N_NONE;
}

/* ---- lookup and attributes ---- */

static fuse_ino_t root_child(const struct zrfs *fs, const char *name)
{
	size_t len = strlen(name);

	if (strcmp(name, "meta.json") == 0)
		return ZRFS_INO_META;
	for (unsigned f = 0; f < fs->nfields; f++) {
		const struct zrfs_field *fd = &fs->fields[f];
		if (len == fd->name_len && memcmp(name, fd->spec->name, len) == 0)
			return ZRFS_INO_DIR + f;
		if (fd->has_npy && len == fd->name_len + 4 &&
		    memcmp(name, fd->spec->name, fd->name_len) == 0 &&
		    memcmp(name + fd->name_len, ".npy", 4) == 0)
			return ZRFS_INO_NPY + f;
	}
	return 0;
}

static int tree_lookup(struct zrfs *fs, fuse_ino_t parent, const char *name, fuse_ino_t *out)
{
	unsigned field = 0;
	uint64_t id;

	if (parent == ZRFS_INO_ROOT) {
		*out = root_child(fs, name);
		return *out ? 0 : -ENOENT;
	}
	if (decode(fs, parent, &field, &id) != N_DIR)
		return -ENOTDIR;
	if (zrfs_record_name_parse(&fs->fields[field], name, fs->n, &id) < 0)
		return -ENOENT;
	*out = zrfs_rec_ino(field, id);
	return 0;
}

static int tree_attr(struct zrfs *fs, fuse_ino_t ino, struct stat *st)
{
	unsigned field = 0;
	uint64_t id = 0;

	switch (decode(fs, ino, &field, &id)) {
	case N_META:
		zrfs_file_attr(fs, ino, fs->meta_len, st);
		return 0;
	case N_DIR:
		zrfs_dir_attr(fs, ino, st);
		return 0;
	case N_NPY:
		zrfs_file_attr(fs, ino, fs->fields[field].npy.size, st);
		return 0;
	case N_REC:
		return zrfs_record_attr(fs, field, id, st);
	case N_NONE:
		break;
	}
	return -ENOENT;
}

/* ---- listings ---- */

static int root_entry(struct zrfs *fs, uint64_t pos, struct zrfs_dirent *out)
{
	for (uint64_t p = pos; p < 3 + 2 * (uint64_t)fs->nfields; p++) {
		const struct zrfs_field *f = &fs->fields[(p - 3) / 2];
		out->pos = p;
		out->type = S_IFREG;
		if (p == 2) {
			snprintf(out->name, sizeof out->name, "meta.json");
			out->ino = ZRFS_INO_META;
		} else if ((p - 3) % 2 == 0) {
			snprintf(out->name, sizeof out->name, "%s", f->spec->name);
			out->ino = ZRFS_INO_DIR + (p - 3) / 2;
			out->type = S_IFDIR;
		} else if (f->has_npy) {
			snprintf(out->name, sizeof out->name, "%s.npy", f->spec->name);
			out->ino = ZRFS_INO_NPY + (p - 3) / 2;
		} else {
			continue;
		}
		return 1;
	}
	return 0;
}

static int tree_entry(struct zrfs *fs, fuse_ino_t dir, uint64_t pos, struct zrfs_dirent *out)
{
	unsigned field = 0;
	uint64_t id;

	if (dir == ZRFS_INO_ROOT)
		return root_entry(fs, pos, out);
	if (decode(fs, dir, &field, &id) != N_DIR)
		return -ENOTDIR;
	for (id = pos - 2; id < fs->n; id++) {
		if (!zrfs_record_listed(fs, field, id))
			continue; /* missing: absent from the directory */
		zrfs_record_name_format(&fs->fields[field], id, out->name, sizeof out->name);
		out->ino = zrfs_rec_ino(field, id);
		out->type = S_IFREG;
		out->pos = id + 2;
		return 1;
	}
	return 0;
}

/* ---- contents ---- */

/* Bytes [off, off + size) of field @field's .npy view. */
static void read_view(fuse_req_t req, struct zrfs *fs, unsigned field, size_t size, off_t off)
{
	const struct zrfs_field *f = &fs->fields[field];
	uint64_t pos = (uint64_t)off, end = pos + size, lo, hi;
	struct zrfs_pieces p = {0};
	struct zrfs_row *rows = NULL;
	uint64_t *ids = NULL;
	zr_batch *g = NULL;
	int rc = 0;

	if (pos >= f->npy.size) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	zrfs_npy_span(&f->npy, pos, end, &lo, &hi);
	size_t n = (size_t)(hi - lo);
	ids = malloc((n ? n : 1) * sizeof *ids);
	rows = malloc((n ? n : 1) * sizeof *rows);
	if (!ids || !rows || zrfs_pieces_init(&p, 2 + n) < 0)
		rc = -ENOMEM;
	for (size_t i = 0; rc == 0 && i < n; i++)
		ids[i] = lo + i;
	if (rc == 0)
		rc = f->flate ? zrfs_records_inflate_rows(fs, field, ids, n, rows)
			      : zrfs_records_locate(fs, field, ids, n, rows, &g);
	if (rc == 0)
		rc = zrfs_npy_pieces(&p, &f->npy, rows, lo, pos, end);
	if (rc == 0)
		zrfs_reply_pieces(req, fs, &p, false);
	else
		zrfs_reply_err(req, rc);
	zr_batch_release(g);
	zrfs_pieces_free(&p);
	free(rows);
	free(ids);
}

static void tree_read(fuse_req_t req, struct zrfs *fs, fuse_ino_t ino, size_t size, off_t off)
{
	unsigned field = 0;
	uint64_t id = 0;

	switch (decode(fs, ino, &field, &id)) {
	case N_META:
		zrfs_reply_slice(req, fs->meta, fs->meta_len, size, off);
		return;
	case N_NPY:
		read_view(req, fs, field, size, off);
		return;
	case N_REC:
		zrfs_record_read(req, fs, field, id, size, off);
		return;
	case N_DIR:
		fuse_reply_err(req, EISDIR);
		return;
	case N_NONE:
		break;
	}
	fuse_reply_err(req, ENOENT);
}

const struct zrfs_subtree zrfs_tree = {
	.name = "fields",
	.owns = tree_owns,
	.lookup = tree_lookup,
	.attr = tree_attr,
	.entry = tree_entry,
	.read = tree_read,
};
