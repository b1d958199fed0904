/*
 * byclass.c - /by/<label>/<class>/<id>.<ext>: an ImageFolder-style view.
 *
 * For every label field (an i64 scalar whose class names the dataset keeps
 * in meta.json attrs.classes.<field>, as `zr import dir --label-from-parent`
 * writes them), /by/<field>/ holds one directory per class name, listing the
 * records of that class as files of the dataset's first other field. Such a
 * file is the record file itself (same inode, same page cache), so
 * torchvision.datasets.ImageFolder(mount + "/by/label") sees the original
 * class layout. The labels are read once at mount: 4 bytes per record.
 *
 * /by is shown when some label field has class names and no field is
 * called "by"; its only entry in the root is at position 2.
 */
#include "zrfs_i.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct by_field {
	unsigned label;       /* the label field */
	unsigned data;        /* the field whose records are shown */
	unsigned nclasses;
	char **names;
	int32_t *label_of;    /* per record; -1: missing or out of range */
};

struct zrfs_byclass {
	unsigned n;
	struct by_field *f;
};

static bool usable_name(const char *s)
{
	return s[0] && strchr(s, '/') == NULL && strcmp(s, ".") != 0 && strcmp(s, "..") != 0 &&
	       strlen(s) < 256;
}

static int load_labels(struct zrfs *fs, struct by_field *b)
{
	enum { STEP = 4096 };
	uint64_t ids[STEP];

	b->label_of = malloc((fs->n ? fs->n : 1) * sizeof *b->label_of);
	if (!b->label_of)
		return -ENOMEM;
	for (uint64_t first = 0; first < fs->n; first += STEP) {
		size_t n = fs->n - first < STEP ? (size_t)(fs->n - first) : STEP, m;
		zr_batch *batch;
		for (size_t i = 0; i < n; i++)
			ids[i] = first + i;
		int rc = zr_gather(fs->ds, b->label, ids, n, &batch);
		if (rc < 0)
			return rc;
		const zr_slice *s = zr_batch_records(batch, &m);
		for (size_t i = 0; i < m; i++) {
			int64_t v = -1;
			if (s[i].data && s[i].len == 8)
				memcpy(&v, s[i].data, 8); /* little-endian hosts: as stored */
			b->label_of[first + i] = v >= 0 && v < (int64_t)b->nclasses ? (int32_t)v : -1;
		}
		zr_batch_release(batch);
	}
	return 0;
}

int zrfs_byclass_create(struct zrfs *fs)
{
	char *text = zr_attrs(fs->ds);
	json_t *root = text ? json_loads(text, 0, NULL) : NULL;
	json_t *classes = json_object_get(root, "classes");
	struct zrfs_byclass *bc = calloc(1, sizeof *bc);
	int rc = 0;

	free(text);
	fs->byclass = bc;
	if (!bc) {
		json_decref(root);
		return -ENOMEM;
	}
	bc->f = calloc(fs->nfields, sizeof *bc->f);
	for (unsigned f = 0; bc->f && f < fs->nfields && rc == 0; f++) {
		const zr_field_spec *spec = fs->fields[f].spec;
		json_t *names = json_object_get(classes, spec->name);
		size_t i;
		json_t *v;
		if (!json_is_array(names) || spec->dtype != ZR_I64 || !spec->fixed || spec->ndim != 0 ||
		    fs->nfields < 2)
			continue;
		struct by_field *b = &bc->f[bc->n];
		b->label = f;
		b->data = f == 0 ? 1 : 0;
		b->nclasses = (unsigned)json_array_size(names);
		b->names = calloc(b->nclasses ? b->nclasses : 1, sizeof *b->names);
		if (!b->names) {
			rc = -ENOMEM;
			break;
		}
		bc->n++; /* from here on, destroy frees what it has */
		json_array_foreach(names, i, v)
		{
			const char *s = json_string_value(v);
			if (!(b->names[i] = strdup(s && usable_name(s) ? s : "_")))
				rc = -ENOMEM;
		}
		if (rc == 0)
			rc = load_labels(fs, b);
	}
	json_decref(root);
	return bc->f ? rc : -ENOMEM;
}

void zrfs_byclass_destroy(struct zrfs *fs)
{
	struct zrfs_byclass *bc = fs->byclass;

	if (!bc)
		return;
	for (unsigned i = 0; i < bc->n; i++) {
		for (unsigned k = 0; k < bc->f[i].nclasses; k++)
			free(bc->f[i].names[k]);
		free(bc->f[i].names);
		free(bc->f[i].label_of);
	}
	free(bc->f);
	free(bc);
	fs->byclass = NULL;
}

/* /by is shown: some label field has class names, and no field is called "by". */
static bool shown(const struct zrfs *fs)
{
	if (!fs->byclass || fs->byclass->n == 0)
		return false;
	for (unsigned f = 0; f < fs->nfields; f++)
		if (strcmp(fs->fields[f].spec->name, ZRFS_BY_NAME) == 0)
			return false;
	return true;
}

enum node { N_NONE, N_TOP, N_FIELD, N_CLASS };

/* Which node @ino is, with its label field @b and class @cls. */
static enum node decode(const struct zrfs *fs, fuse_ino_t ino, struct by_field **b, unsigned *cls)
{
	const struct zrfs_byclass *bc = fs->byclass;
	uint64_t i;

	if (!shown(fs))
		return N_NONE;
	if (ino == ZRFS_INO_BY)
		return N_TOP;
	if (ino >= ZRFS_INO_BY_FIELD && ino < ZRFS_INO_BY_FIELD + bc->n) {
		*b = &bc->f[ino - ZRFS_INO_BY_FIELD];
		return N_FIELD;
	}
	if ((ino & ~((UINT64_C(1) << 40) - 1)) != ZRFS_INO_BY_CLASS)
		return N_NONE;
	i = (ino >> 32) & 0xff;
	*cls = (unsigned)(ino & 0xffffffff);
	if (i >= bc->n || *cls >= bc->f[i].nclasses)
		return N_NONE;
	*b = &bc->f[i];
	return N_CLASS;
}

static fuse_ino_t class_ino(const struct zrfs *fs, const struct by_field *b, unsigned cls)
{
	return ZRFS_INO_BY_CLASS | (uint64_t)(b - fs->byclass->f) << 32 | cls;
}

static bool by_owns(const struct zrfs *fs, fuse_ino_t ino)
{
	struct by_field *b;
	unsigned cls;

	return decode(fs, ino, &b, &cls) != N_NONE;
}

static int by_attr(struct zrfs *fs, fuse_ino_t ino, struct stat *st)
{
	struct by_field *b;
	unsigned cls;

	if (decode(fs, ino, &b, &cls) == N_NONE)
		return -ENOENT;
	zrfs_dir_attr(fs, ino, st);
	return 0;
}

static int by_lookup(struct zrfs *fs, fuse_ino_t parent, const char *name, fuse_ino_t *out)
{
	const struct zrfs_byclass *bc = fs->byclass;
	struct by_field *b = NULL;
	unsigned cls = 0;
	uint64_t id;

	if (parent == ZRFS_INO_ROOT) {
		*out = ZRFS_INO_BY;
		return shown(fs) && strcmp(name, ZRFS_BY_NAME) == 0 ? 0 : -ENOENT;
	}
	switch (decode(fs, parent, &b, &cls)) {
	case N_TOP:
		for (unsigned i = 0; i < bc->n; i++)
			if (strcmp(name, fs->fields[bc->f[i].label].spec->name) == 0) {
				*out = ZRFS_INO_BY_FIELD + i;
				return 0;
			}
		return -ENOENT;
	case N_FIELD:
		for (unsigned k = 0; k < b->nclasses; k++)
			if (strcmp(name, b->names[k]) == 0) {
				*out = class_ino(fs, b, k);
				return 0;
			}
		return -ENOENT;
	case N_CLASS:
		if (zrfs_record_name_parse(&fs->fields[b->data], name, fs->n, &id) < 0 ||
		    b->label_of[id] != (int32_t)cls)
			return -ENOENT;
		*out = zrfs_rec_ino(b->data, id);
		return 0;
	case N_NONE:
		break;
	}
	return -ENOENT;
}

/* The first record of class @cls of @b at or after @id that has a file. */
static int class_entry(struct zrfs *fs, const struct by_field *b, unsigned cls, uint64_t id,
		       struct zrfs_dirent *out)
{
	for (; id < fs->n; id++) {
		if (b->label_of[id] != (int32_t)cls || !zrfs_record_listed(fs, b->data, id))
			continue;
		zrfs_record_name_format(&fs->fields[b->data], id, out->name, sizeof out->name);
		out->ino = zrfs_rec_ino(b->data, id);
		out->type = S_IFREG;
		out->pos = id + 2;
		return 1;
	}
	return 0;
}

static int by_entry(struct zrfs *fs, fuse_ino_t dir, uint64_t pos, struct zrfs_dirent *out)
{
	const struct zrfs_byclass *bc = fs->byclass;
	struct by_field *b = NULL;
	unsigned cls = 0;
	uint64_t i = pos - 2;

	out->type = S_IFDIR;
	out->pos = pos;
	if (dir == ZRFS_INO_ROOT) {
		if (pos > 2 || !shown(fs))
			return 0;
		snprintf(out->name, sizeof out->name, "%s", ZRFS_BY_NAME);
		out->ino = ZRFS_INO_BY;
		return 1;
	}
	switch (decode(fs, dir, &b, &cls)) {
	case N_TOP:
		if (i >= bc->n)
			return 0;
		snprintf(out->name, sizeof out->name, "%s", fs->fields[bc->f[i].label].spec->name);
		out->ino = ZRFS_INO_BY_FIELD + i;
		return 1;
	case N_FIELD:
		if (i >= b->nclasses)
			return 0;
		snprintf(out->name, sizeof out->name, "%s", b->names[i]);
		out->ino = class_ino(fs, b, (unsigned)i);
		return 1;
	case N_CLASS:
		return class_entry(fs, b, cls, i, out);
	case N_NONE:
		break;
	}
	return -ENOENT;
}

static void by_read(fuse_req_t req, struct zrfs *fs, fuse_ino_t ino, size_t size, off_t off)
{
	(void)fs, (void)ino, (void)size, (void)off;
	fuse_reply_err(req, EISDIR); /* its files are record files, read through tree.c */
}

const struct zrfs_subtree zrfs_byclass = {
	.name = "by",
	.owns = by_owns,
	.lookup = by_lookup,
	.attr = by_attr,
	.entry = by_entry,
	.read = by_read,
};
