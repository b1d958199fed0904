/*
 * byclass.c - /by/<label>/<class>/<id>.<ext>: an ImageFolder-style view.
 *
 * For every label field (an i64 scalar whose class names the dataset keeps
 * in meta.json attrs.classes.<field>, as `zr import dir --label-from-parent`
 * writes them), /by/<field>/ holds one directory per class name, listing the
 * records of that class as files of the dataset's first other field. Such a
 * file is the record file itself (same inode, same page cache), so
 * torchvision.datasets.ImageFolder(mount + "/by/label") sees the original
 * class layout. The labels are read once at mount, 4 bytes per record, and
 * kept up to date by follow.c with the records each commit changed, under
 * the names lock (lookups and listings read them under it).
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
	uint64_t cap;         /* records label_of has room for */
};

struct zrfs_byclass_state {
	unsigned n;
	struct by_field *f;
};

static bool usable_name(const char *s)
{
	return s[0] && strchr(s, '/') == NULL && strcmp(s, ".") != 0 && strcmp(s, "..") != 0 &&
	       strlen(s) < 256;
}

/* The class of a label record's bytes: -1 for missing or out of range. */
static int32_t class_of(const struct by_field *b, const zr_slice *s)
{
	int64_t v = -1;

	if (s->data && s->len == 8)
		memcpy(&v, s->data, 8); /* little-endian hosts: as stored */
	return v >= 0 && v < (int64_t)b->nclasses ? (int32_t)v : -1;
}

/* Room for the labels of @n records; new ones are -1 until read. */
static int labels_reserve(struct by_field *b, uint64_t n)
{
	uint64_t cap = b->cap ? b->cap : 1024;
	int32_t *l;

	if (n <= b->cap)
		return 0;
	while (cap < n)
		cap *= 2;
	if (!(l = realloc(b->label_of, cap * sizeof *l)))
		return -ENOMEM;
	for (uint64_t id = b->cap; id < cap; id++)
		l[id] = -1;
	b->label_of = l;
	b->cap = cap;
	return 0;
}

static int load_labels(struct zrfs_view *v, struct by_field *b)
{
	enum { STEP = 4096 };
	uint64_t ids[STEP];
	int rc = labels_reserve(b, v->n ? v->n : 1);

	for (uint64_t first = 0; rc == 0 && first < v->n; first += STEP) {
		size_t n = v->n - first < STEP ? (size_t)(v->n - first) : STEP, m;
		zr_batch *batch;
		for (size_t i = 0; i < n; i++)
			ids[i] = first + i;
		if ((rc = zr_gather(v->ds, b->label, ids, n, &batch)) < 0)
			return rc;
		const zr_slice *s = zr_batch_records(batch, &m);
		for (size_t i = 0; i < m; i++)
			b->label_of[first + i] = class_of(b, &s[i]);
		zr_batch_release(batch);
	}
	return rc;
}

int zrfs_byclass_create(struct zrfs *fs, struct zrfs_view *view)
{
	char *text = zr_attrs(view->ds);
	json_t *root = text ? json_loads(text, 0, NULL) : NULL;
	json_t *classes = json_object_get(root, "classes");
	struct zrfs_byclass_state *bc = calloc(1, sizeof *bc);
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
			rc = load_labels(view, b);
	}
	json_decref(root);
	return bc->f ? rc : -ENOMEM;
}

void zrfs_byclass_destroy(struct zrfs *fs)
{
	struct zrfs_byclass_state *bc = fs->byclass;

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
static bool byclass_shown(const struct zrfs *fs)
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
static enum node byclass_decode(const struct zrfs *fs, fuse_ino_t ino, struct by_field **b, unsigned *cls)
{
	const struct zrfs_byclass_state *bc = fs->byclass;
	uint64_t i;

	if (!byclass_shown(fs))
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

	return byclass_decode(fs, ino, &b, &cls) != N_NONE;
}

static int by_attr(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino, struct stat *st)
{
	struct by_field *b;
	unsigned cls;

	if (byclass_decode(fs, ino, &b, &cls) == N_NONE)
		return -ENOENT;
	zrfs_dir_attr(fs, v, ino, st);
	return 0;
}

static int by_lookup(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t parent, const char *name,
		     fuse_ino_t *out)
{
	const struct zrfs_byclass_state *bc = fs->byclass;
	struct by_field *b = NULL;
	unsigned cls = 0;
	uint64_t id;

	if (parent == ZRFS_INO_ROOT) {
		*out = ZRFS_INO_BY;
		return byclass_shown(fs) && strcmp(name, ZRFS_BY_NAME) == 0 ? 0 : -ENOENT;
	}
	switch (byclass_decode(fs, parent, &b, &cls)) {
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
		if (zrfs_record_name_parse(fs, b->data, name, v->n, &id) < 0 ||
		    b->label_of[id] != (int32_t)cls)
			return -ENOENT;
		*out = zrfs_rec_ino(b->data, id, zrfs_rec_version(fs, b->data, id));
		return 0;
	case N_NONE:
		break;
	}
	return -ENOENT;
}

/* The first record of class @cls of @b at or after @id that has a file. */
static int class_entry(struct zrfs *fs, struct zrfs_view *v, const struct by_field *b, unsigned cls,
		       uint64_t id, struct zrfs_dirent *out)
{
	for (; id < v->n; id++) {
		if (b->label_of[id] != (int32_t)cls || !zrfs_record_listed(v, b->data, id))
			continue;
		zrfs_record_name_format(fs, b->data, id, out->name, sizeof out->name);
		out->ino = zrfs_rec_ino(b->data, id, zrfs_rec_version(fs, b->data, id));
		out->type = S_IFREG;
		out->pos = id + 2;
		return 1;
	}
	return 0;
}

static int by_entry(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t dir, uint64_t pos,
		    struct zrfs_dirent *out)
{
	const struct zrfs_byclass_state *bc = fs->byclass;
	struct by_field *b = NULL;
	unsigned cls = 0;
	uint64_t i = pos - 2;

	out->type = S_IFDIR;
	out->pos = pos;
	if (dir == ZRFS_INO_ROOT) {
		if (pos > 2 || !byclass_shown(fs))
			return 0;
		snprintf(out->name, sizeof out->name, "%s", ZRFS_BY_NAME);
		out->ino = ZRFS_INO_BY;
		return 1;
	}
	switch (byclass_decode(fs, dir, &b, &cls)) {
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
		return class_entry(fs, v, b, cls, i, out);
	case N_NONE:
		break;
	}
	return -ENOENT;
}

static void by_read(fuse_req_t req, struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino,
		    size_t size, off_t off)
{
	(void)fs, (void)v, (void)ino, (void)size, (void)off;
	zrfs_reply_err(req, -EISDIR); /* its files are record files, read through fields.c */
}

/* ---- following commits ---- */

/* Tell the kernel that @b's record @id left or joined class @cls. */
static int note_class(struct zrfs *fs, const struct by_field *b, int32_t cls, uint64_t id,
		      struct zrfs_notes *notes)
{
	char name[ZRFS_NAME_MAX + 1];
	fuse_ino_t dir;
	int rc;

	if (cls < 0)
		return 0;
	dir = class_ino(fs, b, (unsigned)cls);
	zrfs_record_name_format(fs, b->data, id, name, sizeof name);
	rc = zrfs_notes_entry(notes, dir, name);
	return rc < 0 ? rc : zrfs_notes_inode(notes, dir);
}

int zrfs_byclass_update(struct zrfs *fs, struct zrfs_view *v, unsigned field, uint64_t id,
			struct zrfs_notes *notes)
{
	struct zrfs_byclass_state *bc = fs->byclass;
	int rc = 0;

	for (unsigned i = 0; bc && i < bc->n && rc == 0; i++) {
		struct by_field *b = &bc->f[i];
		int32_t was, now = -1;
		if (field == b->data) {
			/* a new inode number under the same name, in its class */
			rc = id < b->cap ? note_class(fs, b, b->label_of[id], id, notes) : 0;
			continue;
		}
		if (field != b->label || (rc = labels_reserve(b, id + 1)) < 0)
			continue;
		was = b->label_of[id];
		if (id < v->n) {
			zr_batch *g;
			size_t m;
			if (zr_gather(v->ds, b->label, &id, 1, &g) == 0) {
				now = class_of(b, zr_batch_records(g, &m));
				zr_batch_release(g);
			}
		}
		b->label_of[id] = now;
		if (was != now && (rc = note_class(fs, b, was, id, notes)) == 0)
			rc = note_class(fs, b, now, id, notes);
	}
	return rc;
}

const struct zrfs_subtree zrfs_byclass = {
	.name = "by",
	.view = true,
	.owns = by_owns,
	.lookup = by_lookup,
	.attr = by_attr,
	.entry = by_entry,
	.read = by_read,
};
