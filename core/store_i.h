/*
 * store_i.h - internals of libzrecord shared between its source files.
 *
 * Concurrency model (the invariants every file relies on):
 * (a) Table mappings are never unmapped while the handle is open; a chunk's
 *     mappings and fd are not closed while the chunk is pinned (chunk.c:
 *     every read of a chunk pins it, a zr_batch keeps its pins). A mapping
 *     that must grow is extended in place with mremap() or replaced by a
 *     new, larger one; the old one is retired, not unmapped. So a pointer
 *     handed out by zr_gather() stays valid until zr_batch_release(), and a
 *     reader that loaded an old zr_map pointer can still use it: both map
 *     the same page cache.
 * (b) Publication order: bytes are written (pwrite) before the chunk extent
 *     that covers them is raised; the table mapping covers an id before the
 *     length that makes the id visible is raised (release/acquire). So a
 *     reader that sees id < length finds its entry mapped and its bytes within
 *     the chunk's extent.
 * (c) Entries of ids below ds->high belong to a committed state some reader
 *     may be reading (high >= disk_length, and >= the length of every state a
 *     registered reader holds) and are never written in place: changes to
 *     them go to the overlay, which zr_commit() journals, and which is applied
 *     to the tables only when no reader holds a state older than the last
 *     commit (readers.c). Tables never shrink below what a reader may map.
 */
#ifndef ZR_STORE_I_H
#define ZR_STORE_I_H

#include "zrecord.h"
#include "memcheck_i.h"

#include <assert.h>
#include <jansson.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/vfs.h>

_Static_assert(sizeof(size_t) == 8, "libzrecord needs a 64-bit address space");

#define ZR_ENTRY_SIZE 16
/* Growth steps: 1 Mi entries for tables, 1 GiB for chunk mappings. Variables
 * so that tests can make them tiny and exercise growth with little data. */
extern uint64_t zr_table_step;
extern uint64_t zr_chunk_map_step;
/* Tests set it to exercise the pread fallback of zr_reader. */
extern bool zr_uring_disabled;
#define ZR_CHUNK_EMPTY 0xFFFFFFFFu          /* chunk_id of a present, empty record */
#define ZR_FLATE_HDR 8                      /* u64 logical length before the stream */
/* Format 2's entries (codec.c): offsets below 2^40, chunk ids below
 * 0xFFFFFF (which marks an empty value), and the value's CRC-32C in the
 * bits this frees. */
#define ZR_V2_OFFSET_LIMIT (UINT64_C(1) << 40)
#define ZR_V2_CHUNK_LIMIT 0xFFFFFFu
#define ZR_META_MAX (16u << 20)             /* largest meta.json we parse */

/* ---- errors (error.c) ---- */
int zr_err(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define RETURN_IF(cond, code, ...)                                                                 \
	do {                                                                                       \
		if (cond)                                                                          \
			return zr_err((code), __VA_ARGS__);                                        \
	} while (0)
#define FORWARD_IF_ERR(expr)                                                                       \
	do {                                                                                       \
		int zr_rc_ = (expr);                                                               \
		if (zr_rc_ < 0)                                                                    \
			return zr_rc_;                                                             \
	} while (0)

/* ---- system calls, replaceable for fault injection (sys.c) ---- */
struct zr_sys {
	int (*openat)(int dirfd, const char *path, int flags, mode_t mode);
	ssize_t (*pread)(int fd, void *buf, size_t n, off_t off);
	ssize_t (*pwrite)(int fd, const void *buf, size_t n, off_t off);
	int (*fsync)(int fd);
	int (*fdatasync)(int fd);
	int (*renameat)(int olddir, const char *oldp, int newdir, const char *newp);
	int (*unlinkat)(int dirfd, const char *path, int flags);
	int (*ftruncate)(int fd, off_t len);
	int (*fallocate)(int fd, int mode, off_t off, off_t len);
	void *(*mmap)(void *addr, size_t len, int prot, int flags, int fd, off_t off);
	void *(*mremap)(void *old, size_t old_len, size_t new_len, int flags);
	int (*fstatfs)(int fd, struct statfs *sf);
};
extern struct zr_sys zr_sys;
/* Restore the real system calls (tests call it after injecting faults). */
void zr_sys_reset(void);
/* A file the writer writes whole (meta.json.tmp, a journal, a new chunk),
 * made anew, opened @access (O_WRONLY or O_RDWR): whatever a crash or
 * anyone else left at that name (a file, a symbolic link: removed, never
 * followed) goes first. The descriptor, or -1 and errno. */
int zr_create_fresh(int dirfd, const char *name, int access);
/* strerror(), but a symbolic link refused by O_NOFOLLOW (ELOOP) says so. */
const char *zr_open_strerror(int e);
/* File @name of dataset directory @dirfd (@dir in messages) made anew
 * (zr_create_fresh) holding the @n bytes of @buf, fsync'd; removed if that
 * fails. 0 or -errno (said). */
int zr_write_durable(int dirfd, const char *dir, const char *name, const void *buf, size_t n);
/* The same into @tmp, then renamed over @name and the directory fsync'd:
 * @name is the old file or the new, whole, whatever a crash interrupts. */
int zr_replace_durable(int dirfd, const char *dir, const char *tmp, const char *name,
		       const void *buf, size_t n);
/* The size and type of @name under @dirfd ("": @dirfd itself) as its
 * filesystem has them now, bypassing a shared filesystem's client cache:
 * 0 or -errno. */
int zr_fresh_stat(int dirfd, const char *name, struct statx *sx);
/* Whether @fd's filesystem may be shared with other machines. */
bool zr_fs_shared(int fd);
/* pwrite/pread all of it or fail with -errno (short writes retried). */
int zr_write_full(int fd, const void *buf, size_t n, uint64_t off);
/* The same where the file reads as zeros (past everything written to it):
 * runs of ZR_HOLE_MIN (64 KiB) zero bytes or more on whole pages of the file
 * are left unwritten, holes; the file is made @off + @n bytes long at
 * least. 0 or -errno. */
int zr_write_sparse(int fd, const void *buf, size_t n, uint64_t off);
int zr_file_reserve(int fd, uint64_t size);
int zr_read_full(int fd, void *buf, size_t n, uint64_t off);

/* ---- entries ---- */
typedef struct zr_entry {
	uint64_t offset;   /* within the chunk */
	uint32_t chunk_id;
	uint32_t len;      /* physical length; 0 = missing unless chunk_id == ZR_CHUNK_EMPTY */
	uint32_t crc;      /* format 2: CRC-32C of the stored bytes (0 for none) */
} zr_entry;

static inline bool zr_entry_missing(const zr_entry *e)
{
	return e->len == 0 && e->chunk_id != ZR_CHUNK_EMPTY;
}
/* An entry as the two little-endian u64 words of a table slot, in the
 * layout of format @version (FORMAT.md), and back. */
void zr_entry_words(const zr_entry *e, unsigned version, uint64_t w[2]);
void zr_entry_unwords(const uint64_t w[2], unsigned version, zr_entry *e);
void zr_entry_decode(const uint8_t *p, unsigned version, zr_entry *e);
void zr_entry_encode(uint8_t *p, unsigned version, const zr_entry *e);
uint64_t zr_le64(const uint8_t *p);
void zr_put_le64(uint8_t *p, uint64_t v);

/* ---- mappings ---- */
typedef struct zr_map {
	uint8_t *base;
	size_t size;          /* bytes mapped */
	bool alias;           /* retired after growing in place: a newer map owns the bytes */
	struct zr_map *next;  /* on ds->retired */
} zr_map;

/* ---- metadata (meta.c) ---- */

/* Whether the @len bytes at @s are 1..@max portable file-name characters
 * (A-Z a-z 0-9 _ -, and '.' with @allow_dot): names that become file and
 * directory names. */
bool zr_portable(const char *s, size_t len, size_t max, bool allow_dot);

typedef struct zr_unfull {
	uint32_t chunk_id;
	uint64_t write_pos;
	uint32_t records;
} zr_unfull;

typedef struct zr_fielddef {
	zr_field_spec spec;      /* name and ext point into the arrays below */
	char name[ZR_NAME_MAX + 1];
	char ext[ZR_EXT_MAX + 1];
} zr_fielddef;

/* meta.json's "tree": the file tree.<generation> holding the tree's
 * directories and symbolic links (tree.c), its size and CRC-32. */
typedef struct zr_tree_ref {
	uint64_t generation;     /* 0: the dataset keeps none */
	uint64_t bytes, entries;
	uint32_t crc;
} zr_tree_ref;

typedef struct zr_meta {
	unsigned version;        /* the format's: 1, or 2 (values checksummed) */
	uint64_t generation;
	uint64_t length;
	uint64_t high;           /* >= the length of any state readers may hold */
	int64_t created, modified;
	uint32_t chunk_size, chunk_first, chunk_num;
	uint32_t unfull_count;
	zr_unfull *unfull;
	unsigned nfields;
	zr_fielddef *fields;
	json_t *attrs;           /* free-form user metadata, preserved; may be NULL */
	zr_tree_ref tree;        /* the file of directories and symbolic links (tree.c) */
} zr_meta;

int zr_meta_read(int dirfd, const char *dir, const char *name, zr_meta *m);
int zr_meta_parse(const char *buf, size_t len, const char *where, zr_meta *m);
char *zr_meta_dump(const zr_meta *m);
int zr_meta_write(int dirfd, const char *dir, const zr_meta *m);
void zr_meta_free(zr_meta *m);
/* The largest tree file: ZR_TREE_MAX entries of long paths and targets. */
#define ZR_TREE_BYTES_MAX (64u << 20)
/* The tree's directories and links (tree.c): the file @ref names loaded
 * into ds->tree, checked (0, ZR_ECORRUPT naming it, -ESTALE on a shared
 * filesystem that does not show it yet, or a read's error); ds->tree
 * written as the file of generation @generation, durably, its reference
 * in @ref (none when empty); the files of others than the committed one
 * removed (a writer's, after a commit or at open). */
int zr_tree_load(zr_dataset *ds, const zr_tree_ref *ref);
int zr_tree_write(zr_dataset *ds, uint64_t generation, zr_tree_ref *ref);
void zr_tree_sweep(zr_dataset *ds);
int zr_field_check(const zr_field_spec *f);
uint64_t zr_spec_record_size(const zr_field_spec *f);

/* ---- chunks (chunk.c) ---- */
#define ZR_EXTENT_UNKNOWN UINT64_MAX /* a full chunk not opened yet: its file size */
#define ZR_CHUNK_OPEN (UINT64_C(1) << 63) /* in zr_chunk.use: fd (and map) usable */

typedef struct zr_chunk {
	uint32_t id;
	int fd;                   /* -1 while closed (not used yet, or evicted) */
	atomic_uint refs;         /* handles and batches using it: read-only handles
				   * share chunks (zr_reopen); a committed chunk id is
				   * never reused */
	_Atomic uint64_t use;     /* ZR_CHUNK_OPEN | pins: a pinned chunk stays open */
	atomic_bool recent;       /* used since the eviction clock last passed */
	int pool_slot;            /* in the pool of evictable open chunks, or -1 */
	bool rdwr;                /* a writer's: opened read-write when reopened */
	pthread_mutex_t map_lock; /* opening, closing, making or growing the mapping */
	_Atomic(zr_map *) map;    /* NULL until first read */
	zr_map *retired;          /* earlier mappings, valid until the chunk closes */
	_Atomic uint64_t extent;  /* bytes readers may touch: the data written (shared:
				   * the largest any sharing handle's state has), or
				   * ZR_EXTENT_UNKNOWN until a full chunk is opened */
	/* writer side, under the owning writer (or ds->grow_lock when unowned) */
	uint64_t write_pos;       /* next append offset == extent when owned */
	uint64_t reserve_end;     /* under grow_lock: end of an append in progress */
	uint32_t records;         /* appends made into this chunk */
	int owner;                /* writer slot, -1 if none */
	bool writable;            /* unfull and ours: may receive appends */
	bool dirty;               /* written since the last commit */
	/* as of the last commit, to trim back on close */
	uint64_t committed_pos;
	uint32_t committed_records;
	bool committed_unfull;
	bool created;             /* created since the last commit */
} zr_chunk;

/* ---- the overlay of uncommitted changes to committed entries (overlay.c) ---- */
typedef struct zr_overlay_slot {
	uint64_t key;             /* id * nfields + field, + 1; 0 = free */
	uint64_t gen;             /* the generation that commits (or committed) it */
	zr_entry e;
} zr_overlay_slot;

typedef struct zr_overlay {
	pthread_rwlock_t lock;
	_Atomic uint64_t count;   /* read without the lock to skip it when empty */
	uint64_t cap;             /* power of two */
	zr_overlay_slot *slots;
} zr_overlay;

/* ---- fields ---- */
typedef struct zr_fstate {
	zr_fielddef def;
	uint64_t record_size;     /* 0 = variable */
	unsigned align;           /* appended records start at a multiple of this */
	int fd;                   /* the offset table */
	_Atomic(zr_map *) map;
	uint64_t cap;             /* entries the file (and map) can hold */
	uint64_t open_cap;        /* entries the file had at open: never trimmed below */
	atomic_bool unsynced;     /* written or resized since its last fdatasync (a
				   * commit skips a table with nothing to flush) */
} zr_fstate;

struct zr_dataset {
	char *path;
	char *holder;            /* what zr_holder_set() said, or NULL */
	char *holder_mount;      /* the mount zr_holder_mount() named, or NULL */
	uint64_t holder_mount_id;
	int dirfd, chunkdirfd;
	int readersfd;            /* DATASET/readers (readers.c), or -1 */
	unsigned flags;
	unsigned nfields;
	zr_fstate *fields;
	zr_field_spec *specs;     /* for zr_field(), pointing into fields[].def */
	uint32_t chunk_size, chunk_first;
	_Atomic uint32_t chunk_num;
	_Atomic(zr_chunk **) chunks;  /* index = chunk_id - chunk_first */
	uint32_t chunks_cap;
	uint32_t chunks_spare;        /* under grow_lock: unfull chunks no writer holds */
	bool chunks_stale;            /* replaced chunks kept for a reader: sweep later */
	_Atomic uint64_t length;      /* visible records */
	uint64_t disk_length;         /* records of the committed state */
	uint64_t high;                /* see (c): entries below it change via the overlay */
	uint64_t generation;
	unsigned version;             /* the format's (meta.json) */
	int64_t created, modified;
	json_t *attrs;
	json_t *tree;                 /* zr_tree_entry values, as tree.<G> keeps them; may be NULL */
	zr_tree_ref tree_ref;         /* the file of the committed state's */
	bool tree_dirty;              /* zr_tree_set since: the next commit writes a file */
	atomic_bool dirty;            /* something changed since the last commit */
	zr_progress_cb progress;      /* zr_progress_set(), or NULL */
	void *progress_ctx;

	pthread_rwlock_t wlock;   /* appends shared; commit, delete exclusive */
	pthread_mutex_t grow_lock; /* length reservation, table growth, chunk list, retired */
	pthread_mutex_t default_lock; /* the default writer (zr_append, zr_modify) */
	zr_overlay overlay;
	zr_writer *writers[ZR_WRITERS_MAX];
	zr_writer *default_writer;
	zr_map *retired;
	void *retired_arrays;     /* old chunk pointer arrays, freed on close */
};

struct zr_writer {
	zr_dataset *ds;
	int slot;
	zr_chunk *chunk;          /* the chunk we append to, or NULL */
	uint8_t *buf;             /* compression scratch */
	size_t buf_cap;
	uint8_t *stage;           /* a record's small values, written together */
	size_t stage_len;         /* ... from chunk->write_pos on */
};


/* chunk.c */
/* Open chunks are a bounded set: at most zr_chunks_open_max (0: half the
 * descriptor limit) are open at once in the process; the least recently
 * used unpinned ones are closed to make room. Reading a chunk's fd or
 * mapping needs a pin (zr_chunk_use), dropped with zr_chunk_unuse. */
extern unsigned zr_chunks_open_max;
unsigned zr_chunks_open(void); /* chunks open in the pool now (for tests) */
int zr_chunk_use(zr_dataset *ds, zr_chunk *c);
void zr_chunk_unuse(zr_chunk *c);
/* A reference that keeps @c itself (not its fd) alive past its handle. */
void zr_chunk_keep(zr_chunk *c);
void zr_chunk_drop(zr_chunk *c);
/* A writer's chunk that stopped receiving appends may now be closed. */
void zr_chunk_evictable(zr_chunk *c);
/* The chunk's size in bytes, learnt without opening it if need be (0 if
 * the file is not there, or not a regular file). */
uint64_t zr_chunk_extent(zr_dataset *ds, zr_chunk *c);
/* Whether the chunk's file is a regular file, without opening it, and its
 * extent: 0, or an error naming it. */
int zr_chunk_stat(zr_dataset *ds, zr_chunk *c, uint64_t *extent);
zr_chunk *zr_chunk_get(zr_dataset *ds, uint32_t chunk_id);
/* Remove the chunk files no state a writer or reader may hold lists. */
void zr_chunks_sweep(zr_dataset *ds);
/* Open the chunks of @m; a read-only handle takes those @donor (a read-only
 * handle, or NULL) has open instead of opening them again. */
int zr_chunk_open_all(zr_dataset *ds, const zr_meta *m, zr_dataset *donor);
void zr_chunk_close_all(zr_dataset *ds);
void zr_chunk_retire_all(zr_dataset *ds);
int zr_chunk_map(zr_dataset *ds, zr_chunk *c, const uint8_t **base);
int zr_chunk_acquire(zr_dataset *ds, zr_writer *w);
void zr_chunk_release(zr_dataset *ds, zr_writer *w);
/* Whether chunk @c still holds all that was written to it: 0, or -EIO (it
 * was cut short from outside: it takes no more appends). */
int zr_chunk_check_whole(zr_dataset *ds, zr_chunk *c);
int zr_chunk_append(zr_dataset *ds, zr_chunk *c, const void *p1, size_t n1, const void *p2,
		    size_t n2, unsigned align, uint64_t *off_out);
int zr_chunk_trim(zr_dataset *ds, zr_chunk *c, uint64_t len);
void zr_retire(zr_dataset *ds, zr_map *m);
int zr_chunk_name(char *buf, size_t cap, uint32_t id);
/* Room for one more chunk pointer (under grow_lock), and a new chunk
 * object of file @fd (-1: not open): for a writer's new chunk. */
int zr_chunks_grow(zr_dataset *ds);
zr_chunk *zr_chunk_new(uint32_t id, int fd);

/* fault.c: loads from mappings others may cut short (zr_guard_mappings).
 * With zr_guarded, a load runs between sigsetjmp(jump, 0) and
 * zr_fault_jump = NULL with zr_fault_jump = &jump: a SIGBUS then returns
 * from sigsetjmp with 1. */
extern atomic_bool zr_guarded;
extern _Thread_local sigjmp_buf *zr_fault_jump;

/* offset.c */
int zr_table_open(zr_dataset *ds, zr_fstate *f, const char *name, bool create);
int zr_table_reserve(zr_dataset *ds, zr_fstate *f, uint64_t entries);
int zr_table_trim(zr_dataset *ds, zr_fstate *f, uint64_t entries);
void zr_table_close(zr_fstate *f);
void zr_table_retire(zr_dataset *ds, zr_fstate *f);
void zr_entry_store(uint8_t *slot, unsigned version, const zr_entry *e);
/* Check @e against its chunk; on success *out is the chunk, pinned (release
 * with zr_chunk_unuse), or NULL if @e stores no bytes. */
int zr_entry_check(zr_dataset *ds, unsigned field, uint64_t id, const zr_entry *e,
		   zr_chunk **out);
static inline uint8_t *zr_table_slot(zr_fstate *f, uint64_t id)
{
	zr_map *m = atomic_load_explicit(&f->map, memory_order_acquire);
	return m->base + id * ZR_ENTRY_SIZE;
}
/* Entry @id of @field as this handle sees it (its overlay first): 0, or
 * -EIO where the table was cut short under a guarded mapping (fault.c). */
int zr_entry_get(zr_dataset *ds, unsigned field, uint64_t id, zr_entry *e);
int zr_entry_put(zr_dataset *ds, unsigned field, uint64_t id, const zr_entry *e);
/* The stored bytes of @e; *held is their chunk, pinned, or NULL. */
int zr_entry_locate(zr_dataset *ds, unsigned field, uint64_t id, const zr_entry *e,
		    const uint8_t **bytes, zr_chunk **held);
int zr_shape_check(zr_dataset *ds, unsigned field, uint64_t id, uint64_t logical);
/* Format 2: whether @crc, the CRC-32C of @e's stored bytes, is the one
 * its entry holds; the same for the stored bytes at @bytes (0 at once for
 * format 1 and empty values). 0, or ZR_ECORRUPT naming the record and
 * where its bytes are. */
int zr_crc_check(zr_dataset *ds, unsigned field, uint64_t id, const zr_entry *e, uint32_t crc);
int zr_value_check(zr_dataset *ds, unsigned field, uint64_t id, const zr_entry *e,
		   const uint8_t *bytes);
/* Whether reads of @field check values' checksums (ZR_CHECK, or flate). */
static inline bool zr_checks(const zr_dataset *ds, unsigned field)
{
	return ds->version >= 2 &&
	       ((ds->flags & ZR_CHECK) || ds->fields[field].def.spec.compress == ZR_FLATE);
}

/* codec.c */
/* CRC-32C of @n bytes at @p, continuing @crc (0 to start); the second
 * without the CPU's instruction (both must agree: tests). */
uint32_t zr_crc32c(uint32_t crc, const void *p, size_t n);
uint32_t zr_crc32c_portable(uint32_t crc, const void *p, size_t n);
size_t zr_flate_bound(size_t n);
int zr_flate_encode(const void *src, size_t n, uint8_t *dst, size_t cap, size_t *out_len);
int zr_flate_decode(const uint8_t *phys, size_t phys_len, void *dst, uint64_t logical_len);
/* Pieces copied at a time by zr_record_copy(): its memory bound. */
#define ZR_COPY_PIECE (1u << 20)
/* Inflate the flate record of @phys_len bytes at @off of @in_fd, which
 * holds @logical_len bytes, into @out_fd from offset 0, ZR_COPY_PIECE bytes
 * at a time: 0, ZR_ECORRUPT, -ENODATA (@in_fd ends early), -errno; the
 * CRC-32C of the stored bytes into *@crc (unless NULL) on success. */
int zr_flate_copy(int in_fd, uint64_t off, uint64_t phys_len, uint64_t logical_len, int out_fd,
		  uint32_t *crc);
int zr_logical_len(const zr_fstate *f, const zr_entry *e, const uint8_t *bytes, uint64_t *out);

/* overlay.c */
void zr_overlay_init(zr_overlay *o);
void zr_overlay_destroy(zr_overlay *o);
bool zr_overlay_find(zr_dataset *ds, unsigned field, uint64_t id, zr_entry *e);
/* Set (field, id)'s entry, as changed by the commit of @generation. */
int zr_overlay_set(zr_dataset *ds, unsigned field, uint64_t id, const zr_entry *e,
		   uint64_t generation);
void zr_overlay_clear(zr_dataset *ds);
/* Drop the slots of @generation and before (the writer's, under its write
 * lock: nothing changes the overlay meanwhile). 0 or -ENOMEM (kept whole). */
int zr_overlay_keep_after(zr_dataset *ds, uint64_t generation);
/* @dst's overlay becomes a copy of @src's (handles of one dataset, the same
 * fields). 0 or -ENOMEM. */
int zr_overlay_copy(zr_dataset *dst, zr_dataset *src);

/* commit.c */
/* Load the journal of the handle's generation into the overlay; a writer
 * then applies it if no reader holds an older state. */
int zr_journal_load(zr_dataset *ds, bool apply);
/* Writer: apply the overlay to the tables if no reader holds a state older
 * than the handle's; remove the journals nobody can read. */
int zr_journal_settle(zr_dataset *ds);
void zr_meta_from_ds(zr_dataset *ds, zr_meta *m);
int zr_commit_locked(zr_dataset *ds, zr_change_cb changed, void *ctx);

/* store.c */
/* Tell zr_progress_set()'s callback @done of @total, every
 * ZR_PROGRESS_EVERY values and at the end. */
#define ZR_PROGRESS_EVERY 4096
static inline void zr_progress_tell(zr_dataset *ds, uint64_t done, uint64_t total)
{
	if (ds->progress && (done % ZR_PROGRESS_EVERY == 0 || done == total))
		ds->progress(ds->progress_ctx, done, total);
}
/* zr_stat(), with the record's chunk left pinned in *held (or NULL). */
int zr_stat_held(zr_dataset *ds, unsigned field, uint64_t id, zr_record_stat *out,
		 zr_chunk **held);
int zr_reload(zr_dataset *ds, const zr_meta *m);

/* readers.c: the states readers hold (a byte lock per generation) */
int zr_readers_open(zr_dataset *ds);
int zr_readers_hold(zr_dataset *ds, uint64_t generation);
/* A writer's lock seen across machines: 0, -EBUSY (another writer holds
 * it), or an error; 0 where the filesystem has no such locks. */
int zr_readers_claim_writer(zr_dataset *ds);
bool zr_readers_before(const zr_dataset *ds, uint64_t generation);
bool zr_readers_at(const zr_dataset *ds, uint64_t generation);
/* The oldest generation a reader holds below @below, or @below if none. */
uint64_t zr_readers_oldest(const zr_dataset *ds, uint64_t below);

/* changes.c: log the overlay entries set for @generation, durably; the log
 * is compacted past zr_changes_max bytes (a variable for tests) */
extern uint64_t zr_changes_max;
int zr_changes_append(zr_dataset *ds, uint64_t generation);

/* manifest.c: a rebalance's commit point (rebalance.json) */
#define MANIFEST "rebalance.json"
/* The committed manifest, if one is pending: 1 and @m filled, or 0. */
int zr_manifest_pending(int dirfd, const char *dir, uint64_t generation, zr_meta *m);
/* Roll it forward (idempotent): tables renamed, meta.json written. */
int zr_manifest_finish(int dirfd, int chunkdirfd, const char *dir, const zr_meta *m);
/* Write @m as the manifest, durably: the rebalance's commit point. */
int zr_manifest_write(zr_dataset *ds, const zr_meta *m);
/* "FIELD.offset.new": a rebalanced table before the switch. */
int zr_new_table_name(char *buf, size_t cap, const char *field);

#endif /* ZR_STORE_I_H */
