/*
 * zrecord.h - the zrecord dataset store (libzrecord).
 *
 * A dataset is a directory holding N records. Every record has the same set
 * of fields (e.g. "image", "label"); each field of each record is a byte
 * string, possibly missing. The bytes of all records live in append-only
 * chunk files; each field has an offset table that maps a record id to the
 * place of its bytes. The on-disk format is described in core/FORMAT.md.
 *
 * Conventions
 * - Functions returning int return 0 (or a count) on success and a negative
 *   error code on failure: -errno (e.g. -ENOENT, -EBUSY, -ENOSPC) or one of
 *   the ZR_E* codes below. zr_strerror() describes any code; zr_errmsg()
 *   gives the detail (which file, which id, what was wrong).
 * - "Not found" is always -ENOENT: a field name that does not exist, a record
 *   id >= zr_length(), a missing record where a present one is required.
 * - Handles are opaque, created through an out-parameter and destroyed by a
 *   function that accepts NULL.
 * - Nothing is visible to other processes until zr_commit(). A crash at any
 *   instant leaves the state of the last commit readable and verify-clean.
 * - A read-only handle reads one committed state, the one current when it
 *   was opened, for as long as it is open, while writers in any process
 *   commit: writers never change what an open reader's state consists of
 *   (core/FORMAT.md, "Readers and writers").
 *
 * Thread safety
 * - A zr_dataset may be used by many threads at once. Reads (zr_stat,
 *   zr_gather, zr_reader_*) run concurrently with each other and with
 *   appends and commits. zr_modify, zr_delete and zr_commit serialise
 *   internally; a read that races with a modify/delete of the same id sees
 *   either version.
 * - A zr_writer or zr_reader belongs to one thread at a time.
 */
#ifndef ZRECORD_H
#define ZRECORD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(ZR_BUILDING_LIBRARY)
#define ZR_API __attribute__((visibility("default")))
#else
#define ZR_API
#endif

/** Newest version of the on-disk format, which zr_create() writes by
 * default; the library reads and writes every version from 1 on (2: each
 * stored value carries a CRC-32C). */
#define ZR_FORMAT_VERSION 2

/* Project error codes, below errno's range (cf. LMDB's -30799...). */
#define ZR_ECORRUPT (-30800) /**< on-disk data is inconsistent or damaged */
#define ZR_EVERSION (-30801) /**< format version not supported */
#define ZR_EINVAL_SPEC (-30802) /**< a field or option specification is malformed */

#define ZR_NAME_MAX 64 /**< longest field name, in bytes */
#define ZR_EXT_MAX 16 /**< longest file extension, in bytes */
#define ZR_SHAPE_MAX 8 /**< most dimensions of a fixed shape */
#define ZR_FIELDS_MAX 256 /**< most fields in one dataset */
#define ZR_WRITERS_MAX 4 /**< most zr_writer handles open at once */
#define ZR_RECORD_MAX 0xFFFFFFF0u /**< largest stored (physical) record */
#define ZR_LENGTH_MAX (UINT64_C(1) << 40) /**< most records in one dataset */
#define ZR_CHUNK_SIZE_DEFAULT 65536 /**< records per chunk by default */

typedef struct zr_dataset zr_dataset;
typedef struct zr_writer zr_writer;
typedef struct zr_batch zr_batch;
typedef struct zr_reader zr_reader;

/** Element type of a field, for the layers above; the store keeps bytes. */
typedef enum zr_dtype {
	ZR_U8, ZR_U16, ZR_U32, ZR_U64,
	ZR_I8, ZR_I16, ZR_I32, ZR_I64,
	ZR_F16, ZR_F32, ZR_F64,
	ZR_BYTES,
	ZR_BOOL, /**< one byte, 0 or 1 (numpy's bool) */
	ZR_DTYPE_COUNT
} zr_dtype;

/** How a field's records are stored. */
typedef enum zr_compress {
	ZR_RAW,   /**< bytes as given; gather is zero-copy */
	ZR_FLATE, /**< one zlib stream per record, logical length kept beside it */
	ZR_COMPRESS_COUNT
} zr_compress;

/** Description of a field, as given to zr_create() and returned by zr_field(). */
typedef struct zr_field_spec {
	const char *name;    /**< 1..ZR_NAME_MAX bytes; no '/', no NUL, no leading '.' */
	zr_dtype dtype;      /**< element type */
	zr_compress compress;
	int fixed;           /**< 1: every present record has shape[0..ndim) */
	unsigned ndim;       /**< dimensions when fixed; 0 = one scalar element */
	uint64_t shape[ZR_SHAPE_MAX];
	const char *ext;     /**< file extension without the dot, or NULL */
} zr_field_spec;

/** Options for zr_create(); zero-initialise for defaults. */
typedef struct zr_create_opts {
	uint32_t chunk_size; /**< records per chunk; 0 = ZR_CHUNK_SIZE_DEFAULT */
	const char *attrs;   /**< free-form metadata kept in meta.json: a JSON object, or NULL */
	unsigned version;    /**< format version: 0 = ZR_FORMAT_VERSION; 1 for versions of
			      * the library before checksums (no value is checked) */
} zr_create_opts;

/** Flags for zr_open(). */
enum {
	ZR_RDONLY = 0, /**< read committed state; never writes */
	ZR_RDWR = 1,   /**< take the writer lock; fails with -EBUSY if held */
	ZR_CHECK = 2,  /**< check every raw value read against its checksum too
			* (format 2: flate values always are; zr_verify() checks all) */
	ZR_WAIT = 4,   /**< with ZR_RDWR: a writer on this machine that is ending
			* (zr_holder_ending) is waited for, up to 60 s */
};

/** The bytes of one field of one record. data == NULL means missing. */
typedef struct zr_value {
	const void *data;
	size_t len;
} zr_value;

/** A record as returned by zr_gather(). data == NULL means missing. */
typedef struct zr_slice {
	const void *data;
	uint64_t len;
} zr_slice;

/** Where one record's bytes are, as returned by zr_stat(). */
typedef struct zr_record_stat {
	int present;          /**< 0 = missing */
	uint64_t logical_len; /**< bytes a reader gets */
	uint32_t physical_len; /**< bytes stored (0 for missing or empty) */
	uint32_t chunk_id;
	uint64_t offset;      /**< within the chunk file */
	int fd;               /**< the chunk file, read-only, owned by the dataset;
				   -1 when nothing is stored. Chunk files are opened
				   on first use and a bounded number kept open (see
				   zr_open()): the fd stays open while a zr_batch of
				   the same handle holding this record is alive, and
				   otherwise may be closed by any later call that
				   opens another chunk. Gather first, then stat. */
	uint32_t crc;         /**< CRC-32C of the stored bytes (format 2; else 0) */
} zr_record_stat;

/** Dataset-wide figures, as computed by zr_info(). */
typedef struct zr_info {
	uint64_t length;        /**< committed + appended records */
	uint64_t generation;    /**< commit counter */
	uint32_t chunk_size;    /**< records per chunk */
	uint32_t chunk_count;
	uint64_t chunk_bytes;   /**< sum of chunk file extents */
	uint64_t live_bytes;    /**< sum of physical lengths of live records */
	uint64_t logical_bytes; /**< sum of logical lengths of live records */
	uint64_t missing;       /**< missing (field, record) pairs */
	double utilisation;     /**< live_bytes / chunk_bytes (1.0 when empty) */
	int64_t mtime;          /**< time of the last commit, seconds since the epoch */
} zr_info;

/* ---- errors ------------------------------------------------------------ */

/** Describe an error code (negative errno or ZR_E*). Static string. */
ZR_API const char *zr_strerror(int code);

/**
 * Detail of the most recent failure in the calling thread, e.g.
 * "data/label.offset: holds 10 entries, meta.json says 12". Owned by the
 * library, valid until the next call into it from this thread.
 * @param[in] ds the handle used, or NULL (e.g. after a failed zr_open()).
 */
ZR_API const char *zr_errmsg(const zr_dataset *ds);

/* ---- lifetime ---------------------------------------------------------- */

/**
 * A file in a dataset's directory while an import fills it (made first,
 * in an empty directory, and locked with flock by the importer; removed
 * once every record is committed). Left unlocked, it says an import was
 * killed: `zr import` into that directory starts over.
 */
#define ZR_IMPORT_LOCK "import.lock"

/**
 * Create an empty dataset in directory @p dir, which must not exist or be
 * empty (but for ZR_IMPORT_LOCK). meta.json is written last, so a crash
 * leaves no half dataset.
 * @return 0, -EEXIST (not empty), ZR_EINVAL_SPEC (bad field), -errno.
 */
ZR_API int zr_create(const char *dir, const zr_field_spec *fields, unsigned nfields,
		     const zr_create_opts *opts);

/**
 * Open the dataset in @p dir. ZR_RDWR takes an exclusive lock on the
 * directory; a second writer gets -EBUSY. A pending journal from an
 * interrupted commit is replayed (ZR_RDWR) or overlaid in memory (ZR_RDONLY).
 * Chunk files are opened on first use, not here (opening costs no system
 * call per chunk), and at most half the process's descriptor limit (RLIMIT_NOFILE,
 * at most 16,384) are open at once across all handles: the least recently
 * used are closed again, never while a batch or a read uses them. So a
 * missing or damaged chunk file is reported by the reads of its records
 * (and by zr_info_get() and zr_verify()), not by the open. With ZR_CHECK
 * (or'ed in) every raw value read is checked against its checksum too, as
 * flate ones always are (format 2; a mismatch is ZR_ECORRUPT naming the
 * chunk, offset and record); zr_reopen() and zr_snapshot() keep it. With
 * ZR_WAIT, a writer refused by a holder on this machine that is ending
 * (zr_holder_ending) waits for it to exit, up to 60 s, then tries again.
 * @param[out] out the handle; release with zr_close().
 * @return 0, -ENOENT, -EBUSY, ZR_ECORRUPT, ZR_EVERSION, -errno.
 */
ZR_API int zr_open(zr_dataset **out, const char *dir, unsigned flags);

/**
 * Close the handle. Changes since the last zr_commit() are discarded and the
 * files are trimmed to the committed data. Invalidates every pointer
 * obtained from the handle. Accepts NULL.
 */
ZR_API void zr_close(zr_dataset *ds);

/**
 * Survive tables cut short by others: offset tables are read through shared
 * mappings, and a load from the pages a truncation in place took away (cp
 * of a backup over FIELD.offset, rsync --inplace, a partial restore) raises
 * SIGBUS, which kills the process. After this call such a load fails the
 * call that made it with -EIO, for the entries it lost; any other SIGBUS
 * goes to the handler installed before, or takes the default action.
 * Installs a process-wide SIGBUS handler (zrfs calls it): call it once,
 * early, before other threads start. Idempotent. @return 0 or -errno
 */
ZR_API int zr_guard_mappings(void);

/* ---- shape --------------------------------------------------------------- */

/** Number of visible records: committed plus appended since. */
ZR_API uint64_t zr_length(const zr_dataset *ds);
ZR_API unsigned zr_field_count(const zr_dataset *ds);
/** Field @p i; the strings are owned by the handle. NULL if out of range. */
ZR_API const zr_field_spec *zr_field(const zr_dataset *ds, unsigned i);
/** Index of the field called @p name, or -ENOENT. */
ZR_API int zr_field_find(const zr_dataset *ds, const char *name);
/** Bytes of one present record of a fixed-shape field, 0 if variable. */
ZR_API uint64_t zr_field_record_size(const zr_dataset *ds, unsigned field);
/** Element size of a dtype in bytes (1 for ZR_BYTES). */
ZR_API unsigned zr_dtype_size(zr_dtype t);
ZR_API const char *zr_dtype_name(zr_dtype t);
ZR_API const char *zr_compress_name(zr_compress c);
/** Parse "u8".."f64"/"bool"/"bytes" and "raw"/"flate". Return 0 or ZR_EINVAL_SPEC. */
ZR_API int zr_dtype_parse(const char *s, zr_dtype *out);
ZR_API int zr_compress_parse(const char *s, zr_compress *out);
/** 0 if @p name is a valid field name, else ZR_EINVAL_SPEC. */
ZR_API int zr_name_check(const char *name);
/**
 * The dataset's free-form metadata (zr_create_opts.attrs) as JSON text,
 * "{}" if there is none. The caller frees it with free(); NULL if out of
 * memory.
 */
ZR_API char *zr_attrs(const zr_dataset *ds);

/** The directory the handle was opened on. */
ZR_API const char *zr_path(const zr_dataset *ds);

/**
 * Compute dataset-wide figures. Scans every offset table and looks at every
 * chunk file: O(N + chunks).
 * @return 0, or ZR_ECORRUPT / -ELOOP naming a chunk file that is missing or
 *         not a regular file.
 */
ZR_API int zr_info_get(zr_dataset *ds, zr_info *out);

/**
 * For the whole process, from now on: whether reads through chunk mappings
 * are random (@p on non-zero), so that a page fault reads the pages it needs and not
 * the kernel's read-around of the device's read_ahead_kb (MiBs, most of it
 * thrown away when records are read in random order from a dataset larger
 * than memory). Off by default; applies to mappings made afterwards.
 */
ZR_API void zr_advise_random(int on);

/** Bytes in the dataset's chunk files (zr_info.chunk_bytes), in O(chunks):
 * chunks not read yet are looked at with a stat each. */
ZR_API uint64_t zr_chunk_bytes(zr_dataset *ds);
/** zr_chunk_bytes() estimated with at most 64 system calls: the chunks not
 * read yet count as the mean size of up to 64 of them, spread over the ids
 * (exact for up to 64 chunks). For decisions, not for reports. */
ZR_API uint64_t zr_chunk_bytes_estimate(zr_dataset *ds);

/**
 * Where record @p id of @p field is, and its logical length, in O(1): the
 * stored bytes are out->physical_len bytes of out->fd at out->offset, so a
 * caller may read or splice them itself (never write through the fd).
 * @return 0 (out->present = 0 for a missing value), -ENOENT for a bad field
 *         or id, ZR_ECORRUPT for an entry outside its chunk.
 */
ZR_API int zr_stat(zr_dataset *ds, unsigned field, uint64_t id, zr_record_stat *out);

/**
 * Whether record @p id of @p field has a value, in O(1) without reading
 * anything but its entry.
 * @return 1 present, 0 missing, -ENOENT for a bad field or id
 */
ZR_API int zr_present(zr_dataset *ds, unsigned field, uint64_t id);

/**
 * Copy the logical bytes of one record into @p dst, reading the chunk file
 * with pread (not through the mapping: a chunk truncated under a reader
 * gives an error, never SIGBUS) and inflating flate records. Thread-safe.
 * @param cap bytes at @p dst; the record's logical length must fit
 * @return the logical length, -ENOENT (missing value, bad field or id),
 *         -ENOBUFS (cap too small), ZR_ECORRUPT or -EIO (damaged record)
 */
ZR_API int64_t zr_record_load(zr_dataset *ds, unsigned field, uint64_t id, void *dst,
			      size_t cap);

/** The shortest run of zeros the store leaves unwritten, a hole (on whole
 *  pages of the file): a value shorter than this has none. */
#define ZR_HOLE_MIN (64 * 1024)

/**
 * Write the logical bytes of one record to @p fd from its offset 0, as
 * zr_record_load() reads them but at most 1 MiB at a time (flate records
 * inflated as they are read), so that a value of any size is copied with
 * bounded memory. @p fd is not truncated. Into an empty regular file, runs
 * of ZR_HOLE_MIN zeros or more on whole pages are left as holes (a sparse
 * value stays sparse). Thread-safe.
 * @return the logical length, -ENOENT (missing value, bad field or id),
 *         ZR_ECORRUPT or -EIO (damaged record), -errno (writing @p fd)
 */
ZR_API int64_t zr_record_copy(zr_dataset *ds, unsigned field, uint64_t id, int fd);

/**
 * Where lseek(2) would find the next data (@p whence SEEK_DATA) or the next
 * hole (SEEK_HOLE) at or after @p off in a file holding one record's value:
 * a hole is a run of zeros the chunk file leaves unwritten (see
 * zr_record_copy), and the value's end counts as one. A flate value, or
 * one on a filesystem that tells no holes, is data to its end. Nothing is
 * read. Thread-safe.
 * @return the offset, -ENXIO (@p off at or past the end; SEEK_DATA: no
 *         data after it), -ENOENT (missing value, bad field or id),
 *         -EINVAL (another @p whence), ZR_ECORRUPT or -EIO (the chunk)
 */
ZR_API int64_t zr_record_seek(zr_dataset *ds, unsigned field, uint64_t id, uint64_t off,
			      int whence);

/**
 * Bytes of one record's value that are holes (see zr_record_seek): its
 * logical length less these is what it takes on disk, as stat(2)'s
 * st_blocks counts a sparse file. Thread-safe.
 * @return the bytes, or an error as zr_record_seek()
 */
ZR_API int64_t zr_record_holes(zr_dataset *ds, unsigned field, uint64_t id);

/* ---- following a dataset that changes ------------------------------------- */

/** A record that may have changed: zr_changes() and zr_commit_changes() call
 * it once or more per (field, id). */
typedef void (*zr_change_cb)(void *ctx, unsigned field, uint64_t id);

/**
 * The generation of the committed state the handle reads (meta.json's
 * commit counter). A read-only handle reads that one state for as long as it
 * is open, whatever writers commit meanwhile: to follow the dataset, open a
 * new handle and compare generations.
 */
ZR_API uint64_t zr_generation(const zr_dataset *ds);

/** The dataset's format version: 2 (each stored value carries a CRC-32C,
 * zr_verify() checks) or 1 (made by earlier versions or asked for). */
ZR_API unsigned zr_format_version(const zr_dataset *ds);

/**
 * Say who holds the writer lock of a dataset opened ZR_RDWR, for the message
 * a second writer gets: the calling process (its pid, as after a fork that
 * kept the lock) and @p what, one line (e.g. "zrfs mount on /mnt/ds").
 * @return 0, -EROFS (opened read-only), -EINVAL (@p what has a newline)
 */
ZR_API int zr_holder_set(zr_dataset *ds, const char *what);

/**
 * The process that holds the writer lock of the dataset in @p dir, when it
 * runs on this machine: the pid DATASET/writer names (zr_holder_set) when
 * it names this host. Meant for a writer refused with -EBUSY that may wait
 * for the holder to exit; the lock itself is not looked at (the file may
 * name the last writer if the lock is free or was just taken).
 * @return the pid, or 0: no writer named, one on another machine, unreadable
 */
ZR_API long zr_holder_pid(const char *dir);

/**
 * Say that this writer serves the mount @p mount_id (mountinfo's first
 * field, statx's stx_mnt_id) on @p mountpoint, an absolute path, and ends
 * once that is unmounted (committing what it holds, then closing): a
 * writer on this machine refused by it after that may wait for it
 * (zr_holder_ending, ZR_WAIT). NULL: it serves none.
 * @return 0, -EROFS (opened read-only), -EINVAL (not an absolute path of
 * one line)
 */
ZR_API int zr_holder_mount(zr_dataset *ds, const char *mountpoint, uint64_t mount_id);

/**
 * The process on this machine that holds the writer lock of the dataset in
 * @p dir, as zr_holder_pid() finds it, and is ending: the mount it serves
 * (zr_holder_mount) is gone from this mount namespace. The mount point is
 * looked at without asking its filesystem (cached attributes), so a hung
 * mount does not hang this.
 * @return the pid, or 0: none such
 */
ZR_API long zr_holder_ending(const char *dir);

/**
 * Wait up to @p ms milliseconds for process @p pid (a holder named by
 * zr_holder_pid()) to exit.
 * @return 1 when it has exited (or no such process runs), 0 when not yet
 */
ZR_API int zr_holder_wait(long pid, unsigned ms);

/**
 * A read-only handle of the state writer @p w has just committed, made from
 * what the writer holds rather than read back from the dataset's directory
 * (no meta.json, journal or change log is read): what zr_reopen(@p donor)
 * would open right after that commit, and reading the same bytes. Chunk
 * files are shared with read-only handle @p donor (NULL: none), as
 * zr_reopen() shares them. Nothing may change @p w between its commit and
 * this call (call it where the commits are made).
 * @param[out] out the handle, independent of @p w once made; release with
 *             zr_close().
 * @return 0; -EINVAL (@p w opened read-only, @p donor for writing); -EBUSY
 *         (@p w has changes not committed); -ENOMEM, -errno.
 */
ZR_API int zr_snapshot(zr_dataset *w, zr_dataset *donor, zr_dataset **out);

/**
 * Open the dataset's current committed state read-only, as zr_open() does,
 * sharing with @p prev (a read-only handle of the same dataset, which stays
 * valid and unchanged) the chunk files it has open: the cost is that of the
 * chunks written since, not of all of them, and the two handles together
 * hold each chunk file open once. For following a dataset: keep the old
 * handle while it is in use, reopen when meta.json changes.
 * @param[out] out the new handle; release with zr_close().
 * @return as zr_open(); -EINVAL if @p prev was opened for writing; -ESTALE
 *         if a chunk file of the new state is shorter here than the state
 *         says: on a filesystem shared with other machines, bytes another
 *         machine committed may reach this one a moment later (try again)
 */
ZR_API int zr_reopen(zr_dataset *prev, zr_dataset **out);


/**
 * The records whose values may differ between generation @p since and the
 * handle's, among the ids both states have (ids below both lengths): each
 * is passed to @p cb at least once (a few that did not change may be too).
 * Ids beyond one state's length are new or gone; the lengths tell which.
 * Costs O(changes logged since @p since), not O(records).
 * @return 0; -ESTALE when the change log does not reach back to @p since
 *         (then any record may have changed); -EINVAL (@p since is newer
 *         than the handle's generation); -errno
 */
ZR_API int zr_changes(zr_dataset *ds, uint64_t since, zr_change_cb cb, void *ctx);

/* ---- writing ------------------------------------------------------------ */

/**
 * Append one record. @p values holds one zr_value per field, in field order;
 * a value with data == NULL stores the field as missing.
 * @param[out] id_out the new record's id, or NULL.
 * @return 0, -EROFS (opened read-only), -EINVAL (wrong size for a fixed
 *         shape, record too large), -ENOSPC, -errno. A record that fails
 *         is not appended: the length stays as it was, and the next append
 *         takes its id.
 */
ZR_API int zr_append(zr_dataset *ds, const zr_value *values, uint64_t *id_out);

/**
 * Append @p n records in order under one lock: @p values is
 * n * zr_field_count() values, row-major (record i's field f at
 * values[i * zr_field_count() + f]).
 * @param[out] first_id_out the first new record's id, or NULL.
 * @return 0, or the error of the first record that fails (see zr_append());
 *         the records before it are appended, it and the rest are not.
 */
ZR_API int zr_append_many(zr_dataset *ds, const zr_value *values, size_t n,
			  uint64_t *first_id_out);

/**
 * A writer appends into a chunk of its own, so that up to ZR_WRITERS_MAX
 * threads can append in parallel. Close writers before zr_close().
 * @return 0, -EROFS, -EMFILE (ZR_WRITERS_MAX writers open), -errno.
 */
ZR_API int zr_writer_open(zr_dataset *ds, zr_writer **out);
ZR_API int zr_writer_append(zr_writer *w, const zr_value *values, uint64_t *id_out);
/**
 * Reserve ids [*first, *first + n) for zr_writer_put(): the length grows by
 * @p n at once and the new records read as missing until written. With it,
 * parallel writers produce a deterministic record order.
 */
ZR_API int zr_reserve(zr_dataset *ds, uint64_t n, uint64_t *first);
/** Write record @p id, which must have been reserved since the last commit. */
ZR_API int zr_writer_put(zr_writer *w, uint64_t id, const zr_value *values);
/** Finish the writer's chunk (trimmed if full). Accepts NULL. */
ZR_API void zr_writer_close(zr_writer *w);

/**
 * Replace field @p field of record @p id: the new bytes are appended and the
 * entry redirected; the old bytes become dead space (see zr_rebalance()).
 * v.data == NULL makes the field missing.
 */
ZR_API int zr_modify(zr_dataset *ds, unsigned field, uint64_t id, zr_value v);

/**
 * Give record @p to the value record @p from has of @p field, and make
 * @p from's missing: the entry moves, no byte is copied or written (a
 * rename of a record's file does this). Visible like any change at the next
 * zr_commit(). @p from == @p to changes nothing.
 * @return 0, -ENOENT (a bad field or id), -EROFS, -errno.
 */
ZR_API int zr_move(zr_dataset *ds, unsigned field, uint64_t from, uint64_t to);

/**
 * Delete record @p id: the last record (id N-1) moves into its place and the
 * length becomes N-1. To delete a set of ids, delete them in descending
 * order. @return 0, -ENOENT (id >= N), -EROFS, -errno.
 */
ZR_API int zr_delete(zr_dataset *ds, uint64_t id);

/**
 * Make every change so far durable and visible: flush chunks and tables,
 * then atomically replace meta.json. Needs every zr_writer idle.
 * @return 0, -ENOSPC, -EIO, -errno; on failure the previous commit stands.
 */
ZR_API int zr_commit(zr_dataset *ds);

/**
 * zr_commit(), telling @p changed (if not NULL) each (field, id) of a record
 * that earlier committed states have whose value this commit changed: what
 * zr_changes() of the new generation since the one before would list, told
 * by the writer that knows it, before the call returns. Records appended or
 * removed are not told: the lengths say. @p changed is called with the
 * handle's write lock held: it must not call the library on @p ds.
 * @return as zr_commit().
 */
ZR_API int zr_commit_changes(zr_dataset *ds, zr_change_cb changed, void *ctx);

/**
 * Between commits, bring the offset tables up to date with the committed
 * changes to records of earlier states (the overlay, which every commit
 * writes whole to its journal) that every reader has: those last changed
 * at or before the oldest generation any reader holds (all of them when no
 * reader holds a state older than the last commit); only once the overlay
 * is large enough for that to be worth its fdatasyncs. A commit does this
 * itself when no reader holds a state older than its own; a writer that
 * keeps readers of its own recent states (a mount's views) calls this after
 * its commits, so that its journals stay small. Thread-safe as zr_commit.
 * @return 1 settled, 0 nothing to do (or not now), -EROFS, -errno; on
 *         failure the journal stands and the state is unchanged.
 */
ZR_API int zr_settle(zr_dataset *ds);

/* ---- reading ------------------------------------------------------------ */

/**
 * Gather the records @p ids[0..n) of @p field, in that order (ids may
 * repeat). For a raw field the slices point straight into the mapped chunk
 * files (zero-copy); for flate they point into one buffer owned by the batch.
 * Missing records have data == NULL; empty ones data != NULL, len 0.
 *
 * Ownership: the batch and the memory its slices point to belong to the
 * library. They stay valid until zr_batch_release(@p *out) or zr_close(),
 * whichever comes first, and are read-only. A later modify/delete of the same
 * ids does not change the bytes a live batch sees.
 *
 * @return 0, -ENOENT (an id >= length), ZR_ECORRUPT (entry outside its chunk,
 *         stream that does not inflate: zr_errmsg() names field and id).
 */
ZR_API int zr_gather(zr_dataset *ds, unsigned field, const uint64_t *ids, size_t n,
		     zr_batch **out);
/** The records of a batch, @p n set to their count. Owned by the batch. */
ZR_API const zr_slice *zr_batch_records(const zr_batch *b, size_t *n);
/** Release a batch and what it allocated. Accepts NULL. */
ZR_API void zr_batch_release(zr_batch *b);

/**
 * Sum of the logical lengths of records @p ids[0..n) of @p field (missing
 * records count 0): the buffer size zr_reader_read() needs.
 */
ZR_API int zr_batch_bytes(zr_dataset *ds, unsigned field, const uint64_t *ids, size_t n,
			  uint64_t *total);

/**
 * A reader copies batches into caller buffers with io_uring: the chunk
 * ranges of a whole batch go to the kernel in one submission, which suits
 * data that is not in the page cache. Falls back to pread where io_uring is
 * unavailable. One reader per thread.
 * @param depth most reads in flight (0 = 256).
 */
ZR_API int zr_reader_open(zr_dataset *ds, unsigned depth, zr_reader **out);

/**
 * Read records @p ids[0..n) of @p field into @p dst, concatenated in order
 * (flate records inflated). @p offsets, if not NULL, receives n+1 offsets
 * into @p dst (record i is dst[offsets[i] .. offsets[i+1])); missing records
 * are empty there.
 * @return 0, -ENOBUFS (@p cap too small: see zr_batch_bytes()), -ENOENT,
 *         ZR_ECORRUPT, -EIO.
 */
ZR_API int zr_reader_read(zr_reader *r, unsigned field, const uint64_t *ids, size_t n,
			  void *dst, size_t cap, uint64_t *offsets);
/** A byte range of a chunk file, as zr_stat() describes one, and where it goes. */
typedef struct zr_range {
	int fd;          /**< zr_record_stat.fd */
	uint64_t offset; /**< within that file */
	uint32_t len;    /**< bytes to read */
	void *dst;       /**< @p len bytes of the caller's */
} zr_range;

/**
 * Read byte ranges of the dataset's chunk files, each into its own
 * destination, with one io_uring submission (pread where io_uring is
 * unavailable): for callers that send stored bytes on without the dataset's
 * mappings (a file cut short under a mapping faults; a read reports it).
 * @return 0, -EIO (a file ends inside a range, which is then not filled
 *         whole), -errno
 */
ZR_API int zr_reader_read_ranges(zr_reader *r, const zr_range *ranges, size_t n);
/**
 * Make @p r read from @p ds from now on: another handle of any dataset, its
 * ring and buffers kept (setting up a ring costs more than a small read).
 * For a thread that reads from the handles of several states in turn.
 */
ZR_API void zr_reader_retarget(zr_reader *r, zr_dataset *ds);
/** 1 if the reader uses io_uring, 0 if it fell back to pread. */
ZR_API int zr_reader_uses_uring(const zr_reader *r);
ZR_API void zr_reader_close(zr_reader *r);

/* ---- NumPy .npy files ------------------------------------------------------ */

/** Largest .npy header zr_npy_header() writes. */
#define ZR_NPY_HEADER_MAX 256

/**
 * Write the header of a .npy file (format 1.0) holding @p rows records of
 * the fixed-shape field @p spec: an array of shape (rows, *spec->shape).
 * Record bytes follow the header as stored. Thread-safe.
 * @return the header's length (a multiple of 64), -EINVAL (no fixed shape)
 *         or -EOVERFLOW (@p cap too small; ZR_NPY_HEADER_MAX suffices)
 */
ZR_API int zr_npy_header(const zr_field_spec *spec, uint64_t rows, char *buf, size_t cap);

/**
 * Read the header at the start of a .npy file (formats 1.0-3.0; @p len
 * bytes of it at @p data). Fills @p spec's dtype, fixed, ndim and shape
 * with those of one row (name, compress, ext untouched: zeroed), the row
 * count and where the data starts.
 * @return 0, or ZR_EINVAL_SPEC with the reason in zr_errmsg(NULL)
 *         (truncated, big-endian or unsupported dtype, Fortran order...)
 */
ZR_API int zr_npy_parse(const void *data, size_t len, zr_field_spec *spec, uint64_t *rows,
			uint64_t *data_offset);

/* ---- maintenance ---------------------------------------------------------- */

/** Progress of a long operation on a dataset: @p done of @p total values
 *  (checked by zr_verify(), copied by zr_rebalance()). */
typedef void (*zr_progress_cb)(void *ctx, uint64_t done, uint64_t total);

/**
 * Have zr_verify() and zr_rebalance() on @p ds call @p cb (NULL: none)
 * as they go: every few thousand values, and once at the end. It runs on
 * the calling thread, between values; it must not use @p ds.
 */
ZR_API void zr_progress_set(zr_dataset *ds, zr_progress_cb cb, void *ctx);

/** One problem found by zr_verify(); field is NULL for dataset-wide ones. */
typedef void (*zr_verify_cb)(void *ctx, const char *field, uint64_t id, const char *reason);

/**
 * Check every entry against its chunk and inflate every flate record,
 * calling @p cb (may be NULL) for each problem.
 * @return the number of problems (0 = clean), or a negative error code.
 */
ZR_API int64_t zr_verify(zr_dataset *ds, zr_verify_cb cb, void *ctx);

/** Figures reported by zr_rebalance(). */
typedef struct zr_rebalance_report {
	double utilisation_before, utilisation_after;
	uint64_t chunk_bytes_before, chunk_bytes_after;
	uint32_t chunks_before, chunks_after;
} zr_rebalance_report;

/**
 * Rewrite the live records, read in chunk-offset order, into fresh chunks,
 * then switch to them atomically and delete the old chunks. Needs ZR_RDWR
 * and no uncommitted changes (-EBUSY otherwise). An interrupted rebalance
 * leaves either the old or the new dataset, both complete.
 * @param chunk_size records per chunk of the result; 0 = keep.
 */
ZR_API int zr_rebalance(zr_dataset *ds, uint32_t chunk_size, zr_rebalance_report *out);

#ifdef __cplusplus
}
#endif

/* records' original names and the tree they make */
#include "zrecord_names.h"

#endif /* ZRECORD_H */
