/*
 * records.c - record files, wherever the tree shows them (/<field>/ and
 * /by/<label>/<class>/): their names, inode numbers, attributes and bytes,
 * and the rows of records that .npy views and batch files are made of.
 *
 * A record file's name is its id in decimal plus the field's extension (or
 * its original name's own, zr_names_ext), its
 * inode number ZRFS_INO_REC | version << 48 | field << 40 | id (the version
 * changes with its bytes, view.c), its size the record's logical length
 * from the offset table of the view it shows: all O(1). A raw record is read
 * from its chunk file and sent (reply.c); a flate record is inflated once into
 * the bounded cache (cache.c) and served from there, as the kernel asks for
 * a file in pieces and a stream inflates only whole.
 *
 * Sections: names and numbers, attributes, contents, rows.
 */
#include "zrfs_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- names and numbers ---- */

bool zrfs_rec_decode(const struct zrfs *fs, fuse_ino_t ino, unsigned *field, uint64_t *id,
		     unsigned *version)
{
	/* bit 56 and nothing above it; the version in bits 48..55, the field
	 * in 40..47, the id below */
	uint64_t f = (ino >> ZRFS_ID_BITS) & 0xff;

	if (!zrfs_is_rec_ino(ino) || f >= fs->nfields)
		return false;
	*field = (unsigned)f;
	*id = ino & ((UINT64_C(1) << ZRFS_ID_BITS) - 1);
	*version = (unsigned)(ino >> 48) & (ZRFS_VERSIONS - 1);
	return true;
}

int zrfs_parse_dec(const char *s, size_t len, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (len == 0 || len > 20 || (s[0] == '0' && len > 1))
		return -ENOENT;
	for (size_t i = 0; i < len; i++) {
		unsigned d = (unsigned)(s[i] - '0');
		if (d > 9 || __builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, d, &v))
			return -ENOENT;
	}
	if (v > max)
		return -ENOENT;
	*out = v;
	return 0;
}

/* The extension of the file of field @field of a record named @name (@len
 * bytes; NULL: none known) in the field's directory: the name's own where
 * it decides it (zr_names_ext), else the field's. */
static size_t record_ext(const struct zrfs *fs, unsigned field, const char *name, size_t len,
			 const char **ext)
{
	int own = name ? zr_names_ext(&fs->names, field, name, len, ext) : -1;

	if (own >= 0)
		return (size_t)own;
	*ext = fs->fields[field].ext;
	return fs->fields[field].ext_len;
}

/* Record @id's name as the tree knows it (its last component), or NULL. */
static const char *tree_name(const struct zrfs *fs, unsigned field, uint64_t id, size_t *len)
{
	return (int)field == fs->names.files ? zrfs_tree_leaf(fs, id, len) : NULL;
}

int zrfs_record_name_parse(const struct zrfs *fs, unsigned field, const char *name, uint64_t n,
			   uint64_t *id)
{
	const char *dot = strchr(name, '.'), *ext;
	size_t digits = dot ? (size_t)(dot - name) : strlen(name), len;

	if (n == 0 || zrfs_parse_dec(name, digits, n - 1, id) < 0)
		return -ENOENT;
	const char *leaf = tree_name(fs, field, *id, &len);
	len = record_ext(fs, field, leaf, len, &ext);
	if (len ? !dot || strlen(dot + 1) != len || memcmp(dot + 1, ext, len) != 0 : dot != NULL)
		return -ENOENT;
	return 0;
}

void zrfs_record_name_for(const struct zrfs *fs, unsigned field, uint64_t id, const char *name,
			  size_t name_len, char *buf, size_t cap)
{
	const char *ext;
	size_t len = record_ext(fs, field, name, name_len, &ext);

	if (len)
		snprintf(buf, cap, "%llu.%.*s", (unsigned long long)id, (int)len, ext);
	else
		snprintf(buf, cap, "%llu", (unsigned long long)id);
}

void zrfs_record_name_format(const struct zrfs *fs, unsigned field, uint64_t id, char *buf,
			     size_t cap)
{
	size_t len = 0;
	const char *leaf = tree_name(fs, field, id, &len);

	zrfs_record_name_for(fs, field, id, leaf, len, buf, cap);
}

void zrfs_log_record_error(struct zrfs *fs, zr_dataset *ds, unsigned field, uint64_t id, int rc)
{
	if (zrfs_log_admit()) /* any reader of a damaged record causes it */
		fuse_log(FUSE_LOG_ERR, "zrfs: %s: field '%s' record %llu: %s (%s)\n", fs->dataset,
			 fs->fields[field].spec->name, (unsigned long long)id, zr_strerror(rc),
			 zr_errmsg(ds));
}

/* ---- attributes ---- */


int zrfs_record_attr(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino, unsigned field,
		     uint64_t id, struct stat *st)
{
	zr_record_stat rs;
	int rc;

	if (id >= v->n)
		return -ENOENT;
	if ((rc = zr_stat(v->ds, field, id, &rs)) < 0) {
		zrfs_log_record_error(fs, v->ds, field, id, rc);
		return rc;
	}
	if (!rs.present)
		return -ENOENT;
	zrfs_file_attr(fs, v, ino, rs.logical_len, st);
	/* only a raw value of ZR_HOLE_MIN or more can have a hole */
	if (rs.logical_len >= ZR_HOLE_MIN && fs->fields[field].spec->compress == ZR_RAW) {
		int64_t holes = zr_record_holes(v->ds, field, id);
		if (holes > 0)
			st->st_blocks = (blkcnt_t)((rs.logical_len - (uint64_t)holes + 511) / 512);
	}
	zrfs_record_meta(fs, v, field, id, st);
	zrfs_tree_links_attr(fs, field, id, st); /* tree/'s hard links */
	return 0;
}

int64_t zrfs_record_seek(struct zrfs *fs, struct zrfs_view *v, unsigned field, uint64_t id,
			 uint64_t off, int whence)
{
	int64_t rc = zr_record_seek(v->ds, field, id, off, whence);

	if (rc < 0 && rc != -ENXIO)
		zrfs_log_record_error(fs, v->ds, field, id, (int)rc);
	return rc;
}

void zrfs_record_meta(struct zrfs *fs, struct zrfs_view *v, unsigned field, uint64_t id,
		       struct stat *st)
{
	zr_file_meta m;

	/* the file's own mode, owner and times where the dataset keeps them
	 * (zr import keeps them beside the names), else 0644, the dataset
	 * directory's owner and the commit's; its access and change times
	 * the modification time's where not kept */
	zr_name_meta(v->ds, &fs->names, id, field, &m); /* what cannot be read stays */
	if (m.have & ZR_META_MODE)
		st->st_mode = (st->st_mode & S_IFMT) | (m.mode & 07777);
	if (m.have & ZR_META_OWNER) {
		st->st_uid = m.uid != ZR_OWNER_NONE ? m.uid : st->st_uid;
		st->st_gid = m.gid != ZR_OWNER_NONE ? m.gid : st->st_gid;
	}
	if (m.have & ZR_META_MTIME)
		zrfs_stat_mtime(st, m.mtime, false);
	if (m.have & ZR_META_ATIME)
		st->st_atim = zr_ns_time(m.atime);
	if (m.have & ZR_META_CTIME)
		st->st_ctim = zr_ns_time(m.ctime);
}

bool zrfs_record_listed(struct zrfs_view *v, unsigned field, uint64_t id)
{
	zr_record_stat rs;

	return zr_stat(v->ds, field, id, &rs) < 0 || rs.present;
}

/* ---- contents ---- */

struct flate_job {
	struct zrfs *fs;
	struct zrfs_view *v;
	unsigned field;
	uint64_t id;
};

static int load_flate(void *ctx, uint8_t **data, uint64_t *len)
{
	struct flate_job *j = ctx;
	zr_record_stat st;
	int64_t got;
	int rc;

	if (j->id >= j->v->n)
		return -ENOENT;
	if ((rc = zr_stat(j->v->ds, j->field, j->id, &st)) < 0)
		return rc;
	if (!st.present)
		return -ENOENT;
	if (st.logical_len > j->fs->opts.cache_bytes)
		return zrfs_too_big(j->fs, st.logical_len);
	*data = zrfs_cache_alloc(j->fs->cache, st.logical_len ? st.logical_len : 1);
	if (!*data)
		return -ENOMEM;
	got = zr_record_load(j->v->ds, j->field, j->id, *data, st.logical_len);
	if (got < 0) {
		zrfs_cache_free(j->fs->cache, *data);
		*data = NULL;
		return (int)got;
	}
	*len = (uint64_t)got;
	return 0;
}

static void record_read_flate(fuse_req_t req, struct zrfs *fs, struct zrfs_view *v, uint64_t key,
			      uint64_t tag, unsigned field, uint64_t id, size_t size, off_t off)
{
	struct flate_job j = {fs, v, field, id};
	struct zrfs_cached *e;
	const uint8_t *data;
	uint64_t len;
	int rc = zrfs_cache_get(fs->cache, key, tag, load_flate, &j, &e, &data, &len);

	if (rc < 0) {
		/* EFBIG is logged with the reason; a missing record is no damage */
		if (rc != -EFBIG && rc != -ENOENT)
			zrfs_log_record_error(fs, v->ds, field, id, rc);
		zrfs_reply_err(req, rc);
		return;
	}
	zrfs_reply_slice(req, data, len, size, off);
	zrfs_cache_release(fs->cache, e);
}

void zrfs_record_read(fuse_req_t req, struct zrfs *fs, struct zrfs_view *v, uint64_t key,
		      uint64_t tag, unsigned field, uint64_t id, size_t size, off_t off)
{
	struct zrfs_pieces p;
	struct zrfs_row row;
	zr_batch *g = NULL;
	int rc;

	if (fs->fields[field].whole) {
		record_read_flate(req, fs, v, key, tag, field, id, size, off);
		return;
	}
	if ((rc = zrfs_records_locate(fs, v, field, &id, 1, &row, &g)) < 0 || !row.present) {
		/* missing: the file was removed under a cached name */
		zrfs_reply_err(req, rc < 0 ? rc : -ENOENT);
		zr_batch_release(g);
		return;
	}
	if ((uint64_t)off >= row.len) {
		zrfs_reply_buf(req, NULL, 0);
	} else if ((rc = zrfs_pieces_init(&p, 1)) < 0) {
		zrfs_reply_err(req, rc);
	} else {
		uint64_t n = row.len - (uint64_t)off < size ? row.len - (uint64_t)off : size;
		zrfs_pieces_add(&p, row.fd, row.pos + (uint64_t)off,
				row.mem ? (const uint8_t *)row.mem + off : NULL, n);
		zrfs_reply_pieces(req, fs, v, &p, false);
		zrfs_pieces_free(&p);
	}
	zr_batch_release(g);
}

/* ---- rows ---- */

int zrfs_records_stat(struct zrfs *fs, struct zrfs_view *v, unsigned field, const uint64_t *ids,
		      size_t n, struct zrfs_row *rows)
{
	for (size_t i = 0; i < n; i++) {
		zr_record_stat st = {.fd = -1};
		int rc = ids[i] < v->n ? zr_stat(v->ds, field, ids[i], &st) : 0;
		if (rc < 0) {
			zrfs_log_record_error(fs, v->ds, field, ids[i], rc);
			return rc;
		}
		rows[i] = (struct zrfs_row){NULL, st.fd, st.offset,
					    st.present ? st.physical_len : 0, st.present};
	}
	return 0;
}

/* Gather the records of @ids @v has (a raw field's gather copies nothing:
 * it says where the records are, and keeps their chunks open until *g is
 * released). @*pos[i] is record i's place in the batch, or SIZE_MAX; @*pos
 * NULL: record i is at i. */
static int gather_rows(struct zrfs_view *v, unsigned field, const uint64_t *ids, size_t n,
		       zr_batch **g, size_t **pos)
{
	uint64_t *have = NULL;
	size_t k = 0;
	int rc;

	*g = NULL;
	*pos = NULL;
	if (n == 0)
		return 0;
	while (k < n && ids[k] < v->n)
		k++;
	if (k == n) /* the view has them all (a read's usual case): places are the ids' */
		return zr_gather(v->ds, field, ids, n, g);
	k = 0;
	if (!(*pos = malloc(n * sizeof **pos)) || !(have = malloc(n * sizeof *have))) {
		free(*pos);
		*pos = NULL;
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		(*pos)[i] = ids[i] < v->n ? k : SIZE_MAX;
		if (ids[i] < v->n)
			have[k++] = ids[i];
	}
	rc = k ? zr_gather(v->ds, field, have, k, g) : 0;
	free(have);
	return rc;
}

int zrfs_records_locate(struct zrfs *fs, struct zrfs_view *v, unsigned field, const uint64_t *ids,
			size_t n, struct zrfs_row *rows, zr_batch **g)
{
	size_t *pos = NULL;
	const zr_slice *maps;
	size_t m;
	/* the gather first: the chunk files whose descriptors zr_stat() gives
	 * then stay open until the reply is sent and *g released (a dataset
	 * may have more chunks than are kept open) */
	int grc = gather_rows(v, field, ids, n, g, &pos), rc;

	if (grc == -ENOMEM) {
		free(pos);
		return grc;
	}
	rc = zrfs_records_stat(fs, v, field, ids, n, rows);
	if (rc == 0 && grc < 0) { /* zr_stat() saw no damage, but the bytes cannot be had */
		if (zrfs_log_admit())
			fuse_log(FUSE_LOG_ERR, "zrfs: %s: field '%s': %s (%s)\n", fs->dataset,
				 fs->fields[field].spec->name, zr_strerror(grc), zr_errmsg(v->ds));
		rc = grc;
	}
	if (rc == 0 && *g) {
		maps = zr_batch_records(*g, &m);
		for (size_t i = 0; i < n; i++)
			rows[i].mem = !rows[i].len		      ? NULL
				      : !pos			      ? maps[i].data
				      : pos[i] != SIZE_MAX ? maps[pos[i]].data
							   : NULL;
	}
	free(pos);
	return rc;
}

int zrfs_records_inflate_rows(struct zrfs *fs, struct zrfs_view *v, unsigned field,
			      const uint64_t *ids, size_t n, struct zrfs_row *rows)
{
	uint64_t rsz = fs->fields[field].record_size;
	uint64_t *want = malloc((n + 1) * sizeof *want), *offs = malloc((n + 1) * sizeof *offs);
	size_t *row_of = malloc((n + 1) * sizeof *row_of), k = 0;
	zr_reader *r;
	uint8_t *buf = NULL;
	int rc = want && offs && row_of ? 0 : -ENOMEM;

	/* only rows of the right size are read: the others are zeros, and a
	 * damaged length cannot make this request allocate more than its rows */
	for (size_t i = 0; rc == 0 && i < n; i++) {
		zr_record_stat st = {0};
		rows[i] = (struct zrfs_row){NULL, -1, 0, 0, false};
		if (ids[i] < v->n && (rc = zr_stat(v->ds, field, ids[i], &st)) < 0) {
			zrfs_log_record_error(fs, v->ds, field, ids[i], rc);
		} else if (st.present && st.logical_len == rsz) {
			want[k] = ids[i];
			row_of[k++] = i;
		}
	}
	if (rc == 0 && k && !(buf = zrfs_scratch(ZRFS_SCRATCH_VIEW, k * rsz)))
		rc = -ENOMEM;
	if (rc == 0 && k && (rc = zrfs_scratch_reader(v->ds, &r)) == 0 &&
	    (rc = zr_reader_read(r, field, want, k, buf, k * rsz, offs)) < 0 && zrfs_log_admit())
		fuse_log(FUSE_LOG_ERR, "zrfs: %s: field '%s': %s (%s)\n", fs->dataset,
			 fs->fields[field].spec->name, zr_strerror(rc), zr_errmsg(v->ds));
	for (size_t j = 0; rc == 0 && j < k; j++) {
		if (offs[j + 1] - offs[j] != rsz) { /* changed since it was looked at */
			rc = -EIO;
			break;
		}
		rows[row_of[j]] = (struct zrfs_row){buf + offs[j], -1, 0, rsz, true};
	}
	free(want);
	free(offs);
	free(row_of);
	return rc;
}
