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
 */
#include "zrfs_i.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INO_BY_FIELD UINT64_C(0x4000)
#define INO_BY_CLASS (UINT64_C(1) << 55)

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
		json_array_foreach(names, i, v)
		{
			const char *s = json_string_value(v);
			b->names[i] = strdup(s && usable_name(s) ? s : "_");
		}
		rc = load_labels(fs, b);
		bc->n++;
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

bool zrfs_byclass_shown(const struct zrfs *fs)
{
	if (!fs->byclass || fs->byclass->n == 0)
		return false;
	for (unsigned f = 0; f < fs->nfields; f++)
		if (strcmp(fs->fields[f].spec->name, ZRFS_BY_NAME) == 0)
			return false;
	return true;
}

bool zrfs_byclass_owns(fuse_ino_t ino)
{
	return ino == ZRFS_INO_BY || (ino >= INO_BY_FIELD && ino < INO_BY_FIELD + ZR_FIELDS_MAX) ||
	       (ino & ~((UINT64_C(1) << 55) - 1)) == INO_BY_CLASS;
}

/* Which node: 0 /by, 1 /by/FIELD (@b), 2 /by/FIELD/CLASS (@b, @cls); -1 none. */
static int decode(struct zrfs *fs, fuse_ino_t ino, struct by_field **b, unsigned *cls)
{
	struct zrfs_byclass *bc = fs->byclass;
	uint64_t i;

	if (ino == ZRFS_INO_BY)
		return 0;
	if (ino >= INO_BY_FIELD && ino < INO_BY_FIELD + ZR_FIELDS_MAX) {
		i = ino - INO_BY_FIELD;
		if (i >= bc->n)
			return -1;
		*b = &bc->f[i];
		return 1;
	}
	i = (ino >> 32) & 0xffff;
	*cls = (unsigned)(ino & 0xffffffff);
	if (i >= bc->n || *cls >= bc->f[i].nclasses)
		return -1;
	*b = &bc->f[i];
	return 2;
}

static fuse_ino_t rec_ino(unsigned field, uint64_t id)
{
	return ZRFS_INO_REC | (uint64_t)field << ZRFS_ID_BITS | id;
}

int zrfs_byclass_attr(struct zrfs *fs, fuse_ino_t ino, struct stat *st)
{
	struct by_field *b;
	unsigned cls;

	if (decode(fs, ino, &b, &cls) < 0)
		return -ENOENT;
	zrfs_base_attr(fs, ino, S_IFDIR | 0555, st);
	st->st_nlink = 2;
	return 0;
}

int zrfs_byclass_lookup(struct zrfs *fs, fuse_ino_t parent, const char *name, fuse_ino_t *out)
{
	struct zrfs_byclass *bc = fs->byclass;
	struct by_field *b;
	unsigned cls;
	uint64_t id;

	switch (decode(fs, parent, &b, &cls)) {
	case 0:
		for (unsigned i = 0; i < bc->n; i++)
			if (strcmp(name, fs->fields[bc->f[i].label].spec->name) == 0) {
				*out = INO_BY_FIELD + i;
				return 0;
			}
		return -ENOENT;
	case 1:
		for (unsigned k = 0; k < b->nclasses; k++)
			if (strcmp(name, b->names[k]) == 0) {
				*out = INO_BY_CLASS | (uint64_t)(b - bc->f) << 32 | k;
				return 0;
			}
		return -ENOENT;
	case 2:
		if (zrfs_record_name(&fs->fields[b->data], name, fs->n, &id) < 0 ||
		    b->label_of[id] != (int32_t)cls)
			return -ENOENT;
		*out = rec_ino(b->data, id);
		return 0;
	}
	return -ENOENT;
}

int zrfs_byclass_list(struct zrfs_listing *l, struct zrfs *fs, fuse_ino_t ino, off_t off)
{
	struct zrfs_byclass *bc = fs->byclass;
	struct by_field *b = NULL;
	unsigned cls = 0;
	int node = decode(fs, ino, &b, &cls);
	char name[300];

	if (node < 0)
		return -ENOENT;
	if (!zrfs_list_dots(l, fs, ino, off))
		return 0;
	for (uint64_t p = off > 2 ? (uint64_t)off : 2;; p++) {
		fuse_ino_t child;
		mode_t type = S_IFDIR;
		if (node == 0) {
			if (p - 2 >= bc->n)
				break;
			snprintf(name, sizeof name, "%s", fs->fields[bc->f[p - 2].label].spec->name);
			child = INO_BY_FIELD + (p - 2);
		} else if (node == 1) {
			if (p - 2 >= b->nclasses)
				break;
			snprintf(name, sizeof name, "%s", b->names[p - 2]);
			child = INO_BY_CLASS | (uint64_t)(b - bc->f) << 32 | (p - 2);
		} else {
			uint64_t id = p - 2;
			while (id < fs->n && b->label_of[id] != (int32_t)cls)
				id++;
			if (id >= fs->n)
				break;
			p = id + 2;
			const struct zrfs_field *fd = &fs->fields[b->data];
			if (fd->ext_len)
				snprintf(name, sizeof name, "%llu.%s", (unsigned long long)id,
					 fd->spec->ext);
			else
				snprintf(name, sizeof name, "%llu", (unsigned long long)id);
			zr_record_stat st;
			if (zr_stat(fs->ds, b->data, id, &st) == 0 && !st.present)
				continue; /* the record has no such file */
			child = rec_ino(b->data, id);
			type = S_IFREG;
		}
		if (!zrfs_list_add(l, fs, name, child, type, (off_t)p + 1))
			break;
	}
	return 0;
}
