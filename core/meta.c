/*
 * meta.c - meta.json: the dataset's committed state, and field definitions.
 *
 * Parsing is strict: every number is range-checked and every string
 * validated, so that the rest of the library can trust a zr_meta. Writing is
 * atomic: a temporary file is written and fsynced, renamed over meta.json,
 * and the directory fsynced; that rename is the commit point of the store.
 *
 * Sections: dtype/compress names, name checks, parse, dump, read/write.
 */
#include "store_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
	const char *name;
	unsigned size;
} dtypes[ZR_DTYPE_COUNT] = {
	[ZR_U8] = {"u8", 1},   [ZR_U16] = {"u16", 2}, [ZR_U32] = {"u32", 4}, [ZR_U64] = {"u64", 8},
	[ZR_I8] = {"i8", 1},   [ZR_I16] = {"i16", 2}, [ZR_I32] = {"i32", 4}, [ZR_I64] = {"i64", 8},
	[ZR_F16] = {"f16", 2}, [ZR_F32] = {"f32", 4}, [ZR_F64] = {"f64", 8}, [ZR_BYTES] = {"bytes", 1},
	[ZR_BOOL] = {"bool", 1},
};

static const char *const compressions[ZR_COMPRESS_COUNT] = {[ZR_RAW] = "raw", [ZR_FLATE] = "flate"};

unsigned zr_dtype_size(zr_dtype t)
{
	return (unsigned)t < ZR_DTYPE_COUNT ? dtypes[t].size : 0;
}

const char *zr_dtype_name(zr_dtype t)
{
	return (unsigned)t < ZR_DTYPE_COUNT ? dtypes[t].name : "?";
}

const char *zr_compress_name(zr_compress c)
{
	return (unsigned)c < ZR_COMPRESS_COUNT ? compressions[c] : "?";
}

int zr_dtype_parse(const char *s, zr_dtype *out)
{
	for (unsigned i = 0; i < ZR_DTYPE_COUNT; i++)
		if (strcmp(s, dtypes[i].name) == 0) {
			*out = (zr_dtype)i;
			return 0;
		}
	return zr_err(ZR_EINVAL_SPEC, "unknown dtype '%s' (u8..u64, i8..i64, f16, f32, f64, bool, bytes)",
		      s);
}

int zr_compress_parse(const char *s, zr_compress *out)
{
	for (unsigned i = 0; i < ZR_COMPRESS_COUNT; i++)
		if (strcmp(s, compressions[i]) == 0) {
			*out = (zr_compress)i;
			return 0;
		}
	return zr_err(ZR_EINVAL_SPEC, "unknown compression '%s' (raw, flate)", s);
}

bool zr_portable(const char *s, size_t len, size_t max, bool allow_dot)
{
	if (len == 0 || len > max)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			  c == '_' || c == '-' || (c == '.' && allow_dot);
		if (!ok)
			return false;
	}
	return true;
}

int zr_name_check(const char *name)
{
	size_t n;

	if (!name || !zr_portable(name, strlen(name), ZR_NAME_MAX, true))
		return zr_err(ZR_EINVAL_SPEC,
			      "field name '%s': use 1..%d of A-Z a-z 0-9 _ - .", name ? name : "",
			      ZR_NAME_MAX);
	n = strlen(name);
	if (name[0] == '.' || name[0] == '-')
		return zr_err(ZR_EINVAL_SPEC, "field name '%s': must not start with '.' or '-'",
			      name);
	if (n >= 4 && strcmp(name + n - 4, ".npy") == 0)
		return zr_err(ZR_EINVAL_SPEC,
			      "field name '%s': must not end in .npy (the mount uses that suffix)",
			      name);
	return 0;
}

uint64_t zr_spec_record_size(const zr_field_spec *f)
{
	uint64_t n = zr_dtype_size(f->dtype);

	if (!f->fixed)
		return 0;
	for (unsigned i = 0; i < f->ndim; i++)
		n *= f->shape[i];
	return n;
}

int zr_field_check(const zr_field_spec *f)
{
	FORWARD_IF_ERR(zr_name_check(f->name));
	RETURN_IF((unsigned)f->dtype >= ZR_DTYPE_COUNT, ZR_EINVAL_SPEC, "field '%s': bad dtype",
		  f->name);
	RETURN_IF((unsigned)f->compress >= ZR_COMPRESS_COUNT, ZR_EINVAL_SPEC,
		  "field '%s': bad compression", f->name);
	RETURN_IF(f->ext && !zr_portable(f->ext, strlen(f->ext), ZR_EXT_MAX, true), ZR_EINVAL_SPEC,
		  "field '%s': extension '%s': use 1..%d of A-Z a-z 0-9 _ - .", f->name, f->ext,
		  ZR_EXT_MAX);
	RETURN_IF(f->ext && f->ext[0] == '.', ZR_EINVAL_SPEC,
		  "field '%s': extension '%s' must not start with '.'", f->name, f->ext);
	if (f->fixed) {
		uint64_t size = zr_dtype_size(f->dtype);
		RETURN_IF(f->ndim > ZR_SHAPE_MAX, ZR_EINVAL_SPEC,
			  "field '%s': more than %d dimensions", f->name, ZR_SHAPE_MAX);
		for (unsigned i = 0; i < f->ndim; i++) {
			RETURN_IF(f->shape[i] == 0 || f->shape[i] > ZR_RECORD_MAX, ZR_EINVAL_SPEC,
				  "field '%s': dimension %u is %llu (1..%u)", f->name, i,
				  (unsigned long long)f->shape[i], ZR_RECORD_MAX);
			size *= f->shape[i];
			RETURN_IF(size > ZR_RECORD_MAX, ZR_EINVAL_SPEC,
				  "field '%s': records of this shape exceed %u bytes", f->name,
				  ZR_RECORD_MAX);
		}
	}
	return 0;
}

/* ---- parse ---- */

/* An unsigned integer member within [0, max]. */
static int get_uint(json_t *obj, const char *key, uint64_t max, uint64_t *out, const char *where)
{
	json_t *v = json_object_get(obj, key);
	json_int_t i;

	RETURN_IF(!v, ZR_ECORRUPT, "%s: '%s' is missing", where, key);
	RETURN_IF(!json_is_integer(v), ZR_ECORRUPT, "%s: '%s' is not an integer", where, key);
	i = json_integer_value(v);
	RETURN_IF(i < 0 || (uint64_t)i > max, ZR_ECORRUPT, "%s: '%s' = %lld is out of range 0..%llu",
		  where, key, (long long)i, (unsigned long long)max);
	*out = (uint64_t)i;
	return 0;
}

static int get_time(json_t *obj, const char *key, int64_t *out)
{
	json_t *v = json_object_get(obj, key);

	*out = 0;
	if (v && json_is_integer(v))
		*out = json_integer_value(v);
	return 0;
}

static int parse_field(json_t *jf, unsigned idx, zr_fielddef *d, const char *where)
{
	json_t *name = json_object_get(jf, "name"), *dt = json_object_get(jf, "dtype");
	json_t *cp = json_object_get(jf, "compress"), *shape = json_object_get(jf, "shape");
	json_t *ext = json_object_get(jf, "ext");
	zr_field_spec *s = &d->spec;
	int rc;

	memset(d, 0, sizeof *d);
	RETURN_IF(!json_is_object(jf), ZR_ECORRUPT, "%s: fields[%u] is not an object", where, idx);
	RETURN_IF(!json_is_string(name), ZR_ECORRUPT, "%s: fields[%u].name is not a string", where,
		  idx);
	RETURN_IF(json_string_length(name) > ZR_NAME_MAX, ZR_ECORRUPT,
		  "%s: fields[%u].name is longer than %d bytes", where, idx, ZR_NAME_MAX);
	memcpy(d->name, json_string_value(name), json_string_length(name));
	s->name = d->name;
	RETURN_IF(!json_is_string(dt), ZR_ECORRUPT, "%s: field '%s': dtype is not a string", where,
		  d->name);
	rc = zr_dtype_parse(json_string_value(dt), &s->dtype);
	RETURN_IF(rc < 0, ZR_ECORRUPT, "%s: field '%s': unknown dtype '%s'", where, d->name,
		  json_string_value(dt));
	s->compress = ZR_RAW;
	if (cp) {
		RETURN_IF(!json_is_string(cp), ZR_ECORRUPT,
			  "%s: field '%s': compress is not a string", where, d->name);
		rc = zr_compress_parse(json_string_value(cp), &s->compress);
		RETURN_IF(rc < 0, ZR_ECORRUPT, "%s: field '%s': unknown compression '%s'", where,
			  d->name, json_string_value(cp));
	}
	if (shape) {
		RETURN_IF(!json_is_array(shape) || json_array_size(shape) > ZR_SHAPE_MAX,
			  ZR_ECORRUPT, "%s: field '%s': shape is not an array of at most %d integers",
			  where, d->name, ZR_SHAPE_MAX);
		s->fixed = 1;
		s->ndim = (unsigned)json_array_size(shape);
		for (unsigned i = 0; i < s->ndim; i++) {
			json_t *v = json_array_get(shape, i);
			RETURN_IF(!json_is_integer(v) || json_integer_value(v) <= 0 ||
					  json_integer_value(v) > (json_int_t)ZR_RECORD_MAX,
				  ZR_ECORRUPT, "%s: field '%s': shape[%u] is not a positive integer",
				  where, d->name, i);
			s->shape[i] = (uint64_t)json_integer_value(v);
		}
	}
	if (ext) {
		RETURN_IF(!json_is_string(ext) || json_string_length(ext) > ZR_EXT_MAX, ZR_ECORRUPT,
			  "%s: field '%s': ext is not a string of at most %d bytes", where, d->name,
			  ZR_EXT_MAX);
		memcpy(d->ext, json_string_value(ext), json_string_length(ext));
		s->ext = d->ext;
	}
	rc = zr_field_check(s);
	RETURN_IF(rc < 0, ZR_ECORRUPT, "%s: %s", where, zr_errmsg(NULL));
	return 0;
}

/* "chunks": size, num, first and the unfull list. */
static int parse_chunks(json_t *root, const char *where, zr_meta *m)
{
	json_t *chunks = json_object_get(root, "chunks"), *unfull;
	uint64_t v = 0;

	RETURN_IF(!json_is_object(chunks), ZR_ECORRUPT, "%s: 'chunks' is missing or not an object",
		  where);
	FORWARD_IF_ERR(get_uint(chunks, "size", UINT32_MAX, &v, where));
	m->chunk_size = (uint32_t)v;
	/* format 2's entries name chunks below 0xFFFFFF (FORMAT.md) */
	uint64_t ids = m->version >= 2 ? ZR_V2_CHUNK_LIMIT : UINT32_MAX - 1;
	FORWARD_IF_ERR(get_uint(chunks, "num", ids, &v, where));
	m->chunk_num = (uint32_t)v;
	v = 0;
	if (json_object_get(chunks, "first"))
		FORWARD_IF_ERR(get_uint(chunks, "first", ids - m->chunk_num, &v, where));
	m->chunk_first = (uint32_t)v;
	RETURN_IF(m->chunk_size == 0, ZR_ECORRUPT, "%s: chunks.size is 0", where);
	unfull = json_object_get(chunks, "unfull");
	RETURN_IF(unfull && (!json_is_array(unfull) || json_array_size(unfull) > m->chunk_num),
		  ZR_ECORRUPT, "%s: chunks.unfull is not an array of at most num entries", where);
	m->unfull_count = unfull ? (uint32_t)json_array_size(unfull) : 0;
	m->unfull = calloc(m->unfull_count + 1, sizeof *m->unfull);
	RETURN_IF(!m->unfull, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < m->unfull_count; i++) {
		json_t *t = json_array_get(unfull, i);
		json_int_t a, b, c;
		RETURN_IF(!json_is_array(t) || json_array_size(t) != 3 ||
				  !json_is_integer(json_array_get(t, 0)) ||
				  !json_is_integer(json_array_get(t, 1)) ||
				  !json_is_integer(json_array_get(t, 2)),
			  ZR_ECORRUPT, "%s: chunks.unfull[%u] is not [chunk_id, write_pos, records]",
			  where, i);
		a = json_integer_value(json_array_get(t, 0));
		b = json_integer_value(json_array_get(t, 1));
		c = json_integer_value(json_array_get(t, 2));
		RETURN_IF(a < m->chunk_first || a >= (json_int_t)m->chunk_first + m->chunk_num ||
				  b < 0 || c < 0 || c >= m->chunk_size,
			  ZR_ECORRUPT, "%s: chunks.unfull[%u] = [%lld, %lld, %lld] is out of range",
			  where, i, (long long)a, (long long)b, (long long)c);
		for (uint32_t j = 0; j < i; j++)
			RETURN_IF(m->unfull[j].chunk_id == (uint32_t)a, ZR_ECORRUPT,
				  "%s: chunk %lld is listed twice in chunks.unfull", where,
				  (long long)a);
		m->unfull[i] = (zr_unfull){(uint32_t)a, (uint64_t)b, (uint32_t)c};
	}
	return 0;
}

/* "fields": 1..ZR_FIELDS_MAX fields with distinct names. */
static int parse_fields(json_t *root, const char *where, zr_meta *m)
{
	json_t *fields = json_object_get(root, "fields");

	RETURN_IF(!json_is_array(fields) || json_array_size(fields) == 0 ||
			  json_array_size(fields) > ZR_FIELDS_MAX,
		  ZR_ECORRUPT, "%s: 'fields' is not an array of 1..%d fields", where, ZR_FIELDS_MAX);
	m->nfields = (unsigned)json_array_size(fields);
	m->fields = calloc(m->nfields, sizeof *m->fields);
	RETURN_IF(!m->fields, -ENOMEM, "out of memory");
	for (unsigned i = 0; i < m->nfields; i++) {
		FORWARD_IF_ERR(parse_field(json_array_get(fields, i), i, &m->fields[i], where));
		for (unsigned j = 0; j < i; j++)
			RETURN_IF(strcmp(m->fields[j].name, m->fields[i].name) == 0, ZR_ECORRUPT,
				  "%s: field '%s' is defined twice", where, m->fields[i].name);
	}
	return 0;
}

/* meta.json's "tree" @o: the file of the tree's directories and links
 * (tree.c), into @ref. */
static int parse_tree_ref(json_t *o, const char *where, zr_tree_ref *ref)
{
	uint64_t crc;

	RETURN_IF(!json_is_object(o), ZR_ECORRUPT,
		  "%s: 'tree' is not {generation, bytes, entries, crc32} of a tree file", where);
	FORWARD_IF_ERR(get_uint(o, "generation", INT64_MAX, &ref->generation, where));
	FORWARD_IF_ERR(get_uint(o, "bytes", ZR_TREE_BYTES_MAX, &ref->bytes, where));
	FORWARD_IF_ERR(get_uint(o, "entries", ZR_TREE_MAX, &ref->entries, where));
	FORWARD_IF_ERR(get_uint(o, "crc32", UINT32_MAX, &crc, where));
	ref->crc = (uint32_t)crc;
	RETURN_IF(!ref->generation || !ref->entries, ZR_ECORRUPT,
		  "%s: 'tree' names no file (generation and entries are 1 or more)", where);
	return 0;
}

static json_t *tree_ref_json(const zr_tree_ref *ref)
{
	return json_pack("{s:I,s:I,s:I,s:I}", "generation", (json_int_t)ref->generation, "bytes",
			 (json_int_t)ref->bytes, "entries", (json_int_t)ref->entries, "crc32",
			 (json_int_t)ref->crc);
}

/* Everything of @root but chunks and fields: format, version, counters,
 * times, attrs. */
static int parse_top(json_t *root, const char *where, zr_meta *m)
{
	json_t *format = json_object_get(root, "format"), *attrs = json_object_get(root, "attrs");
	json_t *tree = json_object_get(root, "tree");
	uint64_t v;

	RETURN_IF(!json_is_object(root), ZR_ECORRUPT, "%s: not a JSON object", where);
	RETURN_IF(!json_is_string(format) || strcmp(json_string_value(format), "zrecord") != 0,
		  ZR_ECORRUPT, "%s: 'format' is not \"zrecord\"", where);
	FORWARD_IF_ERR(get_uint(root, "version", UINT32_MAX, &v, where));
	RETURN_IF(v < 1 || v > ZR_FORMAT_VERSION, ZR_EVERSION,
		  "%s: format version %llu, this library reads versions 1 to %d", where,
		  (unsigned long long)v, ZR_FORMAT_VERSION);
	m->version = (unsigned)v;
	FORWARD_IF_ERR(get_uint(root, "generation", INT64_MAX, &m->generation, where));
	FORWARD_IF_ERR(get_uint(root, "length", ZR_LENGTH_MAX, &m->length, where));
	m->high = m->length;
	if (json_object_get(root, "high"))
		FORWARD_IF_ERR(get_uint(root, "high", ZR_LENGTH_MAX, &m->high, where));
	RETURN_IF(m->high < m->length, ZR_ECORRUPT, "%s: 'high' = %llu is below 'length' = %llu",
		  where, (unsigned long long)m->high, (unsigned long long)m->length);
	get_time(root, "created", &m->created);
	get_time(root, "modified", &m->modified);
	RETURN_IF(attrs && !json_is_object(attrs), ZR_ECORRUPT, "%s: 'attrs' is not an object",
		  where);
	m->attrs = attrs ? json_incref(attrs) : NULL;
	if (tree)
		FORWARD_IF_ERR(parse_tree_ref(tree, where, &m->tree));
	return 0;
}

int zr_meta_parse(const char *buf, size_t len, const char *where, zr_meta *m)
{
	json_error_t jerr;
	json_t *root;
	int rc;

	memset(m, 0, sizeof *m);
	root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	RETURN_IF(!root, ZR_ECORRUPT, "%s: not valid JSON (line %d: %s)", where, jerr.line,
		  jerr.text);
	rc = parse_top(root, where, m);
	if (rc == 0)
		rc = parse_chunks(root, where, m);
	if (rc == 0)
		rc = parse_fields(root, where, m);
	json_decref(root);
	if (rc < 0)
		zr_meta_free(m);
	return rc;
}

/* ---- dump ---- */

char *zr_meta_dump(const zr_meta *m)
{
	json_t *root = json_object(), *chunks = json_object(), *unfull = json_array();
	json_t *fields = json_array();
	char *s;

	json_object_set_new(root, "format", json_string("zrecord"));
	json_object_set_new(root, "version", json_integer(m->version ? m->version : ZR_FORMAT_VERSION));
	json_object_set_new(root, "generation", json_integer((json_int_t)m->generation));
	json_object_set_new(root, "length", json_integer((json_int_t)m->length));
	if (m->high > m->length) /* only while readers may hold a longer state */
		json_object_set_new(root, "high", json_integer((json_int_t)m->high));
	json_object_set_new(root, "created", json_integer(m->created));
	json_object_set_new(root, "modified", json_integer(m->modified));
	json_object_set_new(chunks, "first", json_integer(m->chunk_first));
	json_object_set_new(chunks, "num", json_integer(m->chunk_num));
	json_object_set_new(chunks, "size", json_integer(m->chunk_size));
	for (uint32_t i = 0; i < m->unfull_count; i++)
		json_array_append_new(unfull, json_pack("[I,I,I]", (json_int_t)m->unfull[i].chunk_id,
							(json_int_t)m->unfull[i].write_pos,
							(json_int_t)m->unfull[i].records));
	json_object_set_new(chunks, "unfull", unfull);
	json_object_set_new(root, "chunks", chunks);
	for (unsigned i = 0; i < m->nfields; i++) {
		const zr_field_spec *f = &m->fields[i].spec;
		json_t *jf = json_object();
		json_object_set_new(jf, "name", json_string(f->name));
		json_object_set_new(jf, "dtype", json_string(zr_dtype_name(f->dtype)));
		json_object_set_new(jf, "compress", json_string(zr_compress_name(f->compress)));
		if (f->fixed) {
			json_t *shape = json_array();
			for (unsigned d = 0; d < f->ndim; d++)
				json_array_append_new(shape, json_integer((json_int_t)f->shape[d]));
			json_object_set_new(jf, "shape", shape);
		}
		if (f->ext && f->ext[0])
			json_object_set_new(jf, "ext", json_string(f->ext));
		json_array_append_new(fields, jf);
	}
	json_object_set_new(root, "fields", fields);
	if (m->attrs)
		json_object_set(root, "attrs", m->attrs);
	if (m->tree.generation)
		json_object_set_new(root, "tree", tree_ref_json(&m->tree));
	s = json_dumps(root, JSON_INDENT(2));
	json_decref(root);
	return s;
}

/* ---- files ---- */

int zr_meta_read(int dirfd, const char *dir, const char *name, zr_meta *m)
{
	char where[4096];
	struct stat st;
	char *buf;
	int fd, rc;

	snprintf(where, sizeof where, "%s/%s", dir, name);
	fd = zr_sys.openat(dirfd, name, O_RDONLY, 0);
	if (fd < 0) {
		rc = -errno;
		if (rc == -ENOENT)
			return zr_err(rc, "%s: no such file (not a zrecord dataset?)", where);
		return zr_err(rc == -ENXIO ? ZR_ECORRUPT : rc, "%s: %s", where,
			      zr_open_strerror(-rc));
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > ZR_META_MAX) {
		close(fd);
		return zr_err(ZR_ECORRUPT, "%s: not a regular file of at most %u bytes", where,
			      ZR_META_MAX);
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	rc = zr_read_full(fd, buf, (size_t)st.st_size, 0);
	close(fd);
	if (rc == 0)
		rc = zr_meta_parse(buf, (size_t)st.st_size, where, m);
	else if (rc == -ENOENT || rc == -ESTALE)
		/* a read of an open file fails so only on a shared filesystem
		 * whose client opened a file its server has since replaced (an
		 * NFS stale handle; GlusterFS opens lazily, at the first read):
		 * the caller opens it again (zr_open waits for a stale state) */
		rc = zr_err(-ESTALE, "%s: replaced while it was read (%s)", where,
			    zr_strerror(rc));
	else
		rc = zr_err(rc == -ENODATA ? ZR_ECORRUPT : rc, "%s: read failed: %s", where,
			    zr_strerror(rc));
	free(buf);
	return rc;
}

int zr_meta_write(int dirfd, const char *dir, const zr_meta *m)
{
	char *s = zr_meta_dump(m);
	size_t n;
	int rc;

	RETURN_IF(!s, -ENOMEM, "%s/meta.json: out of memory", dir);
	n = strlen(s);
	s[n] = '\n'; /* json_dumps leaves room only for the NUL: write it as a newline */
	rc = zr_replace_durable(dirfd, dir, "meta.json.tmp", "meta.json", s, n + 1);
	free(s);
	return rc;
}

void zr_meta_free(zr_meta *m)
{
	free(m->unfull);
	free(m->fields);
	json_decref(m->attrs);
	memset(m, 0, sizeof *m);
}
