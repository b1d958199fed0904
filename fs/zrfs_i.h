/*
 * zrfs_i.h - internals of the zrfs FUSE driver shared between its files.
 *
 * The driver is a thin adapter: it turns FUSE requests on a read-only tree
 * into calls of libzrecord. The tree and its inode numbers:
 *
 *   /                      ZRFS_INO_ROOT (1)
 *   /meta.json             ZRFS_INO_META
 *   /<field>/              ZRFS_INO_DIR  + field
 *   /<field>.npy           ZRFS_INO_NPY  + field      (fixed-shape fields)
 *   /<field>/<id>[.ext]    ZRFS_INO_REC | field << 40 | id
 *
 * Inode numbers are a pure function of the path, so they are stable for as
 * long as the dataset is mounted and need no table; the kernel can forget
 * them (FORGET is a no-op).
 */
#ifndef ZRFS_I_H
#define ZRFS_I_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include "zrecord.h"
#include "../core/memcheck_i.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#define ZRFS_INO_ROOT FUSE_ROOT_ID
#define ZRFS_INO_META UINT64_C(2)
#define ZRFS_INO_BATCHES UINT64_C(3)
#define ZRFS_BATCHES_NAME ".batches"
#define ZRFS_INO_BY UINT64_C(4)
#define ZRFS_BY_NAME "by"
#define ZRFS_INO_DIR UINT64_C(0x1000)
#define ZRFS_INO_NPY UINT64_C(0x2000)
#define ZRFS_INO_REC (UINT64_C(1) << 56)
#define ZRFS_ID_BITS 40

/* The .npy header of a fixed-shape field; data follows at hdr_len. */
struct zrfs_npy {
	char hdr[ZR_NPY_HEADER_MAX];
	size_t hdr_len;      /* a multiple of 64, as NumPy pads it */
	uint64_t size;       /* hdr_len + N * record size */
};

struct zrfs_field {
	const zr_field_spec *spec;
	size_t name_len;
	size_t ext_len;      /* 0: record files have no extension */
	uint64_t record_size; /* fixed-shape fields; 0 = variable */
	bool flate;
	bool has_npy;
	struct zrfs_npy npy;
};

struct zrfs_opts {
	double timeout;       /* entry and attribute timeouts, seconds */
	uint64_t cache_bytes; /* bound of the inflated-record cache */
	unsigned readahead_kb; /* 0: leave the kernel's default */
	int splice;           /* splice raw bytes into replies (-o splice) */
	unsigned prefetch;    /* batch files assembled ahead of the reader */
	unsigned drop_behind; /* steps behind a reader whose batch pages are dropped */
	uint64_t readaround;  /* window records are read ahead in; 0: exactly them */
};

struct zrfs_cache;

struct zrfs {
	zr_dataset *ds;
	const char *dataset;  /* as given on the command line */
	uint64_t n;           /* records */
	unsigned nfields;
	struct zrfs_field *fields;
	char *meta;           /* meta.json as served */
	size_t meta_len;
	struct timespec mtime;
	uid_t uid;
	gid_t gid;
	struct zrfs_opts opts;
	struct zrfs_cache *cache;
	struct zrfs_batches *batches;
	struct fuse_session *se;
	struct zrfs_byclass *byclass;
	bool no_open;         /* the kernel lets open/opendir answer ENOSYS */
	atomic_bool warm;     /* the last batch read ahead was all in the page cache */
};

/* A directory listing being filled (tree.c). */
struct zrfs_listing {
	fuse_req_t req;
	bool plus;
	char *buf;
	size_t size, used;
};

/* tree.c: names, inodes, attributes, directories */
void zrfs_base_attr(const struct zrfs *fs, fuse_ino_t ino, mode_t mode, struct stat *st);
void zrfs_file_size(struct stat *st, uint64_t size);
/* Add one entry; false when the buffer is full. */
bool zrfs_list_add(struct zrfs_listing *l, struct zrfs *fs, const char *name, fuse_ino_t ino,
		   mode_t type, off_t next);
/* "." (@ino) and ".." at positions 0 and 1, from @off; false when full. */
bool zrfs_list_dots(struct zrfs_listing *l, struct zrfs *fs, fuse_ino_t ino, off_t off);
extern const struct fuse_lowlevel_ops zrfs_ops;
int zrfs_errno(int rc);
void zrfs_log_record_error(struct zrfs *fs, unsigned field, uint64_t id, int rc);
void zrfs_ll_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void zrfs_ll_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void zrfs_ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi);
void zrfs_ll_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			 struct fuse_file_info *fi);
int zrfs_record_name(const struct zrfs_field *f, const char *name, uint64_t n, uint64_t *id);

/* read.c: file contents */
/* Reply with the pieces of @bv (memory or file ranges). File ranges that
 * also carry their mapping (mem) are sent from it with one writev, after
 * asking the kernel for their pages unless @ahead (a prefetch did); others
 * are read into one buffer (one io_uring submission), or spliced. */
void zrfs_reply_bufvec(fuse_req_t req, struct zrfs *fs, struct fuse_bufvec *bv, bool ahead);
void zrfs_ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void zrfs_ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		  struct fuse_file_info *fi);

/* batches.c: /.batches, sampler-ordered batch files */
struct zrfs_batches;
int zrfs_batches_create(struct zrfs *fs, const char *specs);
void zrfs_batches_start(struct zrfs *fs);
void zrfs_batches_destroy(struct zrfs *fs);
bool zrfs_batches_owns(fuse_ino_t ino);
int zrfs_batches_lookup(struct zrfs *fs, fuse_ino_t parent, const char *name, fuse_ino_t *out);
int zrfs_batches_attr(struct zrfs *fs, fuse_ino_t ino, struct stat *st);
int zrfs_batches_list(struct zrfs_listing *l, struct zrfs *fs, fuse_ino_t ino, off_t off);
void zrfs_batches_read(fuse_req_t req, struct zrfs *fs, fuse_ino_t ino, size_t size, off_t off);

/* byclass.c: /by/<label>/<class>/, the ImageFolder view */
struct zrfs_byclass;
int zrfs_byclass_create(struct zrfs *fs);
void zrfs_byclass_destroy(struct zrfs *fs);
/* /by exists: some label field has class names, and no field is called "by" */
bool zrfs_byclass_shown(const struct zrfs *fs);
bool zrfs_byclass_owns(fuse_ino_t ino);
int zrfs_byclass_lookup(struct zrfs *fs, fuse_ino_t parent, const char *name, fuse_ino_t *out);
int zrfs_byclass_attr(struct zrfs *fs, fuse_ino_t ino, struct stat *st);
int zrfs_byclass_list(struct zrfs_listing *l, struct zrfs *fs, fuse_ino_t ino, off_t off);

/* npy.c */
int zrfs_npy_header(const zr_field_spec *spec, uint64_t rows, uint64_t record_size,
		    struct zrfs_npy *out);

/* cache.c: contents expensive to make, bounded by bytes */
struct zrfs_cached;
/* Make the contents of a missing entry: *data from zrfs_cache_alloc() (may
 * be NULL when *len is 0); 0 or -errno, having freed whatever it made. */
typedef int (*zrfs_loader)(void *ctx, uint8_t **data, uint64_t *len);
int zrfs_cache_create(struct zrfs_cache **out, uint64_t bytes);
void zrfs_cache_destroy(struct zrfs_cache *c);
/* The contents under @key, made by @load on a miss; release after use. */
int zrfs_cache_get(struct zrfs_cache *c, uint64_t key, zrfs_loader load, void *ctx,
		   struct zrfs_cached **out, const uint8_t **data, uint64_t *len);
bool zrfs_cache_has(struct zrfs_cache *c, uint64_t key);
/* Drop @key if it is cached and not being made (users keep their reference). */
void zrfs_cache_forget(struct zrfs_cache *c, uint64_t key);
/* Buffers for loaders: reused from dropped entries when one fits. */
uint8_t *zrfs_cache_alloc(struct zrfs_cache *c, size_t n);
void zrfs_cache_free(struct zrfs_cache *c, uint8_t *data);
void zrfs_cache_release(struct zrfs_cache *c, struct zrfs_cached *e);
/* read.c: ask the kernel to read the file pieces of @bv ahead, widened to
 * whole -o readaround windows, but not those already in the page cache;
 * while the dataset is warm (fs->warm), the first ZRFS_WARM_SAMPLE pieces
 * stand for the rest */
#define ZRFS_WARM_SAMPLE 16
void zrfs_read_ahead_bufvec(struct zrfs *fs, const struct fuse_bufvec *bv);
/* read.c: add @len bytes at @pos of @fd (or of @mem, with @fd -1) to @bv,
 * merging with the last piece when they are adjacent in the same file (or
 * in memory): records appended one after the other lie one after the other
 * in their chunk. A file piece may also carry @mem, where the same bytes are
 * mapped. @bv has room for one more piece. */
void zrfs_add_piece(struct fuse_bufvec *bv, int fd, off_t pos, const void *mem, size_t len);
/* read.c: log that a file of @bytes to make is larger than the cache, and
 * return -EFBIG: such files are refused, which bounds the daemon's memory */
int zrfs_too_big(struct zrfs *fs, uint64_t bytes);
/* read.c: the inflated bytes of a flate record, through the cache */
int zrfs_flate_get(struct zrfs *fs, unsigned field, uint64_t id, struct zrfs_cached **out,
		   const uint8_t **data, uint64_t *len);

#endif /* ZRFS_I_H */
