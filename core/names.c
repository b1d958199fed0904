/*
 * names.c - records' original names and the tree of files they make: the
 * one rule that zr export dir, zr export tar and the mount's tree/ share.
 *
 * A dataset keeps names when its attrs say so (core/FORMAT.md, "Original
 * names"): {"names": {"field": F, "kind": "path"|"key", "files": D,
 * "mtime": M, "mode": P, "atime": A, "ctime": C, "uid": U, "gid": G}}, M
 * the files' modification times, P their modes, A and C their access and
 * change times, U and G their owners and groups.
 * Names come from outside the dataset (a directory walked, a tar read), so
 * a name makes a file only when it is a relative path that stays below its
 * directory, each component a file name (no empty, "." or ".."
 * component, at most ZR_NAME_FILE_MAX bytes).
 *
 * Sections: the names kept, file names, text values.
 */
#include "store_i.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the names kept ---- */

/* Field @name's index in @ds, or -1. */
static int field_named(const zr_dataset *ds, const char *name)
{
	for (unsigned f = 0; name && f < zr_field_count(ds); f++)
		if (strcmp(zr_field(ds, f)->name, name) == 0)
			return (int)f;
	return -1;
}

/* Whether field @f (-1: none) holds @dtype values of the files a record
 * makes: one, or one per field. */
static bool per_file(const zr_dataset *ds, int f, zr_dtype dtype)
{
	const zr_field_spec *t = f >= 0 ? zr_field(ds, (unsigned)f) : NULL;

	return t && t->dtype == dtype && t->fixed &&
	       (t->ndim == 0 || (t->ndim == 1 && t->shape[0] == zr_field_count(ds)));
}

int zr_names_own(const zr_names *n, unsigned field)
{
	int f = (int)field;

	return f == n->field || f == n->mtime || f == n->mode || f == n->atime || f == n->ctime ||
	       f == n->uid || f == n->gid;
}

/* Whether field @f is a label with class names (attrs.classes.FIELD). */
static bool labelled(const zr_dataset *ds, json_t *classes, unsigned f)
{
	return json_is_array(json_object_get(classes, zr_field(ds, f)->name));
}

int zr_names_get(const zr_dataset *ds, zr_names *out)
{
	char *text = zr_attrs(ds);
	json_t *root = text ? json_loads(text, 0, NULL) : NULL;
	json_t *names = json_object_get(root, "names");
	const char *kind = json_string_value(json_object_get(names, "kind"));
	int field = field_named(ds, json_string_value(json_object_get(names, "field")));

	int mtime = field_named(ds, json_string_value(json_object_get(names, "mtime")));
	int mode = field_named(ds, json_string_value(json_object_get(names, "mode")));
	int atime = field_named(ds, json_string_value(json_object_get(names, "atime")));
	int ctime = field_named(ds, json_string_value(json_object_get(names, "ctime")));
	int uid = field_named(ds, json_string_value(json_object_get(names, "uid")));
	int gid = field_named(ds, json_string_value(json_object_get(names, "gid")));

	*out = (zr_names){.field = -1, .files = -1, .mtime = -1, .mode = -1, .atime = -1,
			  .ctime = -1, .uid = -1, .gid = -1, .label = -1};
	if (!text)
		return -ENOMEM;
	/* names are text of any length: a variable-size bytes field */
	if (field >= 0 && zr_field(ds, (unsigned)field)->dtype == ZR_BYTES &&
	    !zr_field(ds, (unsigned)field)->fixed) {
		out->field = field;
		out->key = kind && strcmp(kind, "key") == 0;
	}
	/* times are i64 nanoseconds: one for the record, or one per field */
	if (out->field >= 0 && per_file(ds, mtime, ZR_I64) && mtime != field)
		out->mtime = mtime;
	/* modes are u32 st_mode values, as many */
	if (out->field >= 0 && per_file(ds, mode, ZR_U32) && mode != field && mode != mtime)
		out->mode = mode;
	/* access and change times beside modification times, as those */
	if (out->mtime >= 0 && per_file(ds, atime, ZR_I64) && !zr_names_own(out, (unsigned)atime))
		out->atime = atime;
	if (out->mtime >= 0 && per_file(ds, ctime, ZR_I64) && !zr_names_own(out, (unsigned)ctime))
		out->ctime = ctime;
	/* owners and groups: u32 ids, as modes */
	if (out->field >= 0 && per_file(ds, uid, ZR_U32) && !zr_names_own(out, (unsigned)uid))
		out->uid = uid;
	if (out->field >= 0 && per_file(ds, gid, ZR_U32) && !zr_names_own(out, (unsigned)gid))
		out->gid = gid;
	if (out->field >= 0 && !out->key) {
		/* the files the paths name: as the import said, else the first
		 * field that is neither the names nor a label of classes (an
		 * import from before "files" was kept) */
		json_t *classes = json_object_get(root, "classes");
		out->files = field_named(ds, json_string_value(json_object_get(names, "files")));
		for (unsigned f = 0; out->files < 0 && f < zr_field_count(ds); f++)
			if (!zr_names_own(out, f) && !labelled(ds, classes, f))
				out->files = (int)f;
		if (out->files >= 0 && zr_names_own(out, (unsigned)out->files))
			out->files = -1;
		/* a label the paths give: an i64 scalar with class names */
		json_t *lab = json_object_get(names, "label");
		const char *from = json_string_value(json_object_get(lab, "from"));
		int label = field_named(ds, json_string_value(json_object_get(lab, "field")));
		const zr_field_spec *ls = label >= 0 ? zr_field(ds, (unsigned)label) : NULL;
		if (ls && ls->dtype == ZR_I64 && ls->fixed && ls->ndim == 0 &&
		    labelled(ds, classes, (unsigned)label) && !zr_names_own(out, (unsigned)label) &&
		    label != out->files && from &&
		    (strcmp(from, "parent") == 0 || strcmp(from, "top") == 0)) {
			out->label = label;
			out->label_top = strcmp(from, "top") == 0;
		}
	}
	json_decref(root);
	free(text);
	return 0;
}

const char *zr_name_class_dir(const char *name, size_t len, int top, size_t *dlen)
{
	const char *last = memrchr(name, '/', len), *start = name;

	if (!last)
		return NULL;
	if (top) {
		*dlen = (size_t)((const char *)memchr(name, '/', len) - name);
		return name;
	}
	for (const char *q = name; q < last; q++)
		if (*q == '/')
			start = q + 1;
	*dlen = (size_t)(last - start);
	return start;
}

int zr_name_safe(const char *name, size_t len)
{
	if (len == 0 || name[0] == '/' || memchr(name, 0, len))
		return 0;
	for (size_t at = 0; at <= len;) {
		const char *slash = memchr(name + at, '/', len - at);
		size_t end = slash ? (size_t)(slash - name) : len, c = end - at;
		if (c == 0 || c > ZR_NAME_FILE_MAX || (c == 1 && name[at] == '.') ||
		    (c == 2 && name[at] == '.' && name[at + 1] == '.'))
			return 0;
		at = end + 1;
	}
	return 1;
}

/* The value of the file field @field of a record makes, from the stored
 * bytes @vals (@len) of field @of of @width-byte values, one a record or one
 * a field, into @out: 1, or a negative code. */
static int per_file_pick(zr_dataset *ds, int of, unsigned field, const unsigned char *vals,
			 int64_t len, void *out, size_t width)
{
	unsigned each = zr_field(ds, (unsigned)of)->ndim; /* one per field, or one */

	if (each && field >= zr_field_count(ds))
		return -ENOENT;
	if ((uint64_t)len != (each ? zr_field_count(ds) : 1) * width)
		return ZR_ECORRUPT;
	memcpy(out, vals + (each ? field : 0) * width, width); /* little-endian: as stored */
	return 1;
}

/* The value of the file field @field of record @id makes, in field @of
 * (-1: none) of @width-byte values, one a record or one a field, into
 * @out: 1, 0 (none kept), or a negative code. */
static int per_file_value(zr_dataset *ds, int of, uint64_t id, unsigned field, void *out,
			  size_t width)
{
	unsigned char vals[ZR_FIELDS_MAX * 8];
	int rc = of < 0 ? 0 : zr_present(ds, (unsigned)of, id);
	int64_t got;

	if (rc != 1)
		return rc; /* none kept, none for this record, or a bad id */
	got = zr_record_load(ds, (unsigned)of, id, vals, sizeof vals);
	return got < 0 ? (int)got : per_file_pick(ds, of, field, vals, got, out, width);
}

/* What zr_name_meta() reads: of each, the field that keeps it, its width,
 * where it goes, and what was found (1, 0 none, or a code). */
struct kept {
	int of;
	size_t width;
	void *dst;
	int rc;
};

/* The per-file values @k[0..@n) of the file field @field of record @id,
 * each as per_file_value() finds it. Those of one record are appended
 * together, and usually lie in one chunk a few bytes apart: raw and close
 * (a page), they are read with one pread and checked each, else one by one. */
static void per_file_values(zr_dataset *ds, uint64_t id, unsigned field, struct kept *k,
			    unsigned n)
{
	enum { SPAN_MAX = 4096 };
	zr_record_stat st[8];
	zr_chunk *held[8] = {0};
	uint64_t lo = UINT64_MAX, hi = 0;
	int fd = -1;
	bool together = true;
	unsigned char span[SPAN_MAX];

	for (unsigned i = 0; i < n; i++) {
		k[i].rc = 0;
		if (k[i].of < 0)
			continue;
		if ((k[i].rc = zr_stat_held(ds, (unsigned)k[i].of, id, &st[i], &held[i])) < 0 ||
		    !st[i].present || !st[i].physical_len) {
			together = together && k[i].rc >= 0 && !st[i].present;
			continue;
		}
		k[i].rc = 1;
		if (ds->fields[k[i].of].def.spec.compress != ZR_RAW || (fd >= 0 && st[i].fd != fd))
			together = false;
		fd = st[i].fd;
		lo = st[i].offset < lo ? st[i].offset : lo;
		hi = st[i].offset + st[i].physical_len > hi ? st[i].offset + st[i].physical_len : hi;
	}
	if (fd >= 0 && together && hi - lo <= SPAN_MAX &&
	    zr_read_full(fd, span, (size_t)(hi - lo), lo) == 0) {
		for (unsigned i = 0; i < n; i++) {
			if (k[i].rc != 1)
				continue;
			const unsigned char *at = span + (st[i].offset - lo);
			zr_entry e = {st[i].offset, st[i].chunk_id, st[i].physical_len, st[i].crc};
			if (zr_checks(ds, (unsigned)k[i].of) &&
			    (k[i].rc = zr_value_check(ds, (unsigned)k[i].of, id, &e, at)) < 0)
				continue;
			k[i].rc = per_file_pick(ds, k[i].of, field, at, st[i].physical_len, k[i].dst,
						k[i].width);
		}
	} else {
		for (unsigned i = 0; i < n; i++)
			if (k[i].of >= 0)
				k[i].rc = per_file_value(ds, k[i].of, id, field, k[i].dst, k[i].width);
	}
	for (unsigned i = 0; i < n; i++)
		zr_chunk_unuse(held[i]);
}

int zr_name_meta(zr_dataset *ds, const zr_names *n, uint64_t id, unsigned field,
		 zr_file_meta *out)
{
	struct kept k[] = {
		{n->mode, sizeof out->mode, &out->mode, 0},
		{n->uid, sizeof out->uid, &out->uid, 0},
		{n->gid, sizeof out->gid, &out->gid, 0},
		{n->mtime, sizeof out->mtime, &out->mtime, 0},
		{n->atime, sizeof out->atime, &out->atime, 0},
		{n->ctime, sizeof out->ctime, &out->ctime, 0},
	};
	int rc = 0;

	per_file_values(ds, id, field, k, sizeof k / sizeof *k);
	for (unsigned i = 0; i < sizeof k / sizeof *k; i++)
		rc = rc < 0 ? rc : k[i].rc < 0 ? k[i].rc : rc;
	if (k[1].rc != 1)
		out->uid = ZR_OWNER_NONE;
	if (k[2].rc != 1)
		out->gid = ZR_OWNER_NONE;
	out->have = (k[0].rc == 1 && out->mode != ZR_MODE_NONE ? ZR_META_MODE : 0) |
		    (out->uid != ZR_OWNER_NONE || out->gid != ZR_OWNER_NONE ? ZR_META_OWNER : 0) |
		    (k[3].rc == 1 && out->mtime != ZR_MTIME_NONE ? ZR_META_MTIME : 0) |
		    (k[4].rc == 1 && out->atime != ZR_MTIME_NONE ? ZR_META_ATIME : 0) |
		    (k[5].rc == 1 && out->ctime != ZR_MTIME_NONE ? ZR_META_CTIME : 0);
	return rc < 0 ? rc : out->have != 0;
}

/* A time of the file field @field of record @id makes, kept in field @of. */
static int time_value(zr_dataset *ds, int of, uint64_t id, unsigned field, int64_t *ns)
{
	int rc = per_file_value(ds, of, id, field, ns, sizeof *ns);

	return rc == 1 ? *ns != ZR_MTIME_NONE : rc;
}

int zr_name_mtime(zr_dataset *ds, const zr_names *n, uint64_t id, unsigned field, int64_t *ns)
{
	return time_value(ds, n->mtime, id, field, ns);
}

int zr_name_atime(zr_dataset *ds, const zr_names *n, uint64_t id, unsigned field, int64_t *ns)
{
	return time_value(ds, n->atime, id, field, ns);
}

int zr_name_ctime(zr_dataset *ds, const zr_names *n, uint64_t id, unsigned field, int64_t *ns)
{
	return time_value(ds, n->ctime, id, field, ns);
}

int zr_name_mode(zr_dataset *ds, const zr_names *n, uint64_t id, unsigned field, uint32_t *mode)
{
	int rc = per_file_value(ds, n->mode, id, field, mode, sizeof *mode);

	return rc == 1 ? *mode != ZR_MODE_NONE : rc;
}

int zr_name_owner(zr_dataset *ds, const zr_names *n, uint64_t id, unsigned field, uint32_t *uid,
		  uint32_t *gid)
{
	int rc = per_file_value(ds, n->uid, id, field, uid, sizeof *uid);

	if (rc == 0)
		*uid = ZR_OWNER_NONE;
	if (rc >= 0 && (rc = per_file_value(ds, n->gid, id, field, gid, sizeof *gid)) == 0)
		*gid = ZR_OWNER_NONE;
	return rc < 0 ? rc : *uid != ZR_OWNER_NONE || *gid != ZR_OWNER_NONE;
}

int64_t zr_name_load(zr_dataset *ds, const zr_names *n, uint64_t id, char *buf, size_t cap)
{
	int64_t got;
	int rc;

	if (n->field < 0 || cap == 0)
		return 0;
	if ((rc = zr_present(ds, (unsigned)n->field, id)) <= 0)
		return rc; /* missing: no name; a bad id: -ENOENT */
	got = zr_record_load(ds, (unsigned)n->field, id, buf, cap - 1);
	if (got == -ENOBUFS)
		return -ENAMETOOLONG;
	if (got >= 0)
		buf[got] = 0;
	return got;
}

/* ---- file names ---- */

/* The field a key's file extension @ext (@len bytes) names, but the
 * names': -1 if none. */
static int member_field(const zr_dataset *ds, const zr_names *n, const char *ext, size_t len)
{
	for (unsigned f = 0; f < zr_field_count(ds); f++) {
		const char *name = zr_field(ds, f)->name;
		if (!zr_names_own(n, f) && strlen(name) == len &&
		    memcmp(name, ext, len) == 0)
			return (int)f;
	}
	return -1;
}

int zr_names_file(const zr_dataset *ds, const zr_names *n, unsigned field, const char *name,
		  size_t len, char *buf, size_t cap)
{
	const zr_field_spec *f = zr_field(ds, field);
	size_t flen = f ? strlen(f->name) : 0;
	size_t want = n->key ? len + 1 + flen : len;

	if (!f || n->field < 0 || zr_names_own(n, field) ||
	    (!n->key && (int)field != n->files))
		return 0;
	if (!zr_name_safe(name, len))
		return -EINVAL;
	/* a key's last component may hold no dot (KEY.EXT splits at the first) */
	const char *base = memrchr(name, '/', len);
	base = base ? base + 1 : name;
	if (n->key && memchr(base, '.', len - (size_t)(base - name)))
		return -EINVAL;
	if (want + 1 > cap || (n->key && (size_t)(name + len - base) + 1 + flen > ZR_NAME_FILE_MAX))
		return -ENAMETOOLONG;
	memcpy(buf, name, len);
	if (n->key) {
		buf[len] = '.';
		memcpy(buf + len + 1, f->name, flen);
	}
	buf[want] = 0;
	return (int)want;
}

int zr_names_field_of(const zr_dataset *ds, const zr_names *n, const char *path, size_t len,
		      unsigned *field, size_t *name_len)
{
	const char *base, *dot;
	int f;

	if (n->field < 0 || !zr_name_safe(path, len))
		return -ENOENT;
	if (!n->key) {
		if (n->files < 0)
			return -ENOENT;
		*field = (unsigned)n->files;
		*name_len = len;
		return 0;
	}
	base = memrchr(path, '/', len);
	base = base ? base + 1 : path;
	dot = memchr(base, '.', len - (size_t)(base - path));
	if (!dot || dot == base ||
	    (f = member_field(ds, n, dot + 1, len - (size_t)(dot + 1 - path))) < 0)
		return -ENOENT;
	*field = (unsigned)f;
	*name_len = (size_t)(dot - path);
	return 0;
}

int zr_names_ext(const zr_names *n, unsigned field, const char *name, size_t len,
		 const char **ext)
{
	const char *last = name, *dot = NULL;
	size_t elen;

	if (n->field < 0 || n->key || n->files != (int)field || len == 0)
		return -1;
	for (size_t i = 0; i < len; i++)
		if (name[i] == '/')
			last = name + i + 1, dot = NULL;
		else if (name[i] == '.' && name + i != last)
			dot = name + i;
	if (!dot) {
		*ext = name + len;
		return 0;
	}
	elen = (size_t)(name + len - dot - 1);
	if (!zr_portable(dot + 1, elen, ZR_EXT_MAX, false))
		return -1;
	*ext = dot + 1;
	return (int)elen;
}

/* ---- text values ---- */

int zr_names_text(const zr_dataset *ds, const zr_names *n, unsigned field)
{
	const zr_field_spec *f = zr_field(ds, field);

	return f && n->key && f->dtype == ZR_I64 && f->fixed && f->ndim == 0;
}

int zr_names_text_of(const void *stored, size_t len, char *buf, size_t cap)
{
	int64_t v;
	int n;

	if (len != 8)
		return -EINVAL;
	memcpy(&v, stored, 8); /* little-endian hosts: as stored */
	n = snprintf(buf, cap, "%" PRId64, v);
	return n < 0 || (size_t)n >= cap ? -ENOBUFS : n;
}
