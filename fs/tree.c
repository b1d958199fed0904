/*
 * tree.c - the directory tree: names, inode numbers, attributes, listings.
 *
 * Everything here is computed from the dataset in O(1) per entry: a record
 * file's name is its id (plus the field's extension), its inode number is a
 * function of (field, id), its size is the record's logical length from the
 * offset table. Because a mounted dataset never changes, every reply carries
 * the mount's long timeout, negative lookups included, so the kernel asks
 * once per name.
 *
 * Sections: errors, inode numbers, attributes, lookup, getattr, listings.
 */
#include "zrfs_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ---- */

int zrfs_errno(int rc)
{
	if (rc == ZR_ECORRUPT || rc == ZR_EVERSION)
		return EIO;
	if (rc == ZR_EINVAL_SPEC)
		return EINVAL;
	if (rc < 0 && rc > -4096)
		return -rc;
	return EIO;
}

void zrfs_log_record_error(struct zrfs *fs, unsigned field, uint64_t id, int rc)
{
	fuse_log(FUSE_LOG_ERR, "zrfs: %s: field '%s' record %llu: %s (%s)\n", fs->dataset,
		 fs->fields[field].spec->name, (unsigned long long)id, zr_strerror(rc),
		 zr_errmsg(fs->ds));
}

/* ---- inode numbers ---- */

enum kind { K_NONE, K_ROOT, K_META, K_DIR, K_NPY, K_REC };

static enum kind decode(const struct zrfs *fs, fuse_ino_t ino, unsigned *field, uint64_t *id)
{
	if (ino == ZRFS_INO_ROOT)
		return K_ROOT;
	if (ino == ZRFS_INO_META)
		return K_META;
	if (ino >= ZRFS_INO_DIR && ino < ZRFS_INO_DIR + fs->nfields) {
		*field = (unsigned)(ino - ZRFS_INO_DIR);
		return K_DIR;
	}
	if (ino >= ZRFS_INO_NPY && ino < ZRFS_INO_NPY + fs->nfields &&
	    fs->fields[ino - ZRFS_INO_NPY].has_npy) {
		*field = (unsigned)(ino - ZRFS_INO_NPY);
		return K_NPY;
	}
	if (ino & ZRFS_INO_REC) {
		uint64_t f = (ino & ~ZRFS_INO_REC) >> ZRFS_ID_BITS;
		*id = ino & ((UINT64_C(1) << ZRFS_ID_BITS) - 1);
		if (f < fs->nfields && *id < fs->n) {
			*field = (unsigned)f;
			return K_REC;
		}
	}
	return K_NONE;
}

static fuse_ino_t rec_ino(unsigned field, uint64_t id)
{
	return ZRFS_INO_REC | (uint64_t)field << ZRFS_ID_BITS | id;
}

/* "<id>" or "<id>.<ext>": decimal, no sign, no leading zeros, id < n. */
int zrfs_record_name(const struct zrfs_field *f, const char *name, uint64_t n, uint64_t *id)
{
	uint64_t v = 0;
	size_t i = 0;

	if (name[0] == '0' && name[1] != '.' && name[1] != 0)
		return -ENOENT;
	for (; name[i] >= '0' && name[i] <= '9'; i++) {
		if (i >= 13) /* ids are below 2^40 < 10^13 */
			return -ENOENT;
		v = v * 10 + (uint64_t)(name[i] - '0');
	}
	if (i == 0 || v >= n)
		return -ENOENT;
	if (f->ext_len) {
		if (name[i] != '.' || strcmp(name + i + 1, f->spec->ext) != 0)
			return -ENOENT;
	} else if (name[i] != 0) {
		return -ENOENT;
	}
	*id = v;
	return 0;
}

/* ---- attributes ---- */

void zrfs_base_attr(const struct zrfs *fs, fuse_ino_t ino, mode_t mode, struct stat *st)
{
	memset(st, 0, sizeof *st);
	st->st_ino = ino;
	st->st_mode = mode;
	st->st_nlink = 1;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_blksize = 1 << 16;
	st->st_atim = st->st_mtim = st->st_ctim = fs->mtime;
}

void zrfs_file_size(struct stat *st, uint64_t size)
{
	st->st_size = (off_t)size;
	st->st_blocks = (blkcnt_t)((size + 511) / 512);
}

/* Attributes of @ino: 0, -ENOENT, or another -errno (logged). */
static int attr_of(struct zrfs *fs, fuse_ino_t ino, struct stat *st)
{
	unsigned field = 0;
	uint64_t id = 0;
	zr_record_stat rs;
	int rc;

	if (zrfs_batches_owns(ino))
		return zrfs_batches_attr(fs, ino, st);
	if (zrfs_byclass_owns(ino))
		return zrfs_byclass_shown(fs) ? zrfs_byclass_attr(fs, ino, st) : -ENOENT;
	switch (decode(fs, ino, &field, &id)) {
	case K_ROOT:
		zrfs_base_attr(fs, ino, S_IFDIR | 0555, st);
		st->st_nlink = 2 + fs->nfields;
		return 0;
	case K_META:
		zrfs_base_attr(fs, ino, S_IFREG | 0444, st);
		zrfs_file_size(st, fs->meta_len);
		return 0;
	case K_DIR:
		zrfs_base_attr(fs, ino, S_IFDIR | 0555, st);
		st->st_nlink = 2;
		return 0;
	case K_NPY:
		zrfs_base_attr(fs, ino, S_IFREG | 0444, st);
		zrfs_file_size(st, fs->fields[field].npy.size);
		return 0;
	case K_REC:
		rc = zr_stat(fs->ds, field, id, &rs);
		if (rc < 0) {
			zrfs_log_record_error(fs, field, id, rc);
			return -zrfs_errno(rc);
		}
		if (!rs.present)
			return -ENOENT;
		zrfs_base_attr(fs, ino, S_IFREG | 0444, st);
		zrfs_file_size(st, rs.logical_len);
		return 0;
	case K_NONE:
		break;
	}
	return -ENOENT;
}

static void reply_entry(fuse_req_t req, struct zrfs *fs, fuse_ino_t ino)
{
	struct fuse_entry_param e;
	int rc;

	memset(&e, 0, sizeof e);
	e.entry_timeout = fs->opts.timeout;
	e.attr_timeout = fs->opts.timeout;
	if (ino != 0 && (rc = attr_of(fs, ino, &e.attr)) < 0) {
		if (rc != -ENOENT) {
			fuse_reply_err(req, -rc);
			return;
		}
		ino = 0;
	}
	/* ino 0: a negative entry, cached by the kernel for entry_timeout */
	e.ino = ino;
	fuse_reply_entry(req, &e);
}

/* ---- lookup ---- */

static fuse_ino_t lookup_root(struct zrfs *fs, const char *name)
{
	size_t len = strlen(name);

	if (strcmp(name, "meta.json") == 0)
		return ZRFS_INO_META;
	if (strcmp(name, ZRFS_BATCHES_NAME) == 0)
		return ZRFS_INO_BATCHES;
	if (strcmp(name, ZRFS_BY_NAME) == 0 && zrfs_byclass_shown(fs))
		return ZRFS_INO_BY;
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

void zrfs_ll_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct zrfs *fs = fuse_req_userdata(req);
	unsigned field = 0;
	uint64_t id;

	if (zrfs_batches_owns(parent) || (zrfs_byclass_owns(parent) && zrfs_byclass_shown(fs))) {
		fuse_ino_t ino = 0;
		int rc = zrfs_batches_owns(parent) ? zrfs_batches_lookup(fs, parent, name, &ino)
						   : zrfs_byclass_lookup(fs, parent, name, &ino);
		if (rc < 0 && rc != -ENOENT)
			fuse_reply_err(req, -rc);
		else
			reply_entry(req, fs, rc < 0 ? 0 : ino);
		return;
	}
	switch (decode(fs, parent, &field, &id)) {
	case K_ROOT:
		reply_entry(req, fs, lookup_root(fs, name));
		return;
	case K_DIR:
		reply_entry(req, fs,
			    zrfs_record_name(&fs->fields[field], name, fs->n, &id) == 0
				    ? rec_ino(field, id)
				    : 0);
		return;
	case K_NONE:
		fuse_reply_err(req, ENOENT);
		return;
	default:
		fuse_reply_err(req, ENOTDIR);
		return;
	}
}

void zrfs_ll_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct zrfs *fs = fuse_req_userdata(req);
	struct stat st;
	int rc = attr_of(fs, ino, &st);

	(void)fi;
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, fs->opts.timeout);
}

/* ---- listings ---- */

/* Listing positions: 0 ".", 1 "..", then per directory:
 *   root:  2 meta.json, 3 + 2f field f, 4 + 2f field f's .npy, then .batches, by
 *   field: 2 + id record id
 * An entry at position p is added with offset p + 1 (where to resume). */


bool zrfs_list_add(struct zrfs_listing *l, struct zrfs *fs, const char *name, fuse_ino_t ino,
		   mode_t type, off_t next)
{
	size_t n;

	if (l->plus) {
		struct fuse_entry_param e;
		memset(&e, 0, sizeof e);
		e.ino = ino;
		e.entry_timeout = e.attr_timeout = fs->opts.timeout;
		if (attr_of(fs, ino, &e.attr) < 0) {
			/* listed, but every access goes through lookup and fails there */
			zrfs_base_attr(fs, ino, type, &e.attr);
			e.entry_timeout = e.attr_timeout = 0;
		}
		n = fuse_add_direntry_plus(l->req, l->buf + l->used, l->size - l->used, name, &e,
					   next);
	} else {
		struct stat st;
		memset(&st, 0, sizeof st);
		st.st_ino = ino;
		st.st_mode = type;
		n = fuse_add_direntry(l->req, l->buf + l->used, l->size - l->used, name, &st, next);
	}
	if (n > l->size - l->used)
		return false;
	l->used += n;
	return true;
}

static void list_root(struct zrfs_listing *l, struct zrfs *fs, off_t off)
{
	char name[ZR_NAME_MAX + 8];

	for (uint64_t p = (uint64_t)off; p < 5 + 2 * (uint64_t)fs->nfields; p++) {
		bool ok = true;
		if (p == 3 + 2 * (uint64_t)fs->nfields)
			ok = zrfs_list_add(l, fs, ZRFS_BATCHES_NAME, ZRFS_INO_BATCHES, S_IFDIR,
					   (off_t)p + 1);
		else if (p == 4 + 2 * (uint64_t)fs->nfields) {
			if (zrfs_byclass_shown(fs))
				ok = zrfs_list_add(l, fs, ZRFS_BY_NAME, ZRFS_INO_BY, S_IFDIR,
						   (off_t)p + 1);
		} else if (p == 0)
			ok = zrfs_list_add(l, fs, ".", ZRFS_INO_ROOT, S_IFDIR, 1);
		else if (p == 1)
			ok = zrfs_list_add(l, fs, "..", ZRFS_INO_ROOT, S_IFDIR, 2);
		else if (p == 2)
			ok = zrfs_list_add(l, fs, "meta.json", ZRFS_INO_META, S_IFREG, 3);
		else if ((p - 3) % 2 == 0)
			ok = zrfs_list_add(l, fs, fs->fields[(p - 3) / 2].spec->name, ZRFS_INO_DIR + (p - 3) / 2,
				 S_IFDIR, (off_t)p + 1);
		else if (fs->fields[(p - 3) / 2].has_npy) {
			snprintf(name, sizeof name, "%s.npy", fs->fields[(p - 3) / 2].spec->name);
			ok = zrfs_list_add(l, fs, name, ZRFS_INO_NPY + (p - 3) / 2, S_IFREG, (off_t)p + 1);
		}
		if (!ok)
			break;
	}
}

bool zrfs_list_dots(struct zrfs_listing *l, struct zrfs *fs, fuse_ino_t ino, off_t off)
{
	return (off > 0 || zrfs_list_add(l, fs, ".", ino, S_IFDIR, 1)) &&
	       (off > 1 || zrfs_list_add(l, fs, "..", ZRFS_INO_ROOT, S_IFDIR, 2));
}

static void list_field(struct zrfs_listing *l, struct zrfs *fs, unsigned field, off_t off)
{
	const struct zrfs_field *f = &fs->fields[field];
	char name[32 + ZR_EXT_MAX];

	if (!zrfs_list_dots(l, fs, ZRFS_INO_DIR + field, off))
		return;
	for (uint64_t id = off > 2 ? (uint64_t)off - 2 : 0; id < fs->n; id++) {
		zr_record_stat rs;
		if (zr_stat(fs->ds, field, id, &rs) == 0 && !rs.present)
			continue; /* missing: absent from the directory */
		if (f->ext_len)
			snprintf(name, sizeof name, "%llu.%s", (unsigned long long)id, f->spec->ext);
		else
			snprintf(name, sizeof name, "%llu", (unsigned long long)id);
		if (!zrfs_list_add(l, fs, name, rec_ino(field, id), S_IFREG, (off_t)id + 3))
			break;
	}
}

static void readdir_any(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
	struct zrfs *fs = fuse_req_userdata(req);
	struct zrfs_listing l = {req, plus, NULL, size, 0};
	unsigned field = 0;
	uint64_t id;
	enum kind k = decode(fs, ino, &field, &id);

	if (zrfs_batches_owns(ino) || (zrfs_byclass_owns(ino) && zrfs_byclass_shown(fs))) {
		l.buf = malloc(size);
		if (!l.buf) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		int rc = zrfs_batches_owns(ino) ? zrfs_batches_list(&l, fs, ino, off)
						: zrfs_byclass_list(&l, fs, ino, off);
		if (rc < 0)
			fuse_reply_err(req, -rc);
		else
			fuse_reply_buf(req, l.buf, l.used);
		free(l.buf);
		return;
	}
	if (k != K_ROOT && k != K_DIR) {
		fuse_reply_err(req, k == K_NONE ? ENOENT : ENOTDIR);
		return;
	}
	l.buf = malloc(size);
	if (!l.buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (k == K_ROOT)
		list_root(&l, fs, off);
	else
		list_field(&l, fs, field, off);
	fuse_reply_buf(req, l.buf, l.used);
	free(l.buf);
}

void zrfs_ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	(void)fi;
	readdir_any(req, ino, size, off, false);
}

void zrfs_ll_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			 struct fuse_file_info *fi)
{
	(void)fi;
	readdir_any(req, ino, size, off, true);
}
