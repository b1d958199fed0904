/*
 * fs_fixture.h - helpers for the unit tests of the mount's pieces (fs/),
 * prefix t_: a small dataset of three kinds of field, the mount's state
 * opened on it by the same code as zrfs (dataset.c, the subtrees), and the
 * replies the pieces send, captured instead of written to /dev/fuse.
 *
 * Capture works by definition: this header defines fuse_reply_buf,
 * fuse_reply_iov, fuse_reply_err, fuse_reply_entry, fuse_reply_attr and
 * fuse_req_userdata, and a program's own definitions are the ones its
 * objects (and libzrfs's, linked statically) call. Include it in one file
 * per test program.
 */
#ifndef ZRFS_TEST_FS_FIXTURE_H
#define ZRFS_TEST_FS_FIXTURE_H

#include "zrfs_i.h"
#include "helpers.h"

#include <errno.h>
#include <linux/fuse.h>
#include <sys/uio.h>

/* ---- replies ---- */

static struct t_reply {
	int kind;             /* 0 none yet, 'e' error, 'b' bytes, 'n' entry, 'a' attr */
	int err;
	uint8_t *data;
	size_t len;
	const void *from;     /* where the bytes were sent from (the first iovec) */
	struct fuse_entry_param entry;
	struct stat attr;
} t_reply;

static struct zrfs t_fs;

static inline void t_reply_reset(void)
{
	free(t_reply.data);
	memset(&t_reply, 0, sizeof t_reply);
}

static inline void t_reply_add(const void *p, size_t n)
{
	t_reply.data = realloc(t_reply.data, t_reply.len + n + 1);
	cr_assert_not_null(t_reply.data);
	memcpy(t_reply.data + t_reply.len, p, n);
	t_reply.len += n;
}

int fuse_reply_err(fuse_req_t req, int err)
{
	(void)req;
	t_reply_reset();
	t_reply.kind = 'e';
	t_reply.err = err;
	return 0;
}

int fuse_reply_buf(fuse_req_t req, const char *buf, size_t size)
{
	(void)req;
	t_reply_reset();
	t_reply.kind = 'b';
	t_reply.from = buf;
	t_reply_add(buf ? buf : "", size);
	return 0;
}

int fuse_reply_iov(fuse_req_t req, const struct iovec *iov, int count)
{
	(void)req;
	t_reply_reset();
	t_reply.kind = 'b';
	t_reply.from = count ? iov[0].iov_base : NULL;
	t_reply_add("", 0); /* an empty reply has bytes too: none */
	for (int i = 0; i < count; i++)
		t_reply_add(iov[i].iov_base, iov[i].iov_len);
	return 0;
}

int fuse_reply_entry(fuse_req_t req, const struct fuse_entry_param *e)
{
	(void)req;
	t_reply_reset();
	t_reply.kind = 'n';
	t_reply.entry = *e;
	return 0;
}

int fuse_reply_attr(fuse_req_t req, const struct stat *attr, double attr_timeout)
{
	(void)req, (void)attr_timeout;
	t_reply_reset();
	t_reply.kind = 'a';
	t_reply.attr = *attr;
	return 0;
}

void *fuse_req_userdata(fuse_req_t req)
{
	(void)req;
	return &t_fs;
}

/* The caller of every request (no supplementary groups). */
static struct fuse_ctx t_ctx = {.pid = 4242};

const struct fuse_ctx *fuse_req_ctx(fuse_req_t req)
{
	(void)req;
	return &t_ctx;
}

int fuse_req_getgroups(fuse_req_t req, int size, gid_t list[])
{
	(void)req, (void)size, (void)list;
	return 0;
}

/* The bytes of the last reply, which must have been bytes. */
static inline const uint8_t *t_bytes(size_t *len)
{
	cr_assert_eq(t_reply.kind, 'b', "the reply was not bytes (kind %c, errno %d)",
		     t_reply.kind ? t_reply.kind : '0', t_reply.err);
	*len = t_reply.len;
	return t_reply.data;
}

/* ---- the dataset: 10 records of three fields ----
 *   x  u8[6], raw         record 3 missing
 *   y  i64, flate         record 5 missing
 *   v  bytes, raw, .bin   record 2 empty, record 4 missing, lengths vary
 */
#define T_N 10
static const zr_field_spec t_fields[3] = {
	{.name = "x", .dtype = ZR_U8, .compress = ZR_RAW, .fixed = 1, .ndim = 1, .shape = {6}},
	{.name = "y", .dtype = ZR_I64, .compress = ZR_FLATE, .fixed = 1},
	{.name = "v", .dtype = ZR_BYTES, .compress = ZR_RAW, .ext = "bin"},
};

/* Record @id's value of field @f into @buf (at least 64 bytes): its length,
 * or -1 when missing. */
static inline int t_value(unsigned f, uint64_t id, uint8_t *buf)
{
	if (f == 0) {
		for (int k = 0; k < 6; k++)
			buf[k] = (uint8_t)(id * 16 + (uint64_t)k + 1);
		return id == 3 ? -1 : 6;
	}
	if (f == 1) {
		int64_t v = 1000 + (int64_t)id;
		memcpy(buf, &v, 8);
		return id == 5 ? -1 : 8;
	}
	for (uint64_t k = 0; k < 3 * id; k++)
		buf[k] = (uint8_t)('a' + (id + k) % 26);
	return id == 4 ? -1 : (int)(3 * id);
}

static inline void t_make_dataset(const char *dir)
{
	zr_dataset *ds;
	cr_assert_eq(zr_create(dir, t_fields, 3, &(zr_create_opts){.chunk_size = 4}), 0, "%s",
		     zr_errmsg(NULL));
	cr_assert_eq(zr_open(&ds, dir, ZR_RDWR), 0);
	for (uint64_t id = 0; id < T_N; id++) {
		uint8_t b[3][64];
		zr_value v[3];
		for (unsigned f = 0; f < 3; f++) {
			int n = t_value(f, id, b[f]);
			v[f] = (zr_value){n < 0 ? NULL : b[f], n < 0 ? 0 : (size_t)n};
		}
		cr_assert_eq(zr_append(ds, v, NULL), 0, "%s", zr_errmsg(ds));
	}
	cr_assert_eq(zr_commit(ds), 0);
	zr_close(ds);
}

/* Open @dir as zrfs would, with -o batches=@specs (NULL: none). */
static inline void t_fs_open(const char *dir, const char *specs)
{
	t_fs = (struct zrfs){.dataset = dir,
			     .opts = {.timeout = 1, .cache_bytes = 64 << 20, .prefetch = 2,
				      .drop_behind = 16, .hold_ms = 5000, .readaround = 0}};
	cr_assert_eq(zrfs_dataset_open(&t_fs), 0);
	struct zrfs_view *v = zrfs_view_current(&t_fs);
	cr_assert_eq(zrfs_batches_create(&t_fs, v, specs), 0);
	cr_assert_eq(zrfs_byclass_create(&t_fs, v), 0);
	zrfs_view_put(v);
}

static inline void t_fs_close(void)
{
	zrfs_batches_destroy(&t_fs);
	zrfs_byclass_destroy(&t_fs);
	zrfs_dataset_close(&t_fs);
	t_reply_reset();
}

/* The usual fixture: the dataset made and opened, removed after. */
static inline void t_fs_setup(void)
{
	t_setup();
	t_make_dataset(t_ds);
	t_fs_open(t_ds, NULL);
}

/* Make the newest commit the mount's view, as the following thread would
 * (but for the inode versions and the kernel's notes): a view of its own,
 * also where nothing was committed since. */
static inline void t_refresh(void)
{
	struct zrfs_view *cur = zrfs_view_current(&t_fs), *next, *old;
	zr_dataset *ds;

	cr_assert_eq(zr_reopen(cur->ds, &ds), 0);
	cr_assert_eq(zrfs_view_make(&t_fs, ds, &next), 0);
	zrfs_state_lock(&t_fs);
	old = zrfs_view_publish(&t_fs, next);
	zrfs_state_unlock(&t_fs);
	zrfs_view_put(old);
	zrfs_view_put(cur);
}

static inline void t_fs_teardown(void)
{
	t_fs_close();
	t_cleanup();
}

/* The subtree calls, each with the view dispatch.c would give it. */

/* The view @ino shows through @t, held (NULL: none any more). */
static inline struct zrfs_view *t_view_of(const struct zrfs_subtree *t, fuse_ino_t ino)
{
	struct zrfs_view *cur = zrfs_names_begin(&t_fs);
	struct zrfs_view *v = t->view_of ? t->view_of(&t_fs, cur, ino) : zrfs_view_ref(cur);
	zrfs_names_end(&t_fs);
	return v;
}

/* @name in @parent through subtree @t: the inode, or 0 with *rc set. */
static inline fuse_ino_t t_lookup(const struct zrfs_subtree *t, fuse_ino_t parent,
				  const char *name, int *rc)
{
	fuse_ino_t ino = 0;
	int r = t->lookup(&t_fs, zrfs_names_begin(&t_fs), parent, name, &ino);
	zrfs_names_end(&t_fs);
	if (rc)
		*rc = r;
	return r == 0 ? ino : 0;
}

static inline int t_attr(const struct zrfs_subtree *t, fuse_ino_t ino, struct stat *st)
{
	struct zrfs_view *v = t_view_of(t, ino);
	int rc = v ? t->attr(&t_fs, v, ino, st) : -ESTALE;
	zrfs_view_put(v);
	return rc;
}

static inline int t_entry(const struct zrfs_subtree *t, fuse_ino_t dir, uint64_t pos,
			  struct zrfs_dirent *d)
{
	int rc = t->entry(&t_fs, zrfs_names_begin(&t_fs), dir, pos, d);
	zrfs_names_end(&t_fs);
	return rc;
}

static inline void t_read(const struct zrfs_subtree *t, fuse_ino_t ino, size_t size, off_t off)
{
	struct zrfs_view *v = t_view_of(t, ino);
	if (v)
		t->read(NULL, &t_fs, v, ino, size, off);
	else
		fuse_reply_err(NULL, ESTALE);
	zrfs_view_put(v);
}

/* Read all of @ino through @t in reads of @chunk bytes: malloc'd, *len. */
static inline uint8_t *t_read_all(const struct zrfs_subtree *t, fuse_ino_t ino, size_t chunk,
				  size_t *len)
{
	uint8_t *all = NULL;
	size_t n = 0, got;

	for (;;) {
		t_read(t, ino, chunk, (off_t)n);
		const uint8_t *b = t_bytes(&got);
		all = realloc(all, n + got + 1);
		memcpy(all + n, b, got);
		n += got;
		if (got < chunk)
			break;
	}
	*len = n;
	return all;
}

#endif
