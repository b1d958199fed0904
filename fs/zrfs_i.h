/*
 * zrfs_i.h - internals of the zrfs FUSE driver shared between its files.
 *
 * The driver is a thin adapter from FUSE requests to libzrecord and
 * libzrsampler. Its files, from the top down; each calls only files below
 * it, never back up (a subtree's hooks are called through its table):
 *
 *   main.c            the command: options, mount, session loop
 *   floor.c           zrfs-floor, the FUSE floor the benchmarks measure
 *                     against (a command of its own, on the same transport)
 *   dispatch.c        the FUSE callbacks: each asks the subtree that owns
 *                     its inode (the table of subtrees), and serves the root
 *   dataset.c         the dataset opened, its fields and first view; closed
 *   write/            a writable mount (-o writable): the write layer, its
 *                     files, model, threads and locks in write/write_i.h
 *   follow.c          the thread that follows commits: new views, versions,
 *                     and what the kernel must look up again; requests
 *                     answered once the mount shows their commit
 *   fields.c          subtree: meta.json, field directories, FIELD.npy
 *   byclass.c         subtree: /by/LABEL/CLASS/, the ImageFolder view
 *   tree.c            subtree: /tree/, the files records' original names make
 *   batches.c         subtree: /.batches, its names and numbers (batch_i.h)
 *   batch_prefetch.c  batch steps assembled or read ahead, dropped behind;
 *                     the views steps are pinned to
 *   batch_files.c     where a batch file's bytes are assembled
 *   batch_tables.c    the tables of specs and epochs, bounded
 *   records.c         record files: names, attributes, bytes
 *   tree_index.c      tree/'s index of names, built at mount and followed
 *                     (tree_i.h)
 *   npy_view.c        .npy views: the pieces of a range
 *   transport.c       how requests arrive: /dev/fuse with polling, or
 *                     io_uring rings (-o uring; transport_i.h)
 *   ring.c            the ring threads of -o uring
 *   notify.c          what the kernel must look up again, collected, sent
 *   reply.c           where every reply is built and sent
 *   readahead.c       asking the kernel for pages before they are sent
 *   versions.c        the versions of record files and .npy views
 *   inodes.c          the one table of numbers the kernel holds: lookups
 *                     counted, views pinned to older numbers
 *   view.c            the committed state shown (a view per generation),
 *                     the names lock
 *   cache.c           bounded cache of inflated records and batch blobs
 *   scratch.c         per-thread buffers and core readers
 *   log.c             names in log lines escaped; lines users cause limited
 *   table.c           the one hash table the files above share
 *
 * Headers: this one (everything shared), subtree_i.h (the subtrees'
 * interface, included at its end), batch_i.h, tree_i.h, transport_i.h,
 * write/write_i.h.
 *
 * Inode numbers are a pure function of the path and, for files whose bytes
 * a commit can change, a version (versions.c: content never changes under
 * a number); each subtree owns one part of the 64-bit space. Every number
 * handed to the kernel is counted in inodes.c, and nowhere else:
 *
 *   /                          ZRFS_INO_ROOT (1)                 dispatch.c
 *   /meta.json                 ZRFS_INO_META | generation        fields.c
 *   /<field>/                  ZRFS_INO_DIR + field              fields.c
 *   /<field>.npy               ZRFS_INO_NPY | version << 8 | field  fields.c
 *   /<field>.present.npy       the same | ZRFS_INO_PRESENT          fields.c
 *   /<field>/<id>[.ext]        ZRFS_INO_REC | version << 48 | field << 40 | id
 *                                                                records.c
 *   /.batches/...              ZRFS_INO_BATCHES, ZRFS_INO_SPEC + spec,
 *                              bits 60-61 = 2 (epochs), 3 (steps) batches.c
 *   /.batches/.why/<spec>      ZRFS_INO_WHY, ZRFS_INO_WHY_FILE | n   batches.c
 *   /by/...                    ZRFS_INO_BY, ZRFS_INO_BY_FIELD + i,
 *                              ZRFS_INO_BY_CLASS | i << 32 | class byclass.c
 *   /tree/... directories      ZRFS_INO_TREE_DIR | n             tree.c
 *   /tree/... symbolic links   ZRFS_INO_TREE_LINK | n            tree.c
 *   /tree/... files            a record file's number, or for a class
 *                              as text ZRFS_INO_TEXT | (its bits)  tree.c
 *   /<field>/<new file>        ZRFS_INO_STAGED | n        write/nodes.c
 *   (-o writable)
 */
#ifndef ZRFS_I_H
#define ZRFS_I_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include "zrecord.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#define ZRFS_INO_ROOT FUSE_ROOT_ID
#define ZRFS_INO_BATCHES UINT64_C(3)
#define ZRFS_INO_BY UINT64_C(4)
#define ZRFS_INO_WHY UINT64_C(5)
#define ZRFS_INO_DIR UINT64_C(0x1000)
#define ZRFS_INO_BY_FIELD UINT64_C(0x4000)
#define ZRFS_INO_SPEC UINT64_C(0x10000)
#define ZRFS_INO_WHY_FILE (UINT64_C(1) << 53) /* | a count: batches.c */
#define ZRFS_INO_TREE_DIR (UINT64_C(1) << 54)
#define ZRFS_INO_TREE_LINK (ZRFS_INO_TREE_DIR | UINT64_C(1) << 40) /* | n: tree.c */
#define ZRFS_INO_BY_CLASS (UINT64_C(1) << 55)
#define ZRFS_INO_REC (UINT64_C(1) << 56)
#define ZRFS_INO_TEXT (UINT64_C(1) << 57) /* a record file's bits, as decimal text */
#define ZRFS_INO_NPY (UINT64_C(1) << 58)
#define ZRFS_INO_PRESENT (UINT64_C(1) << 48) /* with ZRFS_INO_NPY: FIELD.present.npy */
#define ZRFS_INO_META (UINT64_C(1) << 59)
#define ZRFS_INO_EPOCH (UINT64_C(2) << 60)
#define ZRFS_INO_STEP (UINT64_C(3) << 60)
#define ZRFS_INO_STAGED (UINT64_C(1) << 62) /* -o writable: files not stored yet, write/nodes.c */

/* Whether the name of @ino is looked up each time, never cached: a
 * /.batches/.why file, made anew by every lookup (its text may change as
 * records come and go; a number's never does). */
static inline bool zrfs_ino_asked_each_time(fuse_ino_t ino)
{
	return (ino & ~(uint64_t)UINT32_MAX) == ZRFS_INO_WHY_FILE;
}
/* Whether @mode is a FIFO's, a socket's or a device's: tree/ keeps one as
 * its name, mode and (a device) number, the kernel is what it does. */
static inline bool zrfs_mode_special(uint32_t mode)
{
	return S_ISFIFO(mode) || S_ISSOCK(mode) || S_ISCHR(mode) || S_ISBLK(mode);
}
#define ZRFS_ID_BITS 40
#define ZRFS_VERSIONS 256 /* record versions: 8 bits of the inode number */
#define ZRFS_GEN_MASK ((UINT64_C(1) << 40) - 1) /* generations in .npy numbers */

#define ZRFS_BATCHES_NAME ".batches"
#define ZRFS_BY_NAME "by"
#define ZRFS_TREE_NAME "tree"
/* Longest name the tree has: a class name or a spec (ZS_SPEC_MAX) */
#define ZRFS_NAME_MAX 255
/* A path below a field directory or tree/, with its NUL (PATH_MAX). */
#define ZRFS_PATH_MAX 4096
#define ZRFS_BLKSIZE (1 << 16) /* st_blksize of every file: what programs read at once */

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
	const zr_field_spec *spec; /* = &own: outlives every dataset handle */
	zr_field_spec own;
	char name[ZR_NAME_MAX + 1], ext[ZR_EXT_MAX + 1];
	size_t name_len;
	size_t ext_len;       /* 0: record files have no extension */
	uint64_t record_size; /* fixed-shape fields; 0 = variable */
	bool whole;           /* served from values loaded whole into the cache:
			       * inflated (flate), or checked (-o check) */
	bool has_npy;         /* a fixed shape: FIELD.npy, the whole field */
};

struct zrfs_opts {
	double timeout;       /* entry and attribute timeouts, seconds */
	uint64_t cache_bytes; /* bound of the inflated-record cache */
	unsigned readahead_kb; /* 0: leave the kernel's default */
	int splice;           /* splice raw bytes into replies (-o splice) */
	int check;            /* check raw values' checksums too (-o check) */
	int list_views;       /* list /.batches and /by in the root (-o list_views) */
	unsigned prefetch;    /* batch files assembled ahead of the reader */
	unsigned drop_behind; /* steps behind a reader whose batch pages are dropped */
	unsigned hold_ms;     /* a step keeps its view this long after its last lookup */
	uint64_t readaround;  /* window records are read ahead in; 0: exactly them */
	unsigned commit_ms;   /* -o writable: new files wait at most this long for a commit */
	uint64_t commit_bytes; /* or until this many bytes of them wait */
	unsigned poll_us;     /* poll for the next request this long before sleeping;
			       * ZRFS_POLL_DEFAULT: 50 in ring threads, 0 on /dev/fuse */
	int uring;            /* serve requests through io_uring rings (-o uring) */
	unsigned uring_threads; /* ring threads per CPU */
};

/* Start @fn(@arg) on thread @t with the signals that stop the daemon
 * blocked there, as libfuse starts its workers: SIGTERM, SIGINT, SIGHUP
 * and SIGQUIT then go to the thread whose loop waits for them (the
 * session's); one taken by a helper ends no loop, and the daemon would
 * not stop. Faults stay open (SIGBUS: a mapping cut short, core/fault.c).
 * 0 or an errno. */
static inline int zrfs_thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
	sigset_t stop, was;
	int rc;

	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGHUP);
	sigaddset(&stop, SIGQUIT);
	pthread_sigmask(SIG_BLOCK, &stop, &was);
	rc = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &was, NULL);
	return rc;
}

/* One mount, as /proc/self/mountinfo lists it (its escapes undone); the
 * strings live until the callback returns. */
struct zrfs_mount {
	uint64_t id;        /* the mount's id (statx's stx_mnt_id) */
	char dev[32];       /* "major:minor" */
	const char *point;  /* where it is mounted */
	const char *type;   /* "fuse.zrfs", "ext4", ... */
	const char *source; /* a zrfs mount's: its dataset's absolute path */
	bool rw;            /* mounted read-write */
};

/* Calls @fn(mount, @ctx) for each mount of this namespace, in the order
 * listed (the last on a mount point is the one on top); nothing if the
 * list cannot be read. */
void zrfs_mounts_each(void (*fn)(const struct zrfs_mount *m, void *ctx), void *ctx);
/* Whether a mount of @type (NULL: any) is at @mountpoint, as
 * /proc/self/mountinfo lists it; the last one listed (the one on top),
 * its device ("major:minor") into @devno, its id into *@id (if not NULL). */
bool zrfs_mount_at(const char *mountpoint, const char *type, char devno[32], uint64_t *id);

/* Milliseconds on the monotonic clock. */
static inline uint64_t zrfs_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Now, as the names and the write layer keep a file's time (zr_time_ns). */
static inline int64_t zrfs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return zr_time_ns(ts);
}

/* Time @ns as @st's modification and access times; with @ctime, its
 * change time too where that is earlier (changed since it was stored). */
static inline void zrfs_stat_mtime(struct stat *st, int64_t ns, bool ctime)
{
	st->st_mtim = zr_ns_time(ns);
	st->st_atim = st->st_mtim;
	if (ctime && (st->st_ctim.tv_sec < st->st_mtim.tv_sec ||
		      (st->st_ctim.tv_sec == st->st_mtim.tv_sec &&
		       st->st_ctim.tv_nsec < st->st_mtim.tv_nsec)))
		st->st_ctim = st->st_mtim;
}

struct zrfs_cache;
struct zrfs_uring;
struct zrfs_batch_tables;
struct zrfs_prefetch;
struct zrfs_byclass_state;
struct zrfs_state;
struct zrfs_versions;
struct zrfs_inodes;
struct zrfs_follow;
struct zrfs_writes;

/* One committed state as the mount shows it (view.c): immutable once
 * published, counted, freed by the last zrfs_view_put(). */
struct zrfs_view {
	atomic_uint refs;
	zr_dataset *ds;       /* read-only, of generation gen */
	uint64_t gen;
	uint64_t n;           /* records */
	char *meta;           /* meta.json as served */
	size_t meta_len;
	struct timespec mtime; /* of meta.json: every file's times */
	struct zrfs_npy npy[]; /* per field, when it has_npy: the whole-field view */
};

struct zrfs {
	const char *dataset;  /* as given on the command line */
	unsigned nfields;
	struct zrfs_field *fields;
	zr_names names;       /* records' original names (tree.c, the write layer) */
	uid_t uid;
	gid_t gid;
	struct zrfs_opts opts;
	struct zrfs_cache *cache;
	struct zrfs_batch_tables *batches;
	struct zrfs_prefetch *prefetch;
	struct zrfs_byclass_state *byclass;
	struct zrfs_tree_index *tree;     /* /tree, the index of names (tree.c); NULL: not shown */
	struct zrfs_state *state;   /* the current view, the names lock (view.c) */
	struct zrfs_versions *versions; /* of changed files (versions.c) */
	struct zrfs_inodes *inodes; /* the numbers the kernel holds, pins (inodes.c) */
	struct zrfs_follow *follow; /* the thread following commits (follow.c) */
	struct zrfs_writes *writes; /* -o writable: the writer (write/); NULL read-only */
	/* -o writable: told by follow.c where it makes view generation @gen
	 * current in place of @old, under the names lock written
	 * (zrfs_write_shown); NULL else */
	void (*view_shown)(struct zrfs *fs, struct zrfs_view *old, uint64_t gen);
	struct fuse_session *se;
	struct zrfs_uring *uring;   /* the transport's state (transport.c); NULL: libfuse's */
	bool no_open;         /* the kernel lets open/opendir answer ENOSYS */
	atomic_bool epochs;   /* names are told with an epoch (notify.c) */
	atomic_bool prunes;   /* the kernel can be told to drop numbers (notify.c) */
	atomic_bool warm;     /* the last batch read ahead was all in the page cache */
};

/* dataset.c: open fs->dataset with fs->opts set, its first view the current
 * one (messages on stderr): 0 or -1; and close it (also after a failed
 * open). */
int zrfs_dataset_open(struct zrfs *fs);
void zrfs_dataset_close(struct zrfs *fs);

/* ---- view.c: views, the current one, the names lock ---- */

/* A view of @ds (which it then owns), counted once: 0 or -errno. */
int zrfs_view_make(struct zrfs *fs, zr_dataset *ds, struct zrfs_view **out);
struct zrfs_view *zrfs_view_ref(struct zrfs_view *v);
void zrfs_view_put(struct zrfs_view *v);
int zrfs_state_create(struct zrfs *fs, struct zrfs_view *first);
void zrfs_state_destroy(struct zrfs *fs);
/* The current view, referenced (zrfs_view_put after). */
struct zrfs_view *zrfs_view_current(struct zrfs *fs);
/* Lookups and listings run between these: names resolve against the view
 * returned (valid until the end; not held) and its versions. */
struct zrfs_view *zrfs_names_begin(struct zrfs *fs);
void zrfs_names_end(struct zrfs *fs);
/* The view zrfs_names_begin gave, for code the caller's names lock covers
 * (not referenced: valid until zrfs_names_end). */
struct zrfs_view *zrfs_names_view(struct zrfs *fs);
/* follow.c publishes a new view between these (the names lock, written). */
void zrfs_state_lock(struct zrfs *fs);
void zrfs_state_unlock(struct zrfs *fs);
/* Make @v current; returns the view it replaces (the caller's to put). */
struct zrfs_view *zrfs_view_publish(struct zrfs *fs, struct zrfs_view *v);

/* ---- versions.c: versions of record files and .npy views ---- */

/* The versions, with every .npy of generation @gen; freed. */
int zrfs_versions_create(struct zrfs *fs, uint64_t gen);
void zrfs_versions_destroy(struct zrfs *fs);
/* The current version of record (@field, @id), and of @field's .npy (the
 * generation it last changed in); between zrfs_names_begin and _end. */
unsigned zrfs_rec_version(const struct zrfs *fs, unsigned field, uint64_t id);
uint64_t zrfs_npy_version(const struct zrfs *fs, unsigned field);
/* Give record @id of @field its next version, one of whose numbers the
 * kernel holds none (inodes.c): 0; if it holds one of every version, the
 * next one not pinned, or else the oldest is taken back: 1 (that number
 * shows the new bytes; the caller unpins it). -ENOMEM. Under the names
 * lock, written; as the next two. */
int zrfs_rec_version_bump(struct zrfs *fs, unsigned field, uint64_t id);
void zrfs_npy_version_set(struct zrfs *fs, unsigned field, uint64_t version);
/* Give back the versions of records of which the kernel holds no number:
 * such a record's file is numbered as if it had never changed. At most
 * @budget are looked at, the oldest first. How many are left. */
size_t zrfs_versions_trim(struct zrfs *fs, size_t budget);

/* ---- inodes.c: the numbers the kernel holds ---- */

struct zrfs_subtree;
int zrfs_inodes_create(struct zrfs *fs);
void zrfs_inodes_destroy(struct zrfs *fs);
/* The kernel is about to be handed @ino once more (the reply is sent
 * after this call; one that could not be sent is forgotten once), with the
 * reference the subtree @hook took for it (NULL: none): the table keeps it
 * while the kernel holds the number, and has @hook let it go at the last
 * FORGET; a number held already lets it go at once. 0, or -ENOMEM (not
 * counted, let go: answer with the error). The root is never counted. */
int zrfs_inode_hand(struct zrfs *fs, fuse_ino_t ino, const struct zrfs_subtree *hook);
/* The kernel is about to be handed @ino once more, a number it holds
 * already (its owner keeps what the number means by a lock of its own):
 * counted, true; false if it holds it no more (not counted). */
bool zrfs_inode_again(struct zrfs *fs, fuse_ino_t ino);
/* The kernel forgot @nlookup lookups of @ino: true if it holds none now
 * (its pin goes, its reference is let go). */
bool zrfs_inode_forget(struct zrfs *fs, fuse_ino_t ino, uint64_t nlookup);
/* Whether the kernel holds @ino; any number of @ino's family (a record's
 * numbers, zrfs_ino_family). */
bool zrfs_inode_held(struct zrfs *fs, fuse_ino_t ino);
bool zrfs_inode_family_held(struct zrfs *fs, fuse_ino_t ino);
/* @hook is told to let go of held number @ino from now on (another
 * subtree's that kept nothing for it): whether it is held. */
bool zrfs_inode_adopt(struct zrfs *fs, fuse_ino_t ino, const struct zrfs_subtree *hook);
/* The numbers held now. */
uint64_t zrfs_inodes_held(struct zrfs *fs);
/* Pins: held number @ino shows view @v (referenced) until the kernel
 * forgets it: 1; 0 if it is not held (nothing may show it any more) or
 * shows one already (the first stays). Whether it shows one; that view,
 * held (NULL: none); unpin it (whether it had one). */
int zrfs_inode_pin(struct zrfs *fs, fuse_ino_t ino, struct zrfs_view *v);
bool zrfs_inode_pinned(struct zrfs *fs, fuse_ino_t ino);
struct zrfs_view *zrfs_inode_view(struct zrfs *fs, fuse_ino_t ino);
bool zrfs_inode_unpin(struct zrfs *fs, fuse_ino_t ino);
/* Ask the kernel to drop the numbers pinned since the last call, and the
 * numbers still pinned again once a second, 4,096 at a time in turn (a
 * file open at the first ask may be closed now): its FORGET then unpins it
 * at once, where the kernel would keep an unused name and inode of an old
 * state until memory is short. Where the kernel cannot be asked, pins wait
 * for its own FORGETs. */
void zrfs_inodes_prune(struct zrfs *fs, uint64_t now_ms);

/* ---- follow.c ---- */

/* Follow commits from a thread of its own (after fuse_daemonize()); stop
 * (a commit after it is not shown: the session is over); free, once
 * nothing commits any more (the write layer is closed). */
int zrfs_follow_start(struct zrfs *fs);
void zrfs_follow_stop(struct zrfs *fs);
void zrfs_follow_free(struct zrfs *fs);
/* The one answer to a request that changed the dataset (a close, an fsync,
 * a SETATTR) given what its store returned, @gen: its error (< 0); success
 * now (0: nothing to wait for); else once the mount shows generation @gen
 * or a later one and the kernel has been told what changed. Success carries
 * attributes @st if not NULL. Waiting answers are sent from the follower's
 * thread, after its notifications: the program that made the change finds
 * it on its next open. At once when nothing follows. */
void zrfs_follow_answer(struct zrfs *fs, int64_t gen, fuse_req_t req, const struct stat *st);
/* Two store results as one, for a request that made two changes: the
 * first error (< 0), else the later generation to wait for. */
static inline int64_t zrfs_gen_later(int64_t a, int64_t b)
{
	if (a < 0 || b < 0)
		return a < 0 ? a : b;
	return a > b ? a : b;
}
/* A WRITE's answer, @size bytes written, given as above once the mount
 * shows generation @gen (a change of mode the write made; < 0: at once). */
void zrfs_follow_answer_write(struct zrfs *fs, int64_t gen, fuse_req_t req, size_t size);
/* Commit this mount's writer (zr_commit) and make the state it committed
 * the mount's view now, from what the writer knows: a snapshot of it and
 * the records it told changed (no meta.json, change log or reopen read
 * back); the kernel is told what changed by the following thread, later
 * (a request during which the kernel holds a directory's lock, as unlink
 * does, cannot wait for that: telling the kernel takes the lock). 0, or
 * zr_commit's error (nothing shown). Where nothing follows, only commits. */
int zrfs_follow_commit(struct zrfs *fs, zr_dataset *writer);

/* ---- transport.c ---- */

#define ZRFS_POLL_DEFAULT UINT_MAX
#define ZRFS_RING_POLL_US 50 /* BENCHMARKS.md, "FUSE over io_uring and polling" */

/* Set up how @se's requests reach the daemon, after mounting and before
 * serving: with fs->opts.poll_us, a thread polls for the next request
 * before sleeping; with fs->opts.uring, requests come through io_uring
 * rings once the kernel has agreed in INIT (threads of ours per CPU, started
 * then). 0 (nothing to set up is 0 too) or -errno. _stop ends the ring
 * threads (after the session loop returned and every deferred request was
 * answered); _destroy frees the rest, after the session is destroyed. */
int zrfs_transport_start(struct zrfs *fs, struct fuse_session *se);
void zrfs_transport_stop(struct zrfs *fs);
void zrfs_transport_destroy(struct zrfs *fs);
/* A request that came through an io_uring ring put back together as
 * /dev/fuse delivers it, in @buf (ZRFS_RING_HEAD + @payload_cap bytes): the
 * fuse_in_header in @in_out, the opcode's fixed argument in @op_in (its
 * size is what the header's len leaves), @payload_len bytes of @payload.
 * Where it starts in @buf (its length is the header's len), or NULL if the
 * sizes do not add up (the request is answered EIO). */
#define ZRFS_RING_HEAD (40 + 128) /* sizeof(struct fuse_in_header) + the op_in area */
char *zrfs_ring_request(const void *in_out, const void *op_in, const void *payload,
			uint32_t payload_len, size_t payload_cap, char *buf);
/* Set around a reply whose bytes come from chunk mappings, to its pieces
 * (each mapped, and where it is a file's, its descriptor and offset): the
 * io_uring transport reads a file's pieces with pread, which ends short
 * (the reader gets EIO) where a chunk cut short under the mount would make
 * a copy from the mapping raise SIGBUS. The transport moves the bufvec's
 * position (idx, off) as it copies. */
extern _Thread_local struct fuse_bufvec *zrfs_reply_mapped;

/* ---- fs/write/: -o writable ---- */

/* Open the dataset's writer before mounting on @mountpoint (a refusal is
 * said on the terminal) and say in DATASET/writer that this mount holds it:
 * 0 or -1; once mounted and detached, say it again with the daemon's pid
 * and the mount's id (a writer refused once it is unmounted waits for the
 * daemon: zr_holder_mount), and start committing new files in groups;
 * close it. */
int zrfs_writes_open(struct zrfs *fs, const char *mountpoint);
void zrfs_writes_mounted(struct zrfs *fs);
void zrfs_writes_close(struct zrfs *fs);
/* An open for writing of @ino: a handle of its own in fi->fh, which
 * answers every request made with it (struct zrfs_handle). */
void zrfs_write_open(fuse_req_t req, struct zrfs *fs, fuse_ino_t ino, struct fuse_file_info *fi);
/* A file of the write layer's numbers (zrfs_writing.owns) opened for
 * reading: a record's reads, until closed, the value it had at the open. */
void zrfs_write_open_read(fuse_req_t req, struct zrfs *fs, fuse_ino_t ino,
			  struct fuse_file_info *fi);
/* Names in a field directory (or a directory made in one): a file
 * created (a new file and its handle), a directory made (for new files),
 * either removed, renamed. */
void zrfs_write_create(fuse_req_t req, struct zrfs *fs, fuse_ino_t parent, const char *name,
		       mode_t mode, struct fuse_file_info *fi);
void zrfs_write_mkdir(fuse_req_t req, struct zrfs *fs, fuse_ino_t parent, const char *name,
		      mode_t mode);
void zrfs_write_symlink(fuse_req_t req, struct zrfs *fs, const char *target, fuse_ino_t parent,
			const char *name);
/* unlink, first: the file or link @name of @parent in tree/, about to be
 * removed, takes the name of one of its hard links instead (which goes):
 * 0 (removed, as far as its caller sees), 1 where it has none (nothing
 * done: zrfs_write_unlink), or a negative code. */
int64_t zrfs_write_hard_promote(struct zrfs *fs, fuse_ino_t parent, const char *name);
/* link: @name in @parent (tree/ of a dataset of paths) a hard link to the
 * file or link @ino (a new file stored first): 0, or a negative code (the
 * caller answers with a lookup of the name). */
int zrfs_write_link(struct zrfs *fs, fuse_ino_t ino, fuse_ino_t parent, const char *name);
/* mknod: a regular file (an empty one, as create and close make it), or a
 * FIFO, a socket or device @rdev of tree/. */
void zrfs_write_mknod(fuse_req_t req, struct zrfs *fs, fuse_ino_t parent, const char *name,
		      mode_t mode, dev_t rdev);
/* Field directory @field's attributes @st, with the time its names last
 * changed through the mount (none: as they are). */
void zrfs_write_dir_meta(struct zrfs *fs, unsigned field, struct stat *st);
void zrfs_write_unlink(fuse_req_t req, struct zrfs *fs, fuse_ino_t parent, const char *name);
void zrfs_write_rmdir(fuse_req_t req, struct zrfs *fs, fuse_ino_t parent, const char *name);
void zrfs_write_rename(fuse_req_t req, struct zrfs *fs, fuse_ino_t parent, const char *name,
		       fuse_ino_t newparent, const char *newname, unsigned flags);
/* Attributes of @ino changed without a handle (@now: as its owner has
 * them): its size (truncate(2), or the SETATTR of an open(O_TRUNC)), modes
 * and owners of a file being written (accepted, ignored; refused on a file
 * at rest), times (accepted, ignored). */
void zrfs_write_setattr(fuse_req_t req, struct zrfs *fs, fuse_ino_t ino, const struct stat *attr,
			int to_set, const struct stat *now);
/* The attributes @st of regular file @ino a lookup or a GETATTR without
 * a handle (stat, fstat) answers @req with, where a file is open for
 * writing: where the caller, or another thread of its process, has it
 * open so (1), the size being written, as a local filesystem shows its
 * writer (zrfs(8): to others, the stored size until it is published);
 * where only another process has (0), as they are. Either: not to be
 * cached, as the two differ. -1: not open for writing, as they are. */
int zrfs_write_own_attr(fuse_req_t req, struct zrfs *fs, fuse_ino_t ino, struct stat *st);
/* fsync of a directory: the new files ready are committed now. */
void zrfs_write_fsyncdir(fuse_req_t req, struct zrfs *fs);
/* A directory opened for listing, and closed: a group of new files waits
 * (a while) for the listings open to end, so that none misses a file that
 * turns from a new file into a record under it. */
void zrfs_write_listing(struct zrfs *fs, bool open);

/* ---- open files that answer for themselves ---- */

/*
 * A file opened for writing (-o writable) gets a handle of its own in
 * fi->fh: every request that comes with it is answered by the handle's
 * ops, whatever the inode (dispatch.c's one rule: a handle answers for
 * itself, otherwise the inode's owner answers). Files opened for reading
 * have no handle (fi->fh 0), but on a writable mount those of the write
 * layer's numbers, which hold the view of their open (write/overlay.c).
 */
struct zrfs_handle;
struct zrfs_handle_ops {
	void (*read)(fuse_req_t req, struct zrfs *fs, struct zrfs_handle *h, fuse_ino_t ino,
		     size_t size, off_t off);
	void (*write)(fuse_req_t req, struct zrfs *fs, struct zrfs_handle *h, const char *buf,
		      size_t size, off_t off, struct fuse_file_info *fi);
	void (*flush)(fuse_req_t req, struct zrfs *fs, struct zrfs_handle *h,
		      struct fuse_file_info *fi);
	void (*fsync)(fuse_req_t req, struct zrfs *fs, struct zrfs_handle *h);
	void (*release)(fuse_req_t req, struct zrfs *fs, struct zrfs_handle *h);
	void (*getattr)(fuse_req_t req, struct zrfs *fs, struct zrfs_handle *h, fuse_ino_t ino);
	/* @now: the inode's attributes as its owner has them */
	void (*setattr)(fuse_req_t req, struct zrfs *fs, struct zrfs_handle *h, fuse_ino_t ino,
			const struct stat *attr, int to_set, const struct stat *now);
	/* NULL: not open for writing (EBADF) */
	void (*fallocate)(fuse_req_t req, struct zrfs *fs, struct zrfs_handle *h, int mode,
			  off_t off, off_t len);
	/* lseek(2)'s SEEK_DATA or SEEK_HOLE (@whence) from @off in the file it
	 * reads: the offset, or -ENXIO, -errno */
	int64_t (*seek)(struct zrfs *fs, struct zrfs_handle *h, fuse_ino_t ino, uint64_t off,
			int whence);
};
struct zrfs_handle {
	const struct zrfs_handle_ops *ops;
};
/* -o writable: a handle opened for reading that holds the view it reads
 * (dispatch.c's of a record's file, the write layer's of its numbers). The
 * write layer lists those open, so that the ones whose RELEASE never comes
 * (an unmount ends the connection first) are let go at unmount. */
struct zrfs_reading {
	struct zrfs_handle h;
	struct zrfs_view *v;  /* the view at the open (referenced) */
	struct zrfs_reading *prev, *next;
	/* lets go of what else it holds, at its close (NULL: nothing) */
	void (*let_go)(struct zrfs_reading *r);
};
/* List @r (its view taken): it is open. */
void zrfs_reading_open(struct zrfs *fs, struct zrfs_reading *r);
/* Unlist @r, let its view and what else it holds go, and free it. */
void zrfs_reading_close(struct zrfs *fs, struct zrfs_reading *r);
/* Such a handle's operations (dispatch.c): a write is EBADF; a flush or
 * an fsync has nothing to do; a release closes it; a setattr is its
 * number's, as without a handle. */
void zrfs_reading_write(fuse_req_t req, struct zrfs *fs, struct zrfs_handle *h, const char *buf,
			size_t size, off_t off, struct fuse_file_info *fi);
void zrfs_reading_flush(fuse_req_t req, struct zrfs *fs, struct zrfs_handle *h,
			struct fuse_file_info *fi);
void zrfs_reading_fsync(fuse_req_t req, struct zrfs *fs, struct zrfs_handle *h);
void zrfs_reading_release(fuse_req_t req, struct zrfs *fs, struct zrfs_handle *h);
void zrfs_reading_setattr(fuse_req_t req, struct zrfs *fs, struct zrfs_handle *h, fuse_ino_t ino,
			  const struct stat *attr, int to_set, const struct stat *now);
/* Whether the dataset keeps its files' owners and groups (zr import dir
 * does): chown of a file, directory or link of tree/ is kept, and a new
 * one is its maker's. */
static inline bool zrfs_owners_kept(const struct zrfs *fs)
{
	return fs->names.uid >= 0 && fs->names.gid >= 0;
}

static inline struct zrfs_handle *zrfs_handle_of(const struct fuse_file_info *fi)
{
	return fi && fi->fh ? (struct zrfs_handle *)(uintptr_t)fi->fh : NULL;
}

/* ---- notify.c: what the kernel must forget, collected, then sent ---- */

struct zrfs_notes {
	struct zrfs_note {
		fuse_ino_t ino;   /* the directory of the name, or the inode */
		char *name;       /* a name to look up again; NULL: ino's content */
	} *v;
	size_t n, cap;
};
/* Note that @name in directory @parent names something else now (or
 * nothing, or something where there was nothing). 0 or -ENOMEM. */
int zrfs_notes_entry(struct zrfs_notes *notes, fuse_ino_t parent, const char *name);
/* Note that what the kernel caches of @ino (a directory's listing) is old. */
int zrfs_notes_inode(struct zrfs_notes *notes, fuse_ino_t ino);
/* Tell the kernel everything noted (duplicates once), and empty @notes. */
void zrfs_notes_send(struct zrfs *fs, struct zrfs_notes *notes);
/* At INIT: whether the kernel has FUSE_NOTIFY_INC_EPOCH. */
void zrfs_notify_setup(struct zrfs *fs, const struct fuse_conn_info *conn);
/* Have the kernel look up every name it caches again before its next use,
 * taking no lock: true; false where it cannot (tell names one by one). */
bool zrfs_notify_epoch(struct zrfs *fs);
/* Have the kernel drop its names and inodes of numbers @ino[0..@n) (and
 * FORGET them) but those of a file open, taking no lock: true; false where
 * it cannot (a kernel before FUSE 7.45). */
bool zrfs_notify_prune(struct zrfs *fs, const fuse_ino_t *ino, size_t n);
/* Move every note of @src to @dst, leaving @src empty: 0, or -ENOMEM (the
 * notes of @src are then dropped: those names show an older state until
 * the kernel looks them up again after its timeout). */
int zrfs_notes_take(struct zrfs_notes *dst, struct zrfs_notes *src);
void zrfs_notes_free(struct zrfs_notes *notes);

/* ---- records.c: record files ---- */

/* The number of record @id's file of @field, at @version. */
static inline fuse_ino_t zrfs_rec_ino(unsigned field, uint64_t id, unsigned version)
{
	return ZRFS_INO_REC | (uint64_t)(version & (ZRFS_VERSIONS - 1)) << 48 |
	       (uint64_t)field << ZRFS_ID_BITS | id;
}
/* Whether @ino is a record file's number (ZRFS_INO_REC and nothing above). */
static inline bool zrfs_is_rec_ino(fuse_ino_t ino)
{
	return ino >> 56 == 1;
}
/* The family of @ino: for a record file's number, or its twin's in tree/,
 * the same for every version and both (inodes.c hashes them alike); any
 * other number is its own. */
static inline fuse_ino_t zrfs_ino_family(fuse_ino_t ino)
{
	return ino >> 56 == 1 || ino >> 56 == 2 ? (ino & ((UINT64_C(1) << 48) - 1)) | ZRFS_INO_REC
						  : ino;
}
/* The number of record file @ino's twin in tree/: its class as decimal text. */
static inline fuse_ino_t zrfs_rec_text_ino(fuse_ino_t ino)
{
	return (ino & ~ZRFS_INO_REC) | ZRFS_INO_TEXT;
}
/* The cache key of a flate record file's bytes: its number without the top
 * bits, so each version has its own (below 2^56; batch blobs use bit 63).
 * A version comes round again after 256 changes: follow.c drops what its
 * key held before. */
static inline uint64_t zrfs_rec_cache_key(fuse_ino_t ino)
{
	return ino & ((UINT64_C(1) << 56) - 1);
}
/* Whether @ino is a record file's number (of any version), with its field,
 * id and version. */
bool zrfs_rec_decode(const struct zrfs *fs, fuse_ino_t ino, unsigned *field, uint64_t *id,
		     unsigned *version);
/* The @len characters at @s as a decimal without sign or leading zeros, at
 * most @max: 0, or -ENOENT (not such a number). */
int zrfs_parse_dec(const char *s, size_t len, uint64_t max, uint64_t *out);
/* A record file's name in field @field's directory, "<id>" or "<id>.<ext>"
 * (the extension the field's, or the record's original name's own,
 * zr_names_ext): 0 with the id (< @n), or -ENOENT; and the name of record
 * @id (never longer than ZRFS_NAME_MAX). Under the names lock. */
int zrfs_record_name_parse(const struct zrfs *fs, unsigned field, const char *name, uint64_t n,
			   uint64_t *id);
void zrfs_record_name_format(const struct zrfs *fs, unsigned field, uint64_t id, char *buf,
			     size_t cap);
/* The same for a record named @name (@name_len bytes; NULL: none), the
 * tree not asked: for a record the mount does not show yet. */
void zrfs_record_name_for(const struct zrfs *fs, unsigned field, uint64_t id, const char *name,
			  size_t name_len, char *buf, size_t cap);
/* Log a failed access to record @id of @field with the library's detail. */
void zrfs_log_record_error(struct zrfs *fs, zr_dataset *ds, unsigned field, uint64_t id, int rc);
/* Attributes of record file @ino ((@field, @id) as @v has it): 0, -ENOENT
 * (missing), -errno (logged). A raw value's holes (zr_record_holes) are
 * left out of st_blocks, as a sparse file's are. */
int zrfs_record_attr(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino, unsigned field,
		     uint64_t id, struct stat *st);
/* The file of (@field, @id)'s own modification time and permission bits
 * in @st, where the dataset keeps them (zr_names.mtime, zr_names.mode);
 * else they are left as they are. */
void zrfs_record_meta(struct zrfs *fs, struct zrfs_view *v, unsigned field, uint64_t id,
		       struct stat *st);
/* Whether record @id of @field has a file (is present, or cannot be
 * checked: a damaged record is listed and fails when accessed). */
bool zrfs_record_listed(struct zrfs_view *v, unsigned field, uint64_t id);
/* lseek(2)'s SEEK_DATA or SEEK_HOLE in the record's value (its holes the
 * chunk's, zr_record_seek): the offset, -ENXIO, or -errno (logged). */
int64_t zrfs_record_seek(struct zrfs *fs, struct zrfs_view *v, unsigned field, uint64_t id,
			 uint64_t off, int whence);
/* Reply to a read of record @id of @field in view @v, a flate value made
 * whole under cache key @key from the state @tag names: 0 where the key
 * says it all (a record file's number, zrfs_rec_cache_key: versions.c
 * keeps a number's bytes while the kernel holds it), else
 * zrfs_view_tag(@v). */
void zrfs_record_read(fuse_req_t req, struct zrfs *fs, struct zrfs_view *v, uint64_t key,
		      uint64_t tag, unsigned field, uint64_t id, size_t size, off_t off);
/* The cache tag of what is made from view @v alone (zrfs_record_read). */
static inline uint64_t zrfs_view_tag(const struct zrfs_view *v)
{
	return v->gen | UINT64_C(1) << 63;
}

/* Where one record's stored bytes are, for replies (npy_view.c, batch_files.c). */
struct zrfs_row {
	const void *mem;      /* the bytes, mapped or in memory; NULL: only in fd */
	int fd;               /* -1: not in a file */
	uint64_t pos;         /* where in fd */
	uint64_t len;         /* stored bytes; 0 for a missing or empty record */
	bool present;         /* false: the record is missing */
};
/* Rows of records @ids[0..n) of raw field @field in @v: where each is
 * stored (ids @v does not have are missing). 0 or a negative code (logged). */
int zrfs_records_stat(struct zrfs *fs, struct zrfs_view *v, unsigned field, const uint64_t *ids,
		      size_t n, struct zrfs_row *rows);
/* zrfs_records_stat, and where those rows are mapped, into rows[i].mem
 * (NULL for missing rows): @*g keeps the mappings, and the chunk files the
 * rows' fds name, open until released (zr_batch_release) after the reply. */
int zrfs_records_locate(struct zrfs *fs, struct zrfs_view *v, unsigned field, const uint64_t *ids,
			size_t n, struct zrfs_row *rows, zr_batch **g);
/* Rows of records @ids[0..n) of flate field @field for a .npy view: those
 * of the view's row size are inflated into this thread's view scratch
 * (scratch.c, ZRFS_SCRATCH_VIEW), the others get len 0 (read as zeros). */
int zrfs_records_inflate_rows(struct zrfs *fs, struct zrfs_view *v, unsigned field,
			      const uint64_t *ids, size_t n, struct zrfs_row *rows);

/* ---- npy_view.c: .npy views ---- */

/* A zero row piece comes from this much static zeros at a time. */
#define ZRFS_ZEROS (64u << 10)
/* The header of a view of @rows rows of @row_size bytes of a field of
 * @spec (the layout core's zr_npy_header() gives): 0 or a negative code. */
static inline int zrfs_npy_header(const zr_field_spec *spec, uint64_t rows, uint64_t row_size,
				  struct zrfs_npy *out)
{
	int n = zr_npy_header(spec, rows, out->hdr, sizeof out->hdr);

	if (n < 0)
		return n;
	out->hdr_len = (size_t)n;
	out->rows = rows;
	out->row_size = row_size;
	out->size = (uint64_t)n + rows * row_size;
	return 0;
}
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

/* ---- rights.c: what the caller may do, where the kernel asks zrfs ---- */

/* 0 if the caller of @req may do @mask (R_OK, W_OK, X_OK) to a file of
 * attributes @st as the mode bits say on a local filesystem, else -EACCES. */
int zrfs_may_access(fuse_req_t req, const struct stat *st, int mask);
/* Whether the caller of @req may change the owner and group of a file of
 * attributes @now as a SETATTR (@attr, @to_set) asks, as chown(2) allows:
 * root anything, an owner its file's group to one of its own groups. */
bool zrfs_may_chown(fuse_req_t req, const struct stat *now, const struct stat *attr, int to_set);
/* The mode a regular file of attributes @st keeps once the caller of @req
 * writes or truncates it: a caller without CAP_FSETID drops set-user-ID,
 * and set-group-ID where group execution is on or it is not in the file's
 * group, as the kernel does on a local filesystem. */
mode_t zrfs_mode_after_write(fuse_req_t req, const struct stat *st);

/* ---- reply.c: every reply ---- */

/* The errno (negative) for any code: ZR_ECORRUPT and other damage -EIO, a
 * bad spec -EINVAL, -errno as it is. */
int zrfs_errno(int rc);
void zrfs_reply_err(fuse_req_t req, int rc);
/* Reply to a request that returns no data: success for @rc >= 0 (a count,
 * a generation), else its errno. */
void zrfs_reply_status(fuse_req_t req, int64_t rc);
/* libfuse's other replies, as fuse_reply_attr(), _buf(), _open(), _write(),
 * _none(), _statfs() (those that return, 0 or -errno). */
struct statvfs;
void zrfs_reply_attr(fuse_req_t req, const struct stat *st, double timeout);
int zrfs_reply_buf(fuse_req_t req, const void *buf, size_t size);
int zrfs_reply_open(fuse_req_t req, const struct fuse_file_info *fi);
void zrfs_reply_write(fuse_req_t req, size_t count);
void zrfs_reply_none(fuse_req_t req);
void zrfs_reply_statfs(fuse_req_t req, const struct statvfs *sv);
void zrfs_reply_readlink(fuse_req_t req, const char *target);
/* An LSEEK's answer: offset @rc, or the error */
void zrfs_reply_seek(fuse_req_t req, int64_t rc);
/* lseek(2)'s SEEK_DATA or SEEK_HOLE (@whence) from @off in a file of @size
 * bytes without holes: the offset, or -ENXIO past its end */
int64_t zrfs_seek_plain(uint64_t size, uint64_t off, int whence);
/* Reply to a LOOKUP, a MKDIR or (@fi not NULL) a CREATE with @e: its
 * number (not 0) counted as handed to the kernel first, with the reference
 * subtree @t took for it (zrfs_inode_hand), and forgotten again if the
 * reply cannot be sent. 0, or a negative code (not handed: an ENOMEM
 * reply, or the requester is gone). */
int zrfs_reply_entry(fuse_req_t req, struct zrfs *fs, const struct zrfs_subtree *t,
		     const struct fuse_entry_param *e, const struct fuse_file_info *fi);
/* The same for a number counted already (zrfs_inode_hand, by a caller that
 * must count it under a lock of its own). */
int zrfs_reply_handed(fuse_req_t req, struct zrfs *fs, const struct fuse_entry_param *e,
		      const struct fuse_file_info *fi);
/* Attributes: a directory (0555) or a read-only file of @size bytes, with
 * the times of view @v. */
void zrfs_dir_attr(const struct zrfs *fs, const struct zrfs_view *v, fuse_ino_t ino,
		   struct stat *st);
void zrfs_file_attr(const struct zrfs *fs, const struct zrfs_view *v, fuse_ino_t ino,
		    uint64_t size, struct stat *st);
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
/* Reply with the pieces. One small file piece is read into a buffer and
 * sent from it; file pieces that carry their mapping are sent
 * from it with one writev (after asking the kernel for their pages, unless
 * @ahead: a prefetch did); others are read into a buffer with the core's
 * reader, or spliced (-o splice). */
void zrfs_reply_pieces(fuse_req_t req, struct zrfs *fs, struct zrfs_view *v,
		       const struct zrfs_pieces *p, bool ahead);

/* ---- readahead.c ---- */

/* Ask the kernel to read the file pieces of @p ahead, widened to whole
 * -o readaround windows, but not those already in the page cache; while the
 * dataset is warm (fs->warm), the first ZRFS_WARM_SAMPLE pieces stand for
 * the rest. Returns how many pieces it asked for. */
#define ZRFS_WARM_SAMPLE 16
size_t zrfs_read_ahead(struct zrfs *fs, const struct zrfs_pieces *p);
/* Ask for @len bytes at @pos of chunk file @fd, widened the same way. */
void zrfs_read_ahead_range(struct zrfs *fs, int fd, uint64_t pos, uint64_t len);

/* ---- cache.c: contents expensive to make, bounded by bytes ---- */

struct zrfs_cached;
/* Make the contents of a missing entry: *data from zrfs_cache_alloc() (may
 * be NULL when *len is 0); 0 or -errno, having freed whatever it made. */
typedef int (*zrfs_loader)(void *ctx, uint8_t **data, uint64_t *len);
int zrfs_cache_create(struct zrfs_cache **out, uint64_t bytes);
void zrfs_cache_destroy(struct zrfs_cache *c);
/* The contents under @key made from the state @tag names (a view's
 * generation, or 0 where the key says it all), made by @load on a miss;
 * release after use. Contents of one key and another tag are another
 * entry. */
int zrfs_cache_get(struct zrfs_cache *c, uint64_t key, uint64_t tag, zrfs_loader load, void *ctx,
		   struct zrfs_cached **out, const uint8_t **data, uint64_t *len);
bool zrfs_cache_has(struct zrfs_cache *c, uint64_t key, uint64_t tag);
/* Drop @key, of every tag (users keep their reference); one being made
 * is made for those asking now only, never cached: it may be of what the
 * key named before (the next asker makes it anew). */
void zrfs_cache_drop(struct zrfs_cache *c, uint64_t key);
/* Drop every cached entry whose key @match says yes to (not those loading). */
void zrfs_cache_drop_if(struct zrfs_cache *c, bool (*match)(uint64_t key, const void *ctx),
			  const void *ctx);
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
/* This thread's core reader, reading from @ds. 0 or -errno. */
int zrfs_scratch_reader(zr_dataset *ds, zr_reader **out);
/* Free the calling thread's scratch now (the main thread, before the
 * dataset closes); other threads' go when they exit. */
void zrfs_scratch_free(void);

/* ---- table.c: one small hash table ---- */

/* An entry's place in a table, embedded in the entry (zrfs_container()
 * finds the entry); the table is guarded by its owner's lock. */
struct zrfs_link {
	struct zrfs_link *next;
	uint64_t hash;
};
struct zrfs_table {
	struct zrfs_link **buckets;
	size_t cap, n;
};
#define zrfs_container(p, type, member) ((type *)(void *)((char *)(p) - offsetof(type, member)))
/* The hash of @n bytes at @p (with @seed: a field, a directory), and of a number. */
uint64_t zrfs_hash(const void *p, size_t n, uint64_t seed);
uint64_t zrfs_hash_u64(uint64_t x);
/* Add @l under @hash: 0, or -ENOMEM (an empty table that cannot grow). */
int zrfs_table_add(struct zrfs_table *t, struct zrfs_link *l, uint64_t hash);
void zrfs_table_del(struct zrfs_table *t, struct zrfs_link *l);
/* The entries under @hash, one after the other (NULL after the last): the
 * owner checks each is the one it wants. */
struct zrfs_link *zrfs_table_first(const struct zrfs_table *t, uint64_t hash);
struct zrfs_link *zrfs_table_next(const struct zrfs_link *l);
/* Hand every entry, in no order, to @fn until it returns other than 0:
 * that, or 0. @fn may remove the entry it is handed, and no other, and
 * must add none. */
int zrfs_table_each(const struct zrfs_table *t, int (*fn)(struct zrfs_link *l, void *ctx),
		    void *ctx);
/* Free the buckets (the entries are their owner's); or first hand every
 * entry to @drop, which frees it. */
void zrfs_table_free(struct zrfs_table *t);
void zrfs_table_drain(struct zrfs_table *t, void (*drop)(struct zrfs_link *l));

/* An entry's place in a list kept in order (of use, say), embedded in the
 * entry; the list is guarded by its owner's lock. */
struct zrfs_node {
	struct zrfs_node *prev, *next;
};
struct zrfs_list {
	struct zrfs_node *first, *last;
};
/* Put @n, in no list, last in @l; take @n out of @l. */
void zrfs_list_append(struct zrfs_list *l, struct zrfs_node *n);
void zrfs_list_del(struct zrfs_list *l, struct zrfs_node *n);
static inline bool zrfs_list_has(const struct zrfs_list *l, const struct zrfs_node *n)
{
	return n->prev || l->first == n;
}

/* ---- log.c: log lines about requests ---- */

#define ZRFS_LOG_BURST 10 /* lines a second a user can cause by asking */
/* Room for a name of ZRFS_NAME_MAX bytes, each escaped. */
#define ZRFS_LOG_NAME_MAX (4 * ZRFS_NAME_MAX + 1)
/* @name as a log line may hold it, in @buf (@cap bytes, cut short to fit). */
const char *zrfs_log_name(const char *name, char *buf, size_t cap);
/* Whether a line a user caused may be logged now (at most ZRFS_LOG_BURST
 * a second; the first left out says so, the next admitted how many). */
bool zrfs_log_admit(void);

/* the subtrees' interface, and each subtree's own calls */
#include "subtree_i.h"

#endif /* ZRFS_I_H */
