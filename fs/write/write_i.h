/*
 * write_i.h - the write layer of a writable mount (-o writable): what its
 * files share. The model it keeps is stated for users in zrfs(8), "WRITING
 * THROUGH THE MOUNT"; in the daemon's terms below.
 *
 * Files, from the top down; each calls only files below it (and fs/ files
 * below write/ in zrfs_i.h's map):
 *   mount.c       the writer opened before mounting, and closed
 *   rename.c      renames, of drafts, records and directories
 *   names.c       what a name is: files and directories made and removed,
 *                 attributes changed without a handle
 *   handles.c     open files that answer for themselves; when a close
 *                 publishes
 *   committer.c   the thread that commits ready drafts in groups
 *   publish.c     values become records: stores and commits
 *   overlay.c     the subtree zrfs_writing: files being written as lookups
 *                 and listings show them
 *   nodes.c       nodes, drafts, what numbers mean, aliases
 *   values.c      the bytes of a value being written
 *
 *
 * Objects
 *   node     a file being written: the value of one record's field that
 *            programs change (a record node, one per (field, id), shared by
 *            every descriptor open on it for writing), or a new file created
 *            in a field directory (a draft: a name, the bytes written, and
 *            the record it will replace or fill, or none: appended).
 *   value    a node's bytes: in memory, or a private O_TMPFILE in the
 *            dataset's directory; a record node copies the stored value in
 *            only when first changed (values.c).
 *   handle   one OPEN or CREATE for writing (fi->fh): a node, and the ops it
 *            answers with itself (handles.c).
 *   winode   what a number means to the write layer: a draft's
 *            (ZRFS_INO_STAGED | seq), or a record file's number that a
 *            rename moved onto another record (the kernel keeps an inode
 *            with its name: writes through it go to the record it is now),
 *            or a record file's number opened for writing (kept: the file
 *            keeps it when the bytes written give the record a new version;
 *            it shows the record's current bytes, as an inode written in
 *            place shows them to every holder).
 *            The kernel's lookups of either are counted in inodes.c, as of
 *            every number; a winode goes once its draft is not listed and
 *            the kernel holds the number no more. A draft's number stays its
 *            file's once the draft is a record (its identity): lookups and
 *            listings of the record's file give it, also once the kernel
 *            forgot it (IDENTITIES_MAX of those at most), until the record's
 *            value is another file's, as a file keeps its inode number on
 *            any filesystem.
 *   alias    a name that is not an id but names a record in a field
 *            directory: a new file's name after it became a record, or a
 *            record's file renamed to it. Resolved, not listed; bounded.
 *
 * When bytes become a record's value ("published")
 *   - a record node: at the close of a descriptor by a process that wrote
 *     since it was stored (its descriptor table: fi->lock_owner, the same for
 *     its threads; the others' bytes go with it: a shared log's lines), at
 *     fsync, or at the last close (RELEASE) of what is left;
 *     never at the close of a duplicate before anything was written, nor of a
 *     descriptor another process inherited, nor (from a handle's second
 *     FLUSH on) of one while the same process keeps another descriptor of
 *     the file open (/proc says; a shell's `cmd >&3` in a loop). The close
 *     is answered once the mount shows the commit (EIO after 10 s if it
 *     cannot: follow.c).
 *   - a draft: "ready" at those same closes; stored and committed with a
 *     group (publish.c) or at once by fsync; until its group commits it is a
 *     temporary file: renamed, it is still a draft; removed, it never was.
 *     A draft renamed onto a record's name stands in for that record's file
 *     (its target): removed or renamed away, it takes the value it replaced
 *     with it (committed then: the name's old value never comes back).
 *   - a process that dies of a signal publishes nothing by its exit (the
 *     kernel sends the same FLUSH for an exit as for a close: the daemon
 *     reads the closer's exit status in /proc): a record keeps its stored
 *     value, a draft goes away; but where another process wrote too since
 *     it was stored, nothing is dropped: that one's close publishes.
 *   - a removal of a record's file: the name goes at once (a table of
 *     removals waiting, which lookups and listings consult); the group
 *     commits it, the first thing it makes in the writer, and so does any
 *     commit made through the mount before (publish.c).
 *   - a name starting with a dot is a temporary file until renamed onto
 *     another name: nothing stores it by itself (fsync included).
 * Other readers see a record's stored value until it is published (but
 * the thread writing it, which reads what it wrote through any descriptor
 * it opens meanwhile: overlay.c); a draft reads as what has been written
 * (it has no stored value). A descriptor of a record's file removed or
 * replaced reads the value it had (its node loads it first:
 * zrfs_nodes_keep).
 *
 * Threads
 *   request threads   every FUSE operation; a close that publishes a record
 *                     node stores and commits on its thread, under the
 *                     writer's lock, and is answered by the follower;
 *   the committer     (committer.c, with publish.c) stores ready drafts and
 *                     commits them in groups, makes the mount show the
 *                     commit, settles them;
 *   the follower      (follow.c) publishes views and answers the requests
 *                     that wait for a generation.
 *
 * Locks, in the order they are taken (never the other way):
 *   w->lock           the writer: a change to the dataset and its commit,
 *                     one at a time (and the view published after it);
 *   node->lock        a node's value and what was written to it (a record
 *                     node's publication holds it through the commit);
 *   the names lock    (view.c, fs->state) held for reading by lookups and
 *                     listings, written by a view's publication: what they
 *                     show of a node (size, time, mode) is atomic;
 *   w->names_lock     nodes' names, kinds and targets, every table here,
 *                     the ready count; held briefly, never across a commit
 *                     or a system call on a value.
 * No lock is taken while one after it in this order is held. A request that
 * decides without the writer's lock whether it needs it (a draft's close or
 * rename needs none; a record's does) and finds that it does, lets go of
 * what it holds, takes the writer's lock first and decides again under it
 * (handles.c's publish, rename.c): once, as a record stays a record.
 * A node's size and kind are atomic: listings read the size under the names
 * lock alone, a close reads the kind before it takes any lock.
 */
#ifndef ZRFS_WRITE_I_H
#define ZRFS_WRITE_I_H

#include "zrfs_i.h"

#include <string.h>

#define NO_ID UINT64_MAX
/* How long a timed group waits for the directory listings open to end:
 * a commit under a listing moves new files from the drafts' positions to
 * the records' (a listing would miss them). */
#define LISTING_WAIT_MS 500
/* How long a closed draft of a dot name in tree/ waits before a group
 * takes it: rsync's, editors' and git's temporary files are renamed to
 * their names or removed by then (each stored under its dot name would
 * cost a store and a commit more). An fsync, a sync of its directory or
 * the unmount takes it at once. */
#define LATE_MS 1000
/* Drafts closed and ready waiting for their group, at most: past it a
 * create commits them first (names.c). A group goes at half of it. */
#define DRAFTS_MAX 1024
/* Removals waiting for their group, at most: past it a removal commits
 * them first (names.c). A group goes at half of it. */
#define GONE_MAX 65536
/* Aliases kept; the oldest is forgotten past it. */
#define ALIASES_MAX 65536
/* Directories made in field directories, at most (stress-ng --dir makes
 * 8192 an instance; each costs under 1 KiB, its name included). */
#define DIRS_MAX 65536
/* Record numbers moved by renames, kept until the kernel forgets them. */
#define MOVED_MAX (1u << 20)
/* Records' files that keep their numbers once the kernel forgets them (a
 * file made through the mount is its number from create to removal); past
 * it, one the kernel forgets takes its record's number again. */
#define IDENTITIES_MAX 65536
/* Listing positions of drafts in a field directory (records: 2 + id). */
#define DRAFT_POS ZRFS_OVERLAY_POS

/* ---- values.c: the bytes of a value being written ---- */

/* In memory (fd < 0) up to VALUE_MEM_MAX bytes while all of them take less
 * than VALUE_MEM_BUDGET, else in a private file in the dataset's directory
 * (nothing is written outside it). Only [0, size) means anything; the
 * owner's lock guards it, but size may be read without (a listing). */
struct zrfs_value {
	char *mem;
	size_t cap;
	int fd;
	atomic_uint_least64_t size;
};
#define VALUE_MEM_MAX (1u << 20)
#define VALUE_MEM_BUDGET ((size_t)64 << 20)

/* The longest value a record of field @f may take. */
uint64_t zrfs_value_max(const struct zrfs_field *f);
/* Room for a class as decimal text (a draft's, before it is parsed). */
#define VALUE_TEXT_MAX 64
/* Bound the private files to the daemon's descriptor limit as it is now. */
void zrfs_values_limit(void);
void zrfs_value_init(struct zrfs_value *v);
void zrfs_value_free(struct zrfs_value *v);
/* Write @n bytes at @off (a hole before reads as zeros): 0 or -errno. */
int zrfs_value_write(struct zrfs_value *v, int dirfd, const void *buf, size_t n, uint64_t off);
/* Up to @n bytes at @off: the count, or -errno. */
ssize_t zrfs_value_read(const struct zrfs_value *v, void *buf, size_t n, uint64_t off);
/* lseek(2)'s SEEK_DATA or SEEK_HOLE from @off: the holes of its private
 * file (none in memory). The offset, or -ENXIO. */
int64_t zrfs_value_seek(const struct zrfs_value *v, uint64_t off, int whence);
int zrfs_value_truncate(struct zrfs_value *v, int dirfd, uint64_t size);
/* Bytes [@off, @off + @n) of @v, within its size, read as zeros from now
 * on: 0 or -errno. */
int zrfs_value_zero(struct zrfs_value *v, uint64_t off, uint64_t n);
/* Make @v the stored value of (@field, @id) in @ds (missing: empty): kept
 * in memory when it fits, else copied into a private file a piece at a
 * time (zr_record_copy), never whole in memory. 0 or a negative code. */
int zrfs_value_load(struct zrfs_value *v, int dirfd, zr_dataset *ds, unsigned field,
		    uint64_t id);
/* The bytes of @v to store, in *out (mapped from its file when it has one):
 * 0 or -errno; zrfs_value_unmap() after. */
int zrfs_value_bytes(const struct zrfs_value *v, zr_value *out, void **map);
void zrfs_value_unmap(void *map, size_t len);

/* ---- nodes.c: nodes, names and numbers ---- */

enum wnode_kind { WN_RECORD, WN_DRAFT, WN_DIR };

/* Writers of one value kept apart (a shared log's appenders): past them a
 * value is taken as everyone's. */
#define WRITERS_KEPT 4

/* A record id that a delete or a rename moves (zrfs_nodes_retarget) before
 * the commit that moves it is in the view: a request holding an older view
 * reads the id that view has, never another record's (zrfs_moved_at). */
struct wmoved {
	uint64_t was;         /* the id before the last move */
	uint64_t since;       /* the generation from which the id is the new one */
};

static inline uint64_t zrfs_moved_at(const struct wmoved *m, uint64_t now, uint64_t gen)
{
	return gen < m->since ? m->was : now;
}

struct wnode {
	atomic_uint refs;     /* handles, tables, whoever works on it */
	unsigned field;
	/* under w->names_lock; kind also read without it (a draft's close) */
	_Atomic(enum wnode_kind) kind;
	uint64_t id;          /* a record node's record; a draft's target (NO_ID: appended) */
	struct wmoved id_moved; /* ... a draft's target as older views have it */
	fuse_ino_t parent;    /* a draft's (or directory's) directory: its field's, or a directory */
	char *name;           /* its name there */
	fuse_ino_t ino;       /* a draft's number (ZRFS_INO_STAGED | seq) */
	size_t children;      /* a directory's drafts and directories */
	size_t subdirs;       /* ... its directories */
	uint64_t seq;         /* a draft's: creation order, its listing position */
	uint64_t stored;      /* a draft stored as this record, not committed yet (NO_ID) */
	bool storing;         /* a group decided where it goes and is storing it: a
			       * rename or unlink takes the writer's lock first */
	struct wmoved stored_moved; /* ... and the record older views have */
	uint64_t gen;         /* the commit that made a draft a record (0: none yet) */
	bool ready;           /* a draft closed after its last write: the next group takes it */
	bool late;            /* ... a dot name of tree/: a group takes it LATE_MS later */
	uint64_t ready_size;  /* its bytes as the group counts them, while ready */
	char *dirpath;        /* a draft in tree/: its directory's path below tree/ */
	bool tree;            /* a draft in tree/ (its record named by its path) */
	bool fieldless;       /* ... whose name makes no field's file (a key's name
			       * without a field's extension): a temporary file */
	bool text;            /* ... of a field whose files hold decimal text */
	bool listed;          /* a draft in the tables by name and on the list */
	bool detached;        /* replaced or removed: publishes nothing any more */
	atomic_bool keep;     /* ... with descriptors open, its stored value not
			       * loaded yet: loaded before its record changes
			       * (zrfs_nodes_keep; on w->keep by keep_next) */
	struct wnode *keep_next;
	unsigned handles;     /* open for writing */
	struct zrfs_link by_name, by_record, by_target;
	struct wnode *next, *prev; /* drafts, oldest first */
	/* under lock */
	pthread_mutex_t lock;
	struct zrfs_value val;
	atomic_bool loaded;   /* its value holds what it is written over (a draft's: always;
			       * set under lock after the value, read without it) */
	bool changed;         /* differs from what is stored */
	uint64_t writers[WRITERS_KEPT]; /* lock owners that wrote since stored (0: free) */
	bool many_writers;    /* ... more than fit: any writer's close publishes */
	pid_t cutter;         /* process that ftruncate()d it since stored, nothing written */
	pid_t shaper;         /* process that emptied it opening it (O_TRUNC) or created it */
	int error;            /* a write failed (-errno): never stored */
	/* written under lock, read without it (a lookup's attributes, under
	 * the names lock): each value before its flag */
	_Atomic int64_t mtime; /* its time, ns: of its last change, or set (utimensat) */
	atomic_bool mtime_set; /* ... or none since stored: the time it is stored at */
	_Atomic uint32_t mode; /* a draft's mode (st_mode), where the dataset keeps */
	atomic_bool mode_set; /* ... modes: from its create, or a chmod since */
	_Atomic int64_t atime; /* its access time, where the dataset keeps them: */
	atomic_bool atime_set; /* ... a draft's create's, or set since (utimensat) */
	_Atomic int64_t ctime; /* the time of its last change (value, name, mode, */
	atomic_bool ctime_set; /* ... times), where the dataset keeps change times */
	_Atomic uint32_t uid, gid; /* a draft's owner and group, where the dataset keeps */
	atomic_bool owner_set;     /* ... them: its maker's, or a chown since */
};

/* What a number means to the write layer (see the top): kept while its
 * draft is listed or the kernel holds the number (inodes.c). */
struct winode {
	struct zrfs_link link;
	fuse_ino_t ino;
	struct wnode *draft;  /* a draft's number while it is one (referenced) */
	unsigned field;       /* else the record it shows */
	uint64_t id;          /* NO_ID: gone (ESTALE) */
	struct wmoved id_moved;  /* ... and the id older views have */
	bool text;            /* shown as tree/ shows it: a class as decimal text */
	bool moved;           /* a record's number moved by a rename */
	struct winode *older, *newer; /* moved numbers, oldest first */
	bool kept;            /* a record's number opened for writing, kept as its file's */
	bool identity;        /* a draft's (or kept) number that is its record's file */
	bool filed;           /* no draft's, an id's: in record_files, by (field, id) */
	struct zrfs_link by_record;
	bool shown;           /* it showed a file: with these, which an open file */
	uint64_t last_size;   /* removed since keeps (fstat of it: nlink 0, not ESTALE) */
	mode_t last_mode;
	struct timespec last_atime, last_mtime, last_ctime;
	/* a record's file unlinked (removed, replaced) while the kernel held
	 * it: the record it was in the view of generation was_gen, the one
	 * before the change, which is pinned to the number once the change
	 * is shown (zrfs_write_shown). An open of the number then reads that
	 * value, as a file unlinked between a program's lookup and its open
	 * is opened on any filesystem. */
	unsigned was_field;
	uint64_t was_id;      /* NO_ID: none */
	uint64_t was_gen;
};

struct walias {
	struct zrfs_link link;
	fuse_ino_t parent;    /* the directory it is in */
	unsigned field;
	uint64_t id;
	struct wmoved id_moved; /* ... and the id older views have */
	struct walias *older, *newer;
	bool filed;           /* an id's: in alias_records, by (field, id) */
	struct zrfs_link by_record;
	char name[];
};

/* A file removed whose removal is not committed yet (publish.c): its
 * record as the view has it, which lookups and listings no longer show. */
struct wgone {
	struct zrfs_link link;
	unsigned field;
	uint64_t id;          /* in the view, and the writer's until applied */
	unsigned version;     /* its file's version there (zrfs_rec_version) */
	uint64_t gen;         /* that view's generation: the next commit has it */
	bool by_name;         /* removed from tree/: the record goes with its last value */
};

struct whandle;

struct zrfs_writes {
	/* mount.c, fixed once mounted */
	struct zrfs *fs;      /* the mount it writes for */
	zr_dataset *ds;       /* the writer (ZR_RDWR) */
	int dirfd;            /* the dataset's directory: private files */
	uint64_t made_from;   /* ids from here on were made through this mount */
	char holder[4200];    /* what DATASET/writer says of the mount */
	char mountpoint[4096]; /* where it is mounted, resolved ("": unknown) */
	pthread_mutex_t lock; /* the writer */
	/* nodes.c, under names_lock */
	pthread_mutex_t names_lock;
	struct zrfs_table drafts_by_name, targets, records, inodes, aliases;
	/* winodes of records' files, identities among them, and aliases, by
	 * (field, id): a record's id that moves finds them there */
	struct zrfs_table record_files, alias_records;
	atomic_size_t nidentities; /* read without names_lock: whether to look at all */
	atomic_size_t ntargets; /* targets.n, the same */
	size_t nstored;       /* drafts listed with stored set */
	atomic_size_t nkept;  /* ... winodes of records' own numbers kept (not moved) */
	struct wnode *first, *last; /* drafts listed, oldest first */
	struct wnode *keep;   /* nodes detached whose values are to be kept (referenced) */
	size_t ndirs;         /* directories made through the mount */
	int64_t dir_time[ZR_FIELDS_MAX]; /* field directories' last change, ns (0: none) */
	size_t dir_subdirs[ZR_FIELDS_MAX]; /* ... directories made in them */
	unsigned listings;    /* directories open for listing (OPENDIR to RELEASEDIR) */
	struct wnode **committing; /* the drafts of a group being committed, */
	size_t ncommitting;   /* ... settled where the view that has it is made */
	uint64_t committing_gen; /* ... the commit's generation */
	bool grouping;        /* the committer is committing a group */
	pthread_cond_t grouped; /* ... and has (the mount shows it) */
	uint64_t seq;
	struct walias *alias_oldest, *alias_newest;
	size_t naliases;
	struct winode *moved_oldest, *moved_newest;
	atomic_size_t nmoved; /* read without names_lock: whether to look at all */
	uint64_t shown_gen;   /* the generation of the view shown */
	fuse_ino_t *unlinked; /* numbers unlinked since the last view shown (was_id) */
	size_t nunlinked, unlinked_cap;
	struct zrfs_table gone; /* removals waiting for their group (struct wgone) */
	atomic_size_t ngone;  /* ... how many: read without names_lock */
	bool gone_applied;    /* ... made in the writer, their commit failed (w->lock) */
	/* the class names of the label the paths give (zr_names.label),
	 * by name, each with its number (publish.c) */
	struct wclass {
		char *name;
		int64_t no;
	} *classes;
	size_t nclasses;
	uint64_t tree_saved_ms;   /* when they were last kept (zrfs_now_ms) */
	atomic_bool tree_now;     /* keep them with the next group (sync, unmount) */
	atomic_bool tree_changed; /* tree/'s directories or links changed: the next
				   * commit keeps them (zrfs_tree_save) */
	/* publish.c: the group; under names_lock, the committer waits on wake */
	pthread_cond_t wake;
	pthread_t committer;
	bool committer_running, stopping;
	size_t nready;
	uint64_t ready_bytes, ready_since_ms;
	size_t nlate;         /* drafts late (ready later), since late_since_ms */
	uint64_t late_since_ms;
	unsigned commit_ms;   /* -o commit_ms: the longest a ready draft waits */
	uint64_t commit_bytes; /* -o commit_size: or this many bytes of them */
	unsigned retry_ms;    /* after failed commits: the wait added before the next */
	/* handles.c: every handle open (freed at unmount: no RELEASE comes
	 * after it), and those just opened for writing, for the SETATTR of an
	 * open(O_TRUNC), which comes without its handle */
	pthread_mutex_t handles_lock;
	struct whandle *handles, *fresh;
	atomic_size_t nhandles; /* read without handles_lock: whether to look at all */
	struct zrfs_reading *reading; /* handles open for reading (zrfs_reading_open) */
};

/* The times a SETATTR asks for (utimensat, futimens), in ns since the
 * epoch: ZR_MTIME_NONE where it asks for none. */
struct wtimes {
	int64_t atime, mtime;
};

/* The times a SETATTR asks for, into *@t: whether it asks for any. */
static inline bool zrfs_asked_times(const struct stat *attr, int to_set, struct wtimes *t)
{
	int64_t now = to_set & (FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW) ? zrfs_now_ns()
										      : 0;

	t->atime = to_set & FUSE_SET_ATTR_ATIME_NOW ? now
		   : to_set & FUSE_SET_ATTR_ATIME   ? zr_time_ns(attr->st_atim)
						     : ZR_MTIME_NONE;
	t->mtime = to_set & FUSE_SET_ATTR_MTIME_NOW ? now
		   : to_set & FUSE_SET_ATTR_MTIME   ? zr_time_ns(attr->st_mtim)
						     : ZR_MTIME_NONE;
	return t->atime != ZR_MTIME_NONE || t->mtime != ZR_MTIME_NONE;
}

/* The processes (descriptor tables: lock owners) that wrote @n since it
 * was stored (n->lock held): @owner wrote; whether anyone did, whether
 * @owner did, whether @owner alone did; none did (stored). */
static inline void zrfs_node_wrote(struct wnode *n, uint64_t owner)
{
	for (unsigned i = 0; i < WRITERS_KEPT; i++)
		if (n->writers[i] == owner || !n->writers[i]) {
			n->writers[i] = owner;
			return;
		}
	n->many_writers = true;
}

static inline bool zrfs_node_written(const struct wnode *n)
{
	return n->writers[0] || n->many_writers;
}

static inline bool zrfs_node_written_by(const struct wnode *n, uint64_t owner)
{
	for (unsigned i = 0; i < WRITERS_KEPT && n->writers[i]; i++)
		if (n->writers[i] == owner)
			return true;
	return n->many_writers;
}

static inline bool zrfs_node_written_by_only(const struct wnode *n, uint64_t owner)
{
	return !n->many_writers && n->writers[0] == owner && !n->writers[1];
}

static inline void zrfs_node_writers_clear(struct wnode *n)
{
	memset(n->writers, 0, sizeof n->writers);
	n->many_writers = false;
}

/* @n's name, mode or times changed at @ns: its change time. */
static inline void zrfs_node_changed(struct wnode *n, int64_t ns)
{
	n->ctime = ns;
	n->ctime_set = true;
}

/* @n was changed now (n->lock held, or not shared yet): its time is now's,
 * shown until its value is stored and stored with it, as a local file's
 * modification time is its last write's, not its close's or commit's. */
static inline void zrfs_node_touched(struct wnode *n)
{
	n->mtime = zrfs_now_ns();
	n->mtime_set = true;
	zrfs_node_changed(n, n->mtime);
}

/* The times, mode and owner set on node @n, if any, in @st (no lock
 * needed). */
static inline void zrfs_node_meta(const struct wnode *n, struct stat *st)
{
	int64_t stored = zr_time_ns(st->st_ctim);

	if (n->mode_set)
		st->st_mode = (st->st_mode & S_IFMT) | (n->mode & 07777);
	if (n->owner_set) {
		st->st_uid = n->uid;
		st->st_gid = n->gid;
	}
	if (n->mtime_set) /* changed since its last commit */
		zrfs_stat_mtime(st, n->mtime, !n->ctime_set);
	if (n->atime_set)
		st->st_atim = zr_ns_time(n->atime);
	/* the later of the stored one (a rename stores it) and its own */
	if (n->ctime_set)
		st->st_ctim = zr_ns_time(n->ctime > stored ? n->ctime : stored);
}

/* Whether @name, in a field directory, names no record but is a temporary
 * file (a dot name). */
static inline bool zrfs_name_hidden(const char *name)
{
	return name[0] == '.';
}

struct wnode *zrfs_node_ref(struct wnode *n);
void zrfs_node_put(struct wnode *n);
/* A new node (one reference, the caller's), not in any table. */
struct wnode *zrfs_node_new(unsigned field, enum wnode_kind kind, uint64_t id);
/* The record node of (@field, @id), made if there is none (referenced):
 * NULL out of memory. */
struct wnode *zrfs_node_of_record(struct zrfs_writes *w, unsigned field, uint64_t id);
/* Drafts (new files, and directories made for them: WN_DIR): add @d
 * (with its parent, name and field; its number given here) to the tables
 * and the list; find one by name (not settled in view generation @gen: 0
 * for any); move it; take it off every table (the node keeps its
 * references). */
int zrfs_draft_add(struct zrfs_writes *w, struct wnode *d);
struct wnode *zrfs_draft_find(struct zrfs_writes *w, fuse_ino_t parent, const char *name,
			      uint64_t gen);
int zrfs_draft_rename(struct zrfs_writes *w, struct wnode *d, fuse_ino_t parent, const char *name);
void zrfs_draft_unlist(struct zrfs_writes *w, struct wnode *d);
/* Whether a draft is in directory @dir (under names_lock): a directory of
 * tree/ that has one is not empty, whatever the index holds. */
bool zrfs_drafts_in(struct zrfs_writes *w, fuse_ino_t dir);
/* The directory made through the mount that @ino is (NULL: none). */
struct wnode *zrfs_node_dir(struct zrfs_writes *w, fuse_ino_t ino);
/* Whether draft @d is a temporary file: in a field directory, its name or
 * a directory's it is in starts with a dot; in tree/, where a dot name is
 * a name of the tree (.gitignore), its name makes no field's file (a key's
 * without one). */
bool zrfs_node_hidden(struct zrfs_writes *w, const struct wnode *d);
/* @d's path below its field directory ("dir/name"), or below tree/, into
 * @buf: 0 or -ENAMETOOLONG. */
int zrfs_node_path(struct zrfs_writes *w, const struct wnode *d, char *buf, size_t cap);
/* The directory @n's paths in log lines are below: its field's, or tree. */
const char *zrfs_node_top(const struct zrfs *fs, const struct wnode *n);
/* The most bytes node @n's value may hold: its field's (a draft of no field
 * yet: any record's; a class as text: VALUE_TEXT_MAX). */
uint64_t zrfs_node_max(const struct zrfs *fs, const struct wnode *n);
/* Draft @d will replace or fill record @id (NO_ID: none, appended), in
 * every view from now on (a rename onto its name); the listed draft that
 * will replace (@field, @id), if any. */
void zrfs_draft_target(struct zrfs_writes *w, struct wnode *d, uint64_t id);
struct wnode *zrfs_draft_targeting(struct zrfs_writes *w, unsigned field, uint64_t id);
/* Draft @d is stored as record @id (NO_ID: not stored), not committed yet. */
void zrfs_draft_stored(struct zrfs_writes *w, struct wnode *d, uint64_t id);
/* Draft @d's target in view generation @gen: a delete or a rename moves it
 * (zrfs_nodes_retarget) before that view has the move. */
static inline uint64_t zrfs_draft_target_at(const struct wnode *d, uint64_t gen)
{
	return zrfs_moved_at(&d->id_moved, d->id, gen);
}
/* Whether draft @d is a record in view generation @gen (its commit shows). */
static inline bool zrfs_draft_settled(const struct wnode *d, uint64_t gen)
{
	return d->gen && d->gen <= gen;
}
/* Whether draft @d's name is gone (removed, or replaced by a rename onto
 * it) before it was stored: an open file's links are then 0. Under
 * names_lock. */
static inline bool zrfs_draft_removed(const struct wnode *d)
{
	return !d->listed && d->stored == NO_ID;
}
/* @d became record @id: a record node from now on (its number shows the
 * record), its name an alias if it is not the record's own. Under the
 * names lock and w->names_lock. */
void zrfs_draft_settle(struct zrfs *fs, struct wnode *d, uint64_t id);
/* The node a record node was for @field/@id is dropped from the table
 * when nothing needs it (no handle, nothing to store). */
void zrfs_node_release(struct zrfs_writes *w, struct wnode *n);
/* The number of record @id's file of @field (@text: its twin in tree/)
 * that is the number the kernel was handed when the file was created (a
 * new file keeps its number when committed), as of the view of generation
 * @gen; 0 if none. */
fuse_ino_t zrfs_winode_identity(struct zrfs_writes *w, unsigned field, uint64_t id, bool text,
				uint64_t gen);
/* Inode numbers: what @ino is to the write layer (NULL: nothing); a
 * record's number @ino moved onto (field, @id), tracked if the kernel holds
 * it, @hook (the overlay) told when it forgets it; @ino let go (the
 * overlay's let_go: it goes if nothing keeps it). */
struct winode *zrfs_winode_find(struct zrfs_writes *w, fuse_ino_t ino);
void zrfs_winode_moved(struct zrfs_writes *w, fuse_ino_t ino, unsigned field, uint64_t id,
		       const struct zrfs_subtree *hook);
void zrfs_winode_let_go(struct zrfs_writes *w, fuse_ino_t ino);
/* Removals waiting for their group (under names_lock): the file of
 * (@field, @id), of @version in the view of generation @gen, is removed
 * (0 or -ENOMEM); whether it is, in a view of generation @gen (one past
 * the removal's has its commit: the id may be another record's by then);
 * all of them (an array to free, NULL out of memory); none any more. */
int zrfs_gone_add(struct zrfs_writes *w, unsigned field, uint64_t id, unsigned version,
		  bool by_name, uint64_t gen);
bool zrfs_gone_has(const struct zrfs_writes *w, unsigned field, uint64_t id, unsigned version,
		   uint64_t gen);
struct wgone **zrfs_gone_all(const struct zrfs_writes *w, size_t *count);
void zrfs_gone_clear(struct zrfs_writes *w);
/* Aliases: the record @name names in directory @parent (0 with *id, or
 * -ENOENT); name one (of field @field); drop one, or all in @parent. */
/* The record alias @name in @parent names in a view of generation @gen
 * (UINT64_MAX: the writer's, now). */
int zrfs_alias_find(struct zrfs_writes *w, fuse_ino_t parent, const char *name, uint64_t gen,
		    uint64_t *id);
void zrfs_alias_set(struct zrfs_writes *w, fuse_ino_t parent, unsigned field, const char *name,
		    uint64_t id);
void zrfs_alias_drop(struct zrfs_writes *w, fuse_ino_t parent, const char *name);
void zrfs_aliases_drop_in(struct zrfs_writes *w, fuse_ino_t parent);
/* Everything here that refers to record @from of @field (every field if
 * @field is ZR_FIELDS_MAX) refers to @to from now on (NO_ID: to nothing):
 * a record moved by a delete, or a value moved by a rename. Under w->lock:
 * the move is the next commit's; views before it still read @from. */
void zrfs_nodes_retarget(struct zrfs_writes *w, unsigned field, uint64_t from, uint64_t to);
/* (w->lock held, no node's lock nor names_lock) Before a change of the
 * stored value of (@field, @id) (NO_ID: none) that is not made through its
 * node: the value of a node descriptors have open on it, and of those
 * detached from their records (w->keep), loaded, so that they read the
 * bytes they had, as an unlinked file's descriptors do (a node whose lock
 * the caller holds is loaded: it is never waited for). */
void zrfs_nodes_keep(struct zrfs *fs, unsigned field, uint64_t id);
/* Handles open on record node (@field, @id): their inode was replaced by a
 * rename; what they write is never published (under names_lock: put on
 * w->keep where its value is to be loaded). */
void zrfs_nodes_detach_record(struct zrfs_writes *w, unsigned field, uint64_t id);
/* Drop everything at unmount, saying what was never stored. */
void zrfs_nodes_free_all(struct zrfs *fs);
/* Whether @ino is a directory files are written in (a field's, or one
 * made in it), and its field. Under names_lock. */
bool zrfs_dir_field(struct zrfs *fs, fuse_ino_t ino, unsigned *field);
/* Whether @ino is a directory of tree/ that files are written in (a
 * writable mount of a dataset that keeps names). Under the names lock. */
bool zrfs_dir_tree(struct zrfs *fs, fuse_ino_t ino);
/* The node a write through @ino reaches (referenced, one more handle
 * counted if @handle): a draft's number, a number that shows a record (a
 * record file's, one moved by a rename, a draft's that became a record),
 * or NULL with *rc: -EPERM (meta.json, views, batches: made, not stored),
 * -EISDIR, -ESTALE (shows nothing any more), -ENOMEM; or -EAGAIN unless
 * @settled: removals wait, and a group may be moving records' ids (under
 * w->lock after zrfs_publish_removals, @settled: none can).
 * zrfs_node_of_number (handles.c) does both. */
struct wnode *zrfs_node_of_ino(struct zrfs *fs, fuse_ino_t ino, bool handle, bool settled,
			       int *rc);
/* Load record node @n's stored value if it has not (n->lock held): 0 or a
 * negative code. */
int zrfs_node_load(struct zrfs *fs, struct wnode *n);

/* ---- publish.c: values become records; new files in groups ---- */

/* Store record node @n's value and commit (w->lock and n->lock held): the
 * generation, or a negative code (logged). */
int64_t zrfs_publish_record(struct zrfs *fs, struct wnode *n);
/* A draft is ready (closed after its last write), or not any more
 * (written again, committed, gone): the group takes it, or not. Under
 * names_lock. */
void zrfs_publish_ready(struct zrfs *fs, struct wnode *d);
void zrfs_publish_unready(struct zrfs_writes *w, struct wnode *d);
/* The drafts late are ready now (a sync of a directory, the unmount, or
 * LATE_MS since the first of them). Under names_lock. */
void zrfs_publish_late(struct zrfs *fs);
/* Store the ready drafts (and @d if not NULL: an fsync) and commit them now,
 * make the mount show the commit and settle them: the generation (0: none
 * was waiting), or a negative code (@d's failure; with @d NULL, the first
 * store's where none could be stored). */
int64_t zrfs_publish_group(struct zrfs *fs, struct wnode *d);
/* (w->lock held) Commit the removals waiting (zrfs_gone_add), alone: the
 * generation (0: none waited), or a negative code (logged). They also go
 * with every group and every commit made through the mount, first. */
int64_t zrfs_publish_removals(struct zrfs *fs);
/* Take w->lock and commit the removals waiting, so that no group moves
 * ids while it is held: as zrfs_publish_removals; w->lock stays held
 * whatever it returns. */
int64_t zrfs_lock_settled(struct zrfs *fs);
/* The late drafts made ready, then the group: what is waiting, all of it
 * (a sync of a directory, the unmount). */
int64_t zrfs_publish_all(struct zrfs *fs);
/* (w->lock held) Make (@field, @id) missing, then remove the record if it
 * has no value left and was made through this mount or, @by_name, is
 * known by its name (tree/: ids are not what its users see); move the value of
 * @from onto @to (@to the length: a new record, named @name where the
 * dataset keeps names), removing @from likewise; name record @id @name.
 * Each commits and makes the mount show it: the generation (0: nothing to
 * commit), or a negative code (logged). */
int64_t zrfs_publish_remove(struct zrfs *fs, unsigned field, uint64_t id, bool by_name);
/* (w->lock held) A new file stood in for record @id's file of @field (a
 * rename onto it) and was removed or renamed away before its group: the
 * value it replaced goes as zrfs_publish_remove() removes one; a record
 * without a value there (a name filled in) is left. As it. */
int64_t zrfs_publish_replaced(struct zrfs *fs, unsigned field, uint64_t id, bool by_name);
int64_t zrfs_publish_move(struct zrfs *fs, unsigned field, uint64_t from, uint64_t to,
			  const char *name, bool by_name);
int64_t zrfs_publish_name(struct zrfs *fs, unsigned field, uint64_t id, const char *name);
/* (w->lock held) Name record @id @name (a path in tree/) and remove record
 * @gone (NO_ID: none), every value of it: a file renamed onto another in a
 * tree of paths. The generation, or a negative code (logged). */
int64_t zrfs_publish_rename(struct zrfs *fs, uint64_t id, const char *name, uint64_t gone);
/* (w->lock held) Records @ids (@n) were below directory @from of tree/,
 * now @to: their names (and labels, from a class directory) follow, in one
 * commit; their change times stay, as a file's in a directory renamed on a
 * local filesystem. The generation, or a negative code (logged). */
int64_t zrfs_publish_moved(struct zrfs *fs, const uint64_t *ids, size_t n, const char *from,
			   const char *to);
/* Times @t set on node @n (utimensat), where the dataset keeps them
 * (zr_names.mtime, .atime), and its change time now's: kept with a value
 * being written (stored with it), else stored and committed now (w->lock
 * taken here). The generation (0: kept), or a negative code. */
int64_t zrfs_publish_times(struct zrfs *fs, struct wnode *n, const struct wtimes *t);
/* View generation @gen is being made the mount's in place of @old
 * (fs->view_shown, called by follow.c under the names lock written): new
 * files a commit of this mount made records of in it are those records
 * from now on, so that no lookup or listing sees the view with them still
 * new files too; and files it unlinked keep the value they had for an
 * open (zrfs_winodes_unlinked_shown). */
void zrfs_write_shown(struct zrfs *fs, struct zrfs_view *old, uint64_t gen);
/* Numbers of files unlinked since view @old was shown, which the kernel
 * holds, show it from now on (inodes.c: a pin), view generation @gen being
 * shown in its place. Under the names lock written, and names_lock. */
void zrfs_winodes_unlinked_shown(struct zrfs *fs, struct zrfs_view *old, uint64_t gen);
/* Whether record number @ino is of its record's version now: a record's
 * own number kept as its file's, its file since removed or replaced, is
 * still the record's in the view the names lock holds (the commit that
 * changed the record not shown yet). Under the names lock. */
bool zrfs_number_current(struct zrfs *fs, fuse_ino_t ino);
/* The record number @ino, unlinked, was (struct winode: was_id) and the
 * generation of the view pinned to it: 0, or -ESTALE (none). */
int zrfs_winode_was(struct zrfs_writes *w, fuse_ino_t ino, unsigned *field, uint64_t *id,
		    bool *text, uint64_t *gen);
/* Permission bits *@mode (chmod) and owner and group @owner[0], @owner[1]
 * (chown) set on node @n, either NULL, where the dataset keeps them
 * (zr_names.mode, .uid and .gid), and its change time, where it keeps
 * those (both NULL: that alone, a chmod or chown that changes nothing):
 * kept with a new file not stored yet, else stored and committed now
 * (w->lock taken here). The generation (0: kept or nothing kept), or a
 * negative code. */
int64_t zrfs_publish_attrs(struct zrfs *fs, struct wnode *n, const uint32_t *mode,
			   const uint32_t *owner);
/* The attributes file node @n shows as number @ino now (a draft's, or its
 * record's with what the node holds that is not stored): 0 or a negative
 * code. Takes the names lock and w->names_lock: neither may be held. */
int zrfs_node_stat(struct zrfs *fs, struct wnode *n, fuse_ino_t ino, struct stat *st);
/* Attributes @st of the record file node @n is writing (none: a draft not
 * stored yet) with its hard links of tree/ (zrfs_tree_links_attr). Under
 * the names lock; takes w->names_lock. */
void zrfs_node_links_attr(struct zrfs *fs, struct wnode *n, struct stat *st);
/* The change time of record @id's file of @field is now, stored with the
 * next commit, under w->lock: a hard link made or removed (a change of
 * tree/ the caller makes due; the index shows the time meanwhile). 0 or a
 * negative code. */
int zrfs_publish_changed_later(struct zrfs *fs, unsigned field, uint64_t id);
/* The record file number @ino shows in @v (under the names lock): 0 with
 * its @field and @id; 0 with *@draft (referenced) for a new file's number
 * whose draft is not stored yet; -ENOENT for none (removed, or replaced). */
int zrfs_number_record(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino, unsigned *field,
		       uint64_t *id, struct wnode **draft);
/* A write or truncation of node @n (number @ino, attributes @st, NULL:
 * looked up) by the caller of @req: the set-ID bits it drops
 * (zrfs_mode_after_write) dropped, as zrfs_publish_attrs, and from @st.
 * Its result (0: nothing to drop). */
int64_t zrfs_drop_ids(fuse_req_t req, struct zrfs *fs, struct wnode *n, fuse_ino_t ino,
		      struct stat *st);

/* ---- committer.c: the thread that commits drafts in groups ---- */

/* Start it, and stop it (committing what is ready). zrfs_write_listing
 * (zrfs_i.h) is its too: a group waits for listings to end. */
void zrfs_committer_start(struct zrfs *fs);
void zrfs_committer_stop(struct zrfs *fs);

/* ---- overlay.c: the subtree zrfs_writing (subtree_i.h) ---- */

/* ---- mount.c: zrfs_writes_open, _mounted, _close (zrfs_i.h) ---- */

/* ---- names.c: what a name is to the writer (rename.c too) ---- */

enum what {
	W_NONE,   /* nothing by that name */
	W_DRAFT,  /* *d, a draft (stored or not) or a directory (d->kind WN_DIR) */
	W_RECORD, /* *id, a record with a value: its own name, or an alias (*alias) */
	W_ID,     /* *id, a record's own name without a value, or the next id's */
	W_DIR,    /* a directory of tree/ */
};

/* Where a name goes: a directory files are written in, and for the name
 * the field its value is of (in tree/ the name says it). */
struct place {
	bool tree;            /* a directory of tree/ */
	unsigned field;
	bool fieldless;       /* tree/ of keys: the name makes no field's file */
	bool text;            /* tree/ of keys: a class as decimal text */
};

/* Where @name in @parent goes (-EPERM: nowhere files are written), and
 * what it is now; each under the names lock and names_lock, which
 * zrfs_names_lock() takes in order (write_i.h's order) and
 * zrfs_names_unlock() lets go. */
int zrfs_place_of(struct zrfs *fs, fuse_ino_t parent, const char *name, struct place *p);
bool zrfs_no_field_ever(const struct place *p, const char *name);
enum what zrfs_name_resolve(struct zrfs *fs, fuse_ino_t parent, const struct place *p,
			    const char *name, struct wnode **d, uint64_t *id, bool *alias);
/* ... the same, under w->lock too (names.c says what each reads) */
enum what zrfs_name_resolve_held(struct zrfs *fs, fuse_ino_t parent, const struct place *p,
				 const char *name, struct wnode **d, uint64_t *id, bool *alias);
void zrfs_names_lock(struct zrfs *fs);
void zrfs_names_unlock(struct zrfs *fs);
/* Remove the file @name of @parent (at @p), a record's or a draft's, as
 * unlink(2) does, committed now (w->lock held, the drafts stored are
 * committed: zrfs_settle_stored()): the generation, 0, or a negative code. */
int64_t zrfs_file_remove_held(struct zrfs *fs, fuse_ino_t parent, const struct place *p,
			      const char *name);
/* Keep tree/ directory @dir while files are written in it; give it the
 * time now (into @ts when not NULL) when its names changed. */
void zrfs_dir_keep(struct zrfs *fs, fuse_ino_t dir);
void zrfs_dir_changed(struct zrfs *fs, fuse_ino_t dir, struct timespec *ts);
/* tree/'s directories or links changed (a directory's time: a name made
 * or removed in it, or set; its mode; a link's time): a group commits them
 * (called holding no lock). */
void zrfs_tree_changed(struct zrfs *fs);
/* Directory @dir (tree/'s, a field's or one made in it) has time @ts, kept
 * in memory: 0, or -ENOENT if it is no such directory. */
int zrfs_dir_time(struct zrfs *fs, fuse_ino_t dir, struct timespec ts);
/* @name's path below its field's directory: 0 or -ENAMETOOLONG. */
int zrfs_path_of(struct zrfs_writes *w, fuse_ino_t parent, const char *name, char *buf,
		 size_t cap);
/* Make draft @d of place @p in @parent; take draft @d away; commit the
 * drafts stored and not committed yet (names.c says under which locks). */
int zrfs_draft_place(struct zrfs *fs, struct wnode *d, fuse_ino_t parent, const struct place *p);
void zrfs_draft_drop(struct zrfs_writes *w, struct wnode *d);
int zrfs_settle_stored(struct zrfs *fs);
/* A file of a name in tree/ was removed, its removal waiting for its group
 * (W_ID): zrfs_settle_stored under the writer's lock, taken here, so that
 * the name is free for what is made or moved there (a link, a directory,
 * a hard link). 0 or a negative code. */
int zrfs_removals_settled(struct zrfs *fs);

/* Whether enough drafts are ready for a group to go now (publish.c). */
static inline bool zrfs_group_full(const struct zrfs_writes *w)
{
	return w->nready >= DRAFTS_MAX / 2 || w->ready_bytes >= w->commit_bytes ||
	       atomic_load(&w->ngone) >= GONE_MAX / 2;
}

/* The class names of the label the paths give (zr_names.label), read
 * from the dataset's attrs (publish.c, which labels files by them): 0 or
 * -ENOMEM; and let go. */
int zrfs_classes_load(struct zrfs *fs);
void zrfs_classes_free(struct zrfs_writes *w);

/* tree/'s directories and links changed are kept at most every
 * TREE_SAVE_MS (a commit carries them all: a program making and removing
 * thousands of directories must not cost a commit of all of them each),
 * and at once by a sync or the unmount, as a local filesystem's journal
 * makes a directory's changes durable within seconds, or at fsync. */
#define TREE_SAVE_MS 5000

/* When tree/'s changes are due (0: none waits). */
static inline uint64_t zrfs_tree_due_ms(const struct zrfs_writes *w)
{
	if (!atomic_load(&w->tree_changed))
		return 0;
	return atomic_load(&w->tree_now) ? 1 : w->tree_saved_ms + TREE_SAVE_MS;
}

/* Whether a group has anything to do: drafts ready, removals, or tree/'s
 * directories and links due to be kept. */
static inline bool zrfs_group_waiting(const struct zrfs_writes *w)
{
	uint64_t tree = zrfs_tree_due_ms(w);

	return w->nready || atomic_load(&w->ngone) || (tree && tree <= zrfs_now_ms());
}

/* ---- handles.c: handles and when a close publishes ---- */

struct whandle {
	struct zrfs_handle h;  /* first: fi->fh points at both */
	struct wnode *node;
	fuse_ino_t ino;        /* the inode it was opened on */
	pid_t pid;             /* the opener */
	atomic_uint flushes;   /* FLUSHes that came with it (closes of descriptors) */
	atomic_bool drop_ids;  /* its first write drops the file's set-ID bits
				* (opened by a caller without CAP_FSETID) */
	bool fresh;            /* on the fresh list (under handles_lock) */
	struct whandle *fresh_next;
	struct whandle *next, *prev; /* every handle open (under handles_lock) */
};

/* zrfs_node_of_ino, the removals waiting committed first if any wait. */
struct wnode *zrfs_node_of_number(struct zrfs *fs, fuse_ino_t ino, bool handle, int *rc);
/* A handle for writing on node @n (referenced here; the caller counted it
 * in n->handles): opened by process @pid, on the list for the SETATTR of
 * an open(O_TRUNC) when @fresh. NULL out of memory. */
struct whandle *zrfs_handle_new(struct zrfs *fs, struct wnode *n, fuse_ino_t ino, pid_t pid,
				bool fresh);
void zrfs_handle_drop(struct zrfs *fs, struct whandle *h);
/* Close handle @h as its RELEASE does: what its node holds is stored (a
 * failure logged), and the handle dropped. */
void zrfs_handle_close(struct zrfs *fs, struct whandle *h);
/* Drop the handles still open at unmount (the kernel sends no RELEASE
 * after it): what they wrote is said by zrfs_nodes_free_all. */
void zrfs_handles_free_all(struct zrfs *fs);
/* The handle process @pid has just opened on @ino, if a SETATTR of its
 * open(O_TRUNC) may come: its node, referenced (NULL: none). */
struct wnode *zrfs_handle_fresh(struct zrfs *fs, fuse_ino_t ino, pid_t pid);
/* The node through which @req's calling thread has @ino open for writing,
 * referenced (NULL: none). */
struct wnode *zrfs_write_own_node(fuse_req_t req, struct zrfs *fs, fuse_ino_t ino);
/* Truncate node @n to @size for a SETATTR by process @pid: an
 * open(O_TRUNC) when @at_open (the last close publishes it), else
 * ftruncate or truncate: 0 or -errno. */
int zrfs_node_truncate(struct zrfs *fs, struct wnode *n, uint64_t size, pid_t pid, bool at_open);

#endif /* ZRFS_WRITE_I_H */
