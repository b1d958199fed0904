/*
 * zrfs_i.h - internals of the zrfs FUSE driver shared between its files.
 *
 * The driver is a thin adapter from FUSE requests on a read-only tree to
 * libzrecord and libzrsampler. Its files, from the top down; each calls
 * only files below it, never back up:
 *
 *   main.c            the command: options, mount, session loop
 *   dispatch.c        the FUSE callbacks: each asks the subtree that owns
 *                     its inode (the table of subtrees), and serves the root
 *   tree.c            subtree: meta.json, field directories, FIELD.npy
 *   byclass.c         subtree: /by/LABEL/CLASS/, the ImageFolder view
 *   batches.c         subtree: /.batches, spec and epoch tables, batch names
 *   batch_prefetch.c  batch steps assembled or read ahead, dropped behind
 *   batch_files.c     where a batch file's bytes are assembled
 *   records.c         record files: names, inode numbers, attributes, bytes
 *   npy_view.c        .npy views: the header and the pieces of a range
 *   reply.c           where every reply is built and sent
 *   readahead.c       asking the kernel for pages before they are sent
 *   cache.c           bounded cache of inflated records and batch blobs
 *   scratch.c         per-thread buffers and core readers
 *   dataset.c         the dataset opened, its fields and meta.json; closed
 *
 * Inode numbers are a pure function of the path, so they are stable for as
 * long as the dataset is mounted and need no table (FORGET is a no-op);
 * each subtree owns one part of the 64-bit space:
 *
 *   /                          ZRFS_INO_ROOT (1)                 dispatch.c
 *   /meta.json                 ZRFS_INO_META                     tree.c
 *   /<field>/                  ZRFS_INO_DIR + field              tree.c
 *   /<field>.npy               ZRFS_INO_NPY + field              tree.c
 *   /<field>/<id>[.ext]        ZRFS_INO_REC | field << 40 | id   records.c
 *   /.batches/...              ZRFS_INO_BATCHES, ZRFS_INO_SPEC + spec,
 *                              bits 60-61 = 2 (epochs), 3 (steps) batches.c
 *   /by/...                    ZRFS_INO_BY, ZRFS_INO_BY_FIELD + i,
 *                              ZRFS_INO_BY_CLASS | i << 32 | class byclass.c
 */
#ifndef ZRFS_I_H
#define ZRFS_I_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include "zrecord.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#define ZRFS_INO_ROOT FUSE_ROOT_ID
#define ZRFS_INO_META UINT64_C(2)
#define ZRFS_INO_BATCHES UINT64_C(3)
#define ZRFS_INO_BY UINT64_C(4)
#define ZRFS_INO_DIR UINT64_C(0x1000)
#define ZRFS_INO_NPY UINT64_C(0x2000)
#define ZRFS_INO_BY_FIELD UINT64_C(0x4000)
#define ZRFS_INO_SPEC UINT64_C(0x10000)
#define ZRFS_INO_BY_CLASS (UINT64_C(1) << 55)
#define ZRFS_INO_REC (UINT64_C(1) << 56)
#define ZRFS_INO_EPOCH (UINT64_C(2) << 60)
#define ZRFS_INO_STEP (UINT64_C(3) << 60)
#define ZRFS_ID_BITS 40

#define ZRFS_BATCHES_NAME ".batches"
#define ZRFS_BY_NAME "by"
/* Longest name the tree has: a class name or a spec (ZS_SPEC_MAX) */
#define ZRFS_NAME_MAX 255

/* The .npy header of a view of @rows rows of @row_size bytes each; the rows
 * follow at hdr_len. */
struct zrfs_npy {
	char hdr[ZR_NPY_HEADER_MAX];
	size_t hdr_len;       /* a multiple of 64, as NumPy pads it */
	uint64_t rows;
	uint64_t row_size;
	uint64_t size;        /* hdr_len + rows * row_size */
};

struct zrfs_field {
	const zr_field_spec *spec;
	size_t name_len;
	size_t ext_len;       /* 0: record files have no extension */
	uint64_t record_size; /* fixed-shape fields; 0 = variable */
	bool flate;
	bool has_npy;
	struct zrfs_npy npy;  /* the whole-field view, when has_npy */
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
struct zrfs_batches;
struct zrfs_prefetch;
struct zrfs_byclass;

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
	struct zrfs_prefetch *prefetch;
	struct zrfs_byclass *byclass;
	struct fuse_session *se;
	bool no_open;         /* the kernel lets open/opendir answer ENOSYS */
	atomic_bool warm;     /* the last batch read ahead was all in the page cache */
};

/* dataset.c: open fs->dataset with fs->opts set (messages on stderr): 0 or
 * -1; and close it (also after a failed open). */
int zrfs_dataset_open(struct zrfs *fs);
void zrfs_dataset_close(struct zrfs *fs);

/* ---- subtrees (tree.c, batches.c, byclass.c), iterated by dispatch.c ---- */

/* One entry of a directory listing. */
struct zrfs_dirent {
	char name[ZRFS_NAME_MAX + 1];
	fuse_ino_t ino;
	mode_t type;          /* S_IFDIR or S_IFREG */
	uint64_t pos;         /* its position; a listing goes on at pos + 1 */
};

/*
 * A part of the tree and everything about its inodes. Every function is
 * thread-safe. The root directory belongs to dispatch.c, which asks every
 * subtree for its entries there (lookup and entry with ZRFS_INO_ROOT);
 * every other inode has exactly one owner. Errors are negative codes
 * (-errno or ZR_E*, see zrfs_errno()); "no such name" is -ENOENT.
 */
struct zrfs_subtree {
	const char *name;
	/* Whether @ino (not the root) is one of this subtree's nodes. */
	bool (*owns)(const struct zrfs *fs, fuse_ino_t ino);
	/* @name in directory @parent (the root or an owned node): *out, or
	 * -ENOENT, -ENOTDIR (@parent is a file). */
	int (*lookup)(struct zrfs *fs, fuse_ino_t parent, const char *name, fuse_ino_t *out);
	/* Attributes of an owned node: 0, -ENOENT, -errno. */
	int (*attr)(struct zrfs *fs, fuse_ino_t ino, struct stat *st);
	/* The first entry of directory @dir (the root or an owned node) at
	 * a position >= @pos (positions start at 2, after "." and ".."):
	 * 1 with *out, 0 past the last, or -ENOTDIR, -errno. */
	int (*entry)(struct zrfs *fs, fuse_ino_t dir, uint64_t pos, struct zrfs_dirent *out);
	/* Reply to a read of an owned node (EISDIR for a directory). */
	void (*read)(fuse_req_t req, struct zrfs *fs, fuse_ino_t ino, size_t size, off_t off);
};

extern const struct zrfs_subtree zrfs_tree;
extern const struct zrfs_subtree zrfs_batches;
extern const struct zrfs_subtree zrfs_byclass;

/* dispatch.c: the FUSE operations */
extern const struct fuse_lowlevel_ops zrfs_ops;

/* batches.c: set-up of /.batches (tables and background threads) */
int zrfs_batches_create(struct zrfs *fs, const char *specs);
/* Start the background threads: after fuse_daemonize(), whose fork()
 * would leave them behind in the parent. */
void zrfs_batches_start(struct zrfs *fs);
void zrfs_batches_destroy(struct zrfs *fs);

/* byclass.c: /by exists when a label field has class names and no field is
 * called "by"; the labels are read once, here */
int zrfs_byclass_create(struct zrfs *fs);
void zrfs_byclass_destroy(struct zrfs *fs);

/* ---- records.c: record files ---- */

fuse_ino_t zrfs_rec_ino(unsigned field, uint64_t id);
/* Whether @ino is a record file's number, with its field and id (< N). */
bool zrfs_rec_decode(const struct zrfs *fs, fuse_ino_t ino, unsigned *field, uint64_t *id);
/* The @len characters at @s as a decimal without sign or leading zeros, at
 * most @max: 0, or -ENOENT (not such a number). */
int zrfs_parse_dec(const char *s, size_t len, uint64_t max, uint64_t *out);
/* A record file's name, "<id>" or "<id>.<ext>": 0 with the id (< @n), or
 * -ENOENT; and the name of record @id (never longer than ZRFS_NAME_MAX). */
int zrfs_record_name_parse(const struct zrfs_field *f, const char *name, uint64_t n, uint64_t *id);
void zrfs_record_name_format(const struct zrfs_field *f, uint64_t id, char *buf, size_t cap);
/* Log a failed access to record @id of @field with the library's detail. */
void zrfs_log_record_error(struct zrfs *fs, unsigned field, uint64_t id, int rc);
/* Attributes of a record file: 0, -ENOENT (missing), -errno (logged). */
int zrfs_record_attr(struct zrfs *fs, unsigned field, uint64_t id, struct stat *st);
/* Whether record @id of @field has a file (is present, or cannot be
 * checked: a damaged record is listed and fails when accessed). */
bool zrfs_record_listed(struct zrfs *fs, unsigned field, uint64_t id);
/* Reply to a read of a record file. */
void zrfs_record_read(fuse_req_t req, struct zrfs *fs, unsigned field, uint64_t id, size_t size,
		      off_t off);

/* Where one record's stored bytes are, for replies (npy_view.c, batch_files.c). */
struct zrfs_row {
	const void *mem;      /* the bytes, mapped or in memory; NULL: only in fd */
	int fd;               /* -1: not in a file */
	uint64_t pos;         /* where in fd */
	uint64_t len;         /* stored bytes; 0 for a missing or empty record */
	bool present;         /* false: the record is missing */
};
/* Rows of records @ids[0..n) of raw field @field: where each is stored.
 * 0 or a negative code (logged). */
int zrfs_records_stat(struct zrfs *fs, unsigned field, const uint64_t *ids, size_t n,
		      struct zrfs_row *rows);
/* Where those rows are mapped, into rows[i].mem (left NULL if they are not:
 * replies then read the files); @*g keeps the mappings until released
 * (zr_batch_release) after the reply. */
void zrfs_records_map(struct zrfs *fs, unsigned field, const uint64_t *ids, size_t n,
		      struct zrfs_row *rows, zr_batch **g);
/* Both: zrfs_records_stat, then zrfs_records_map. */
int zrfs_records_locate(struct zrfs *fs, unsigned field, const uint64_t *ids, size_t n,
			struct zrfs_row *rows, zr_batch **g);
/* Rows of records @ids[0..n) of flate field @field for a .npy view: those
 * of the view's row size are inflated into this thread's view scratch
 * (scratch.c, ZRFS_SCRATCH_VIEW), the others get len 0 (read as zeros). */
int zrfs_records_inflate_rows(struct zrfs *fs, unsigned field, const uint64_t *ids, size_t n,
			      struct zrfs_row *rows);

/* ---- npy_view.c: .npy views ---- */

/* A zero row piece comes from this much static zeros at a time. */
#define ZRFS_ZEROS (64u << 10)
int zrfs_npy_header(const zr_field_spec *spec, uint64_t rows, uint64_t row_size,
		    struct zrfs_npy *out);
/* The rows under bytes [@pos, @end) of view @h: [*lo, *hi). */
void zrfs_npy_span(const struct zrfs_npy *h, uint64_t pos, uint64_t end, uint64_t *lo,
		   uint64_t *hi);
struct zrfs_pieces;
/* Add the pieces of bytes [@pos, @end) of view @h (end clamped to its
 * size): the header from @h (which must outlive the reply), then for rows
 * lo, lo + 1, ... the bytes of @rows[i - lo] when it has the row's size,
 * else zeros. @rows covers at least the span of [pos, end). 0 or -ENOMEM. */
int zrfs_npy_pieces(struct zrfs_pieces *p, const struct zrfs_npy *h, const struct zrfs_row *rows,
		    uint64_t lo, uint64_t pos, uint64_t end);

/* ---- reply.c: every reply ---- */

/* The errno (negative) for any code: ZR_ECORRUPT and other damage -EIO, a
 * bad spec -EINVAL, -errno as it is. */
int zrfs_errno(int rc);
void zrfs_reply_err(fuse_req_t req, int rc);
/* Attributes: a directory (0555) or a read-only file of @size bytes. */
void zrfs_dir_attr(const struct zrfs *fs, fuse_ino_t ino, struct stat *st);
void zrfs_file_attr(const struct zrfs *fs, fuse_ino_t ino, uint64_t size, struct stat *st);
/* Reply with bytes [@off, @off + @size) of @len bytes at @data. */
void zrfs_reply_slice(fuse_req_t req, const void *data, uint64_t len, size_t size, off_t off);

/* The pieces of a reply: memory, or byte ranges of chunk files that may
 * also carry the address where the same bytes are mapped. Up to
 * ZRFS_PIECES_LOCAL pieces live in the struct itself (a record read
 * allocates nothing), so it must not be copied once initialised. */
#define ZRFS_PIECES_LOCAL 8
struct zrfs_pieces {
	struct fuse_bufvec *bv;   /* the pieces: in local, or allocated */
	size_t cap;
	_Alignas(struct fuse_bufvec) unsigned char
		local[sizeof(struct fuse_bufvec) + (ZRFS_PIECES_LOCAL - 1) * sizeof(struct fuse_buf)];
};
/* Room for @cap pieces to start with (they grow as added). 0 or -ENOMEM. */
int zrfs_pieces_init(struct zrfs_pieces *p, size_t cap);
void zrfs_pieces_free(struct zrfs_pieces *p);
/* Add @len bytes at @pos of @fd (or at @mem, with @fd -1), merged with the
 * last piece when they follow it in the same file (or in memory): records
 * appended one after the other lie one after the other in their chunk. A
 * file piece may carry @mem, where the same bytes are mapped. 0 or -ENOMEM. */
int zrfs_pieces_add(struct zrfs_pieces *p, int fd, uint64_t pos, const void *mem, uint64_t len);
uint64_t zrfs_pieces_size(const struct zrfs_pieces *p);
/* Reply with the pieces. File pieces that carry their mapping are sent
 * from it with one writev (after asking the kernel for their pages, unless
 * @ahead: a prefetch did); others are read into a buffer with the core's
 * reader, or spliced (-o splice). */
void zrfs_reply_pieces(fuse_req_t req, struct zrfs *fs, const struct zrfs_pieces *p, bool ahead);

/* ---- readahead.c ---- */

/* Ask the kernel to read the file pieces of @p ahead, widened to whole
 * -o readaround windows, but not those already in the page cache; while the
 * dataset is warm (fs->warm), the first ZRFS_WARM_SAMPLE pieces stand for
 * the rest. Returns how many pieces it asked for. */
#define ZRFS_WARM_SAMPLE 16
size_t zrfs_read_ahead(struct zrfs *fs, const struct zrfs_pieces *p);

/* ---- cache.c: contents expensive to make, bounded by bytes ---- */

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
/* Log that a file of @bytes to make is larger than the cache, and return
 * -EFBIG: such files are refused, which bounds the daemon's memory. */
int zrfs_too_big(const struct zrfs *fs, uint64_t bytes);

/* ---- scratch.c: per-thread buffers and readers ---- */

enum zrfs_scratch_use {
	ZRFS_SCRATCH_REPLY,   /* reply.c: pieces read into one buffer */
	ZRFS_SCRATCH_VIEW,    /* records.c: inflated rows of a .npy view */
	ZRFS_SCRATCH_USES
};
/* This thread's buffer for @use, at least @n bytes, valid until the next
 * call for the same use in this thread; NULL: out of memory. */
void *zrfs_scratch(enum zrfs_scratch_use use, size_t n);
/* This thread's core reader of @ds. 0 or -errno. */
int zrfs_scratch_reader(zr_dataset *ds, zr_reader **out);
/* Free the calling thread's scratch now (the main thread, before the
 * dataset closes); other threads' go when they exit. */
void zrfs_scratch_free(void);

#endif /* ZRFS_I_H */
