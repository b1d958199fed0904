/*
 * zrecord_names.h - records' original names and the tree of files they
 * make (libzrecord; zrecord.h includes it): the one rule that zr export,
 * zr import and a mount's tree/ and views by id share.
 */
#ifndef ZRECORD_NAMES_H
#define ZRECORD_NAMES_H

#include "zrecord.h"

#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- original names and the tree they make ------------------------------ */

/** Longest component of a name that makes a file (a file name's limit). */
#define ZR_NAME_FILE_MAX 255

/**
 * Records' original names, as `zr import dir` and `zr import tar` keep them
 * in a field of their own, named in the dataset's attrs (core/FORMAT.md,
 * "Original names"), and the tree of files they make, which `zr export`
 * writes and the mount shows as tree/:
 * - names that are paths (kind "path"): the file at a record's name holds
 *   its value of one field, `files` (train/cat/1.jpg);
 * - names that are WebDataset keys (kind "key"): every value of a record but
 *   its name is a file KEY.FIELD (train/s0.jpg, train/s0.cls), an i64 scalar
 *   as decimal text (WebDataset's .cls).
 * A name makes files only if it is a relative path that stays below its
 * directory (zr_name_safe()); a key's last component holds no dot.
 */
typedef struct zr_names {
	int field;  /**< the field of names (variable-size bytes); -1: none kept */
	int files;  /**< names that are paths: the field their files hold; else -1 */
	int key;    /**< 1: names are WebDataset keys */
	int mtime;  /**< the field of the files' modification times (i64, ns since
			 the epoch, one per record or one per field; makes no
			 file); -1: none kept */
	int mode;   /**< the field of the files' modes (u32, st_mode: type and
			 permission bits, one per record or one per field;
			 makes no file); -1: none kept */
	int atime;  /**< the field of the files' access times (as mtime's);
			 -1: none kept (they are the modification times) */
	int ctime;  /**< the field of the files' change times (as mtime's: of
			 the last change of a value, name, mode or time); -1:
			 none kept */
	int uid;    /**< the field of the files' owners (u32 user ids, as mode's);
			 -1: none kept (the dataset directory's owner) */
	int gid;    /**< the field of the files' groups (u32 group ids, as
			 uid's); -1: none kept */
	int label;  /**< names that are paths: an i64 label field whose class
			 is a directory of the path (attrs.names.label, as zr
			 import dir --label-from-parent and --label-from-top
			 make), numbered as attrs.classes.FIELD lists the class
			 names; -1: none */
	int label_top; /**< with label: 1, the path's first directory is the
			 class; 0, the file's parent directory */
} zr_names;

/** A time a record's field has not (zr_names.mtime, .atime or .ctime
 *  holding one per field). */
#define ZR_MTIME_NONE INT64_MIN
/** A mode a record's field has not (zr_names.mode holding one per field). */
#define ZR_MODE_NONE 0u

/** An owner or group a record's field has not (zr_names.uid, .gid holding
 *  one per field): (uid_t)-1, which no file can have. */
#define ZR_OWNER_NONE UINT32_MAX

/** The times the names keep: whole seconds since 1970 from ZR_TIME_MIN_S
 *  (1677-09-21) to ZR_TIME_MAX_S (2262-04-11), nanoseconds in 64 bits. */
#define ZR_TIME_MIN_S (-9223372036LL)
#define ZR_TIME_MAX_S 9223372035LL

/** A time as the names keep it: nanoseconds since 1970 (negative before);
 *  one outside what they keep is the nearest they keep, to the second, as
 *  a filesystem clamps a time to its range. Never ZR_MTIME_NONE. */
static inline int64_t zr_time_ns(struct timespec ts)
{
	if (ts.tv_sec > ZR_TIME_MAX_S)
		return ZR_TIME_MAX_S * 1000000000;
	if (ts.tv_sec < ZR_TIME_MIN_S)
		return ZR_TIME_MIN_S * 1000000000;
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/** A time the names keep (ns since 1970) as a timespec: tv_nsec in
 *  0..999999999, before 1970 too. */
static inline struct timespec zr_ns_time(int64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};

	if (ts.tv_nsec < 0) {
		ts.tv_sec--;
		ts.tv_nsec += 1000000000;
	}
	return ts;
}

/**
 * The class directory of path @p name (@p len bytes), as zr import dir
 * labels files and zr_names.label keeps them labelled: the first
 * directory (@p top) or the file's parent; its name is *@p dlen bytes.
 * @return it, or NULL for a file directly in the tree (in no class)
 */
ZR_API const char *zr_name_class_dir(const char *name, size_t len, int top, size_t *dlen);

/**
 * What @p ds's attrs say of its names (field -1 when it keeps none).
 * Thread-safe. @return 0, or -ENOMEM
 */
ZR_API int zr_names_get(const zr_dataset *ds, zr_names *out);

/**
 * Whether the @p len bytes at @p name are a relative path that stays below
 * its directory: no NUL, no leading '/', no empty, "." or ".." component,
 * none longer than ZR_NAME_FILE_MAX. @return 1 or 0
 */
ZR_API int zr_name_safe(const char *name, size_t len);

/**
 * Record @p id's name into @p buf (NUL-terminated; @p cap bytes with the
 * NUL). Thread-safe.
 * @return its length; 0 when it has none (no value, or no names kept);
 *         -ENAMETOOLONG (longer than @p cap allows), -ENOENT (bad id),
 *         ZR_ECORRUPT or -EIO (damaged)
 */
ZR_API int64_t zr_name_load(zr_dataset *ds, const zr_names *n, uint64_t id, char *buf,
			    size_t cap);

/**
 * The modification time of the file field @p field of record @p id makes,
 * in nanoseconds since the epoch, into @p ns: the record's one time, or
 * with one per field (a tree of keys: each member its own) @p field's.
 * Thread-safe.
 * @return 1, 0 when it has none (no value, ZR_MTIME_NONE, or no times
 *         kept), -ENOENT (bad id or field), ZR_ECORRUPT or -EIO (damaged)
 */
ZR_API int zr_name_mtime(zr_dataset *ds, const zr_names *n, uint64_t id, unsigned field,
			 int64_t *ns);

/**
 * The access time of the file field @p field of record @p id makes, as
 * zr_name_mtime() finds modification times (zr_names.atime).
 */
ZR_API int zr_name_atime(zr_dataset *ds, const zr_names *n, uint64_t id, unsigned field,
			 int64_t *ns);

/**
 * The change time of the file field @p field of record @p id makes, as
 * zr_name_mtime() finds modification times (zr_names.ctime).
 */
ZR_API int zr_name_ctime(zr_dataset *ds, const zr_names *n, uint64_t id, unsigned field,
			 int64_t *ns);

/**
 * The mode of the file field @p field of record @p id makes (st_mode: its
 * type and permission bits) into @p mode, as zr_name_mtime() finds times.
 * Thread-safe.
 * @return 1, 0 when it has none (no value, ZR_MODE_NONE, or no modes
 *         kept), -ENOENT (bad id or field), ZR_ECORRUPT or -EIO (damaged)
 */
ZR_API int zr_name_mode(zr_dataset *ds, const zr_names *n, uint64_t id, unsigned field,
			uint32_t *mode);

/**
 * The owner and group of the file field @p field of record @p id makes into
 * @p uid and @p gid, as zr_name_mode() finds modes; either may be
 * ZR_OWNER_NONE when the dataset keeps the other alone. Thread-safe.
 * @return 1, 0 when it has neither, or a code as zr_name_mode()'s
 */
ZR_API int zr_name_owner(zr_dataset *ds, const zr_names *n, uint64_t id, unsigned field,
			 uint32_t *uid, uint32_t *gid);

/** What zr_name_meta() found: the bits of those kept for the file. */
enum {
	ZR_META_MODE = 1,  /**< mode */
	ZR_META_OWNER = 2, /**< uid and gid (either may be ZR_OWNER_NONE) */
	ZR_META_MTIME = 4, /**< mtime */
	ZR_META_ATIME = 8, /**< atime */
	ZR_META_CTIME = 16 /**< ctime */
};

/** A file's mode, owners and times, as the dataset keeps them. */
typedef struct zr_file_meta {
	unsigned have; /**< ZR_META_* bits: which of the others hold a value */
	uint32_t mode, uid, gid;
	int64_t mtime, atime, ctime; /**< nanoseconds since the epoch */
} zr_file_meta;

/**
 * Everything zr_name_mode(), zr_name_owner(), zr_name_mtime(),
 * zr_name_atime() and zr_name_ctime() find of the file field @p field of
 * record @p id makes, at once: a record's values of them are stored
 * together, and are read with one system call where they lie close in one
 * chunk. Those found are flagged in @p out->have; one that cannot be read
 * is left out, its code returned. Thread-safe.
 * @return 1, 0 when none is kept, or the first code as zr_name_mode()'s
 */
ZR_API int zr_name_meta(zr_dataset *ds, const zr_names *n, uint64_t id, unsigned field,
			zr_file_meta *out);

/**
 * Whether field @p field is one the names keep for themselves (the names,
 * the times, the modes): a value of no file. @return 1 or 0
 */
ZR_API int zr_names_own(const zr_names *n, unsigned field);

/**
 * The path, in the dataset's tree, of the file that field @p field of a
 * record named @p name (@p len bytes) makes, into @p buf (NUL-terminated).
 * @return its length; 0 when that field makes no file (zr_names_own(), or
 *         not the files' field of paths); -EINVAL (the name makes
 *         no file: not safe, or a key with a dot in its last component);
 *         -ENAMETOOLONG
 */
ZR_API int zr_names_file(const zr_dataset *ds, const zr_names *n, unsigned field,
			 const char *name, size_t len, char *buf, size_t cap);

/**
 * The other way: which field's file @p path (@p len bytes) is, and the
 * length of the record's name in it (a key: the path up to the first dot
 * of its last component). @return 0, or -ENOENT (no field's file is
 * called so: a key's extension that names no field, an unsafe path)
 */
ZR_API int zr_names_field_of(const zr_dataset *ds, const zr_names *n, const char *path,
			     size_t len, unsigned *field, size_t *name_len);

/**
 * The extension of the file a record named @p name (@p len bytes) makes in
 * a view by id of field @p field (a mount's FIELD/ID.EXT, `zr export
 * --by-id`), where the name decides it: when names are paths holding this
 * field's files, the name's own (after the last dot of its last component,
 * not a leading one; none where it has no dot) if 1..ZR_EXT_MAX portable
 * characters. Records imported from files of several kinds so keep their
 * kind by id as by name (4.jpg, not 4.png).
 * @return its length (0: none) and *@p ext pointing at it (not
 *         NUL-terminated); -1 where the name does not decide: the field's
 *         extension applies
 */
ZR_API int zr_names_ext(const zr_names *n, unsigned field, const char *name, size_t len,
			const char **ext);

/**
 * Whether field @p field's files in the tree hold decimal text instead of
 * the stored bytes (an i64 scalar among keys: WebDataset's .cls). @return 1 or 0
 */
ZR_API int zr_names_text(const zr_dataset *ds, const zr_names *n, unsigned field);

/**
 * The decimal text of a stored i64 scalar (@p len must be 8), into @p buf.
 * @return its length, -EINVAL (not 8 bytes), -ENOBUFS (@p cap < 21)
 */
ZR_API int zr_names_text_of(const void *stored, size_t len, char *buf, size_t cap);

/* ---- directories and symbolic links ------------------------------------ */

/** Most directories and symbolic links a dataset keeps. */
#define ZR_TREE_MAX 65536

/**
 * A directory, symbolic link, FIFO, socket, device or hard link of the
 * tree (core/FORMAT.md, "Directories and symbolic links"): what a tree
 * holds besides its files, kept beside the records (never a record, so
 * never drawn by a sampler). A FIFO, socket or device is a name and its
 * mode (a device also its number): it holds no data. A hard link is a
 * second name of the file (or link, FIFO, socket, device) at its target's
 * path, with mode S_IFREG alone: the file's own attributes are its. A directory kept
 * here is in the tree even when empty, with its mode and times; one that
 * is not is there while a record's name puts a file below it (0755, the
 * dataset's time).
 */
typedef struct zr_tree_entry {
	const char *path;   /**< relative path below the tree (zr_name_safe()),
				 or "." for the tree itself (a directory) */
	const char *target; /**< a symbolic link's target (any text, as
				 symlink(2) takes it), a hard link's (the path
				 of what it names, zr_name_safe()); NULL for
				 the others */
	uint32_t mode;      /**< S_IFDIR, S_IFLNK, S_IFIFO, S_IFSOCK, S_IFCHR or
				 S_IFBLK, and the permission bits; S_IFREG
				 alone: a hard link (FIFOs, sockets, devices,
				 hard links: a dataset versions before
				 2026-12-01 cannot open) */
	int64_t mtime;      /**< modification time, ns since 1970 */
	int64_t atime;      /**< access time; ZR_MTIME_NONE: the mtime */
	uint64_t size;      /**< a directory's size as its source had it (du
				 --apparent-size counts it); 0: none kept */
	int owned;          /**< 1: uid and gid are kept; 0: none kept (the
				 dataset directory's owner and group) */
	uint32_t uid, gid;  /**< with owned: the owner and group */
	int64_t ctime;      /**< change time (its mode, owner, times or a name in
				 it changed), ns since 1970; 0: none kept (the
				 commit's time shows) */
	uint64_t rdev;      /**< a device's number (st_rdev: makedev(3)), S_IFCHR
				 and S_IFBLK only; 0 for the others */
} zr_tree_entry;

/**
 * The directories and symbolic links of @p ds's state, sorted by path
 * (bytewise), into @p out: one allocation, free() it (NULL when none).
 * Not while zr_tree_set() runs on the same handle.
 * @return 0, or -ENOMEM
 */
ZR_API int zr_tree_get(const zr_dataset *ds, zr_tree_entry **out, size_t *n);

/**
 * Make @p entries (@p n, in any order) the dataset's directories and
 * symbolic links from its next commit on, in place of those it had. Each
 * path once, a relative path below the tree; paths and targets UTF-8 text.
 * @return 0, -EROFS, -EINVAL (a bad entry, a path twice), -EILSEQ (not
 * UTF-8), -EFBIG (more than ZR_TREE_MAX, or past meta.json's size),
 * -ENOMEM; zr_last_error() says which entry
 */
ZR_API int zr_tree_set(zr_dataset *ds, const zr_tree_entry *entries, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* ZRECORD_NAMES_H */
