/*
 * write_i.h - what the files of a writable mount share, from the top down:
 * write.c (the FUSE operations on files), write_names.c (names created,
 * staged, renamed and removed), write_group.c (new files committed in
 * groups), write_staged.c (the table of staged files) and writer.c (the
 * writer and the values being written).
 */
#ifndef ZRFS_WRITE_I_H
#define ZRFS_WRITE_I_H

#include "zrfs_i.h"

#define NO_ID UINT64_MAX
/* Most files created under names that are not records' and not placed
 * yet (each holds a private file open). */
#define STAGED_MAX 1024
/* Buckets of the tables that find them by name and by inode number. */
#define STAGED_BUCKETS 4096

struct staged;

/* A value being written: shared by the handles open on it and, while it is
 * not placed, by the name it was created under. */
struct wfile {
	atomic_uint refs;
	pthread_mutex_t lock;
	unsigned field;
	uint64_t id;          /* the record it is the value of; NO_ID: not yet */
	/* its bytes: in memory (fd < 0), or in an O_TMPFILE in the dataset's
	 * directory; only [0, size) means anything */
	char *mem;
	size_t cap;
	int fd;
	uint64_t size;
	bool dirty;           /* changed since it was last stored */
	int error;            /* a write failed (-errno): bytes lost, never stored */
	int refused;          /* the last store failed (-errno); 0 once stored */
	struct staged *staged; /* the name it was created under, if not a record's */
	/* Just opened, by process pid, for inode ino: open(O_TRUNC) comes as an
	 * OPEN and then a SETATTR without the handle, which is this one's. */
	struct wfile *fresh_next;
	fuse_ino_t ino;
	pid_t pid;
	bool fresh;
};

/* A file created in a field directory, until its value is stored: under a
 * record's name (the record has no value yet, or is the next one), or
 * under another name (placed as a new record when stored). */
struct staged {
	struct staged *next, **prevp; /* on w->staged */
	struct staged *name_next; /* in its bucket of names (not placed only) */
	struct staged *ino_next;  /* in its bucket of inode numbers */
	fuse_ino_t ino;       /* the record's, or ZRFS_INO_STAGED | n */
	unsigned field;
	char *name;
	struct wfile *f;      /* its bytes; NULL once placed */
	uint64_t id;          /* the record it is or became; NO_ID: the next one */
	bool placed;          /* stored: ino shows record id (until forgotten) */
	bool pending;         /* appended as record id, not committed yet (f kept) */
	uint64_t commit_no;   /* pending: the writer's commits when it was appended */
	bool hidden;          /* a dot name: placed by a rename only (rsync's temporary files) */
};

struct zrfs_writes {
	zr_dataset *ds;       /* the writer: ZR_RDWR */
	int dirfd;            /* the dataset's directory, for private files */
	pthread_mutex_t lock; /* the writer: one change and its commit at a time */
	/* staged names; taken before a file's lock and the writer's, never after */
	pthread_mutex_t names_lock;
	struct staged *staged;
	struct staged *names[STAGED_BUCKETS], *inos[STAGED_BUCKETS];
	size_t nstaged;       /* not placed */
	uint64_t next_staged;
	pthread_mutex_t fresh_lock; /* of the fresh list, taken alone */
	struct wfile *fresh;  /* files just opened for writing */
	char holder[4200];    /* what DATASET/writer says of the mount */
	uint64_t commits;     /* commits made so far (under lock) */
	/* group commit of new files (write_names.c), under lock */
	pthread_cond_t wake;  /* something to commit, or stop */
	pthread_t committer;
	bool committer_running, stopping;
	size_t npending;      /* new files appended, not committed */
	uint64_t pending_bytes, pending_since_ms;
	unsigned commit_ms;   /* -o commit_ms: the longest a new file waits */
	uint64_t commit_bytes; /* -o commit_size: or this many bytes */
	unsigned retry_ms;    /* after failed commits: the wait added before the next */
};

/* writer.c */
void zrfs_writer_close(struct zrfs *fs);
/* The bytes of @f (its lock held): write @n at @off, read up to @n at @off
 * (the count, or -errno), change the size: 0 or -errno. */
int zrfs_wfile_pwrite(struct zrfs *fs, struct wfile *f, const void *buf, size_t n, uint64_t off);
ssize_t zrfs_wfile_pread(struct wfile *f, void *buf, size_t n, uint64_t off);
int zrfs_wfile_truncate(struct zrfs *fs, struct wfile *f, uint64_t size);
/* The longest value a record of field @f may take. */
uint64_t zrfs_value_max(const struct zrfs_field *f);
/* A value being written, holding record (@field, @id) as it is now (NO_ID
 * or past the end: nothing), unless @truncate: 0 or -errno. */
int zrfs_wfile_make(struct zrfs *fs, unsigned field, uint64_t id, bool truncate,
		    struct wfile **out);
struct wfile *zrfs_wfile_ref(struct wfile *f);
void zrfs_wfile_put(struct wfile *f);
/* Make (@field, @id) hold @v (data NULL: missing; @id the length: append)
 * and commit: the generation, or a negative code (logged). Under the
 * writer's lock. */
int64_t zrfs_change(struct zrfs *fs, unsigned field, uint64_t id, zr_value v);
/* Store @f's bytes as record @id's value and commit (@f's lock held, and
 * the writer's): the generation or a negative code (logged). Without
 * @commit: 0, the change left for the next commit. */
int64_t zrfs_wfile_store(struct zrfs *fs, struct wfile *f, uint64_t id, bool commit);
/* Commit what is left (under the writer's lock): the generation, or a
 * negative code (logged). */
int64_t zrfs_commit_now(struct zrfs *fs);
/* The record of field directory @parent that @name names, among ids below
 * the length (@next: or equal): 0, -ENOENT (not a record's name), -EPERM
 * (not a field directory). */
int zrfs_write_name(struct zrfs *fs, fuse_ino_t parent, const char *name, bool next,
		    unsigned *field, uint64_t *id);

/* write_staged.c: under the writer's lock */
struct staged *zrfs_staged_by_name(struct zrfs_writes *w, unsigned field, const char *name);
struct staged *zrfs_staged_by_ino(struct zrfs_writes *w, fuse_ino_t ino);
/* Add @s (made, its name and inode number set) to the list and tables. */
void zrfs_staged_add(struct zrfs_writes *w, struct staged *s);
/* @s is called @name (malloc'd, taken) from now on. */
void zrfs_staged_rename(struct zrfs_writes *w, struct staged *s, char *name);
/* @s is placed: it is found by its inode number only. */
void zrfs_staged_placed(struct zrfs_writes *w, struct staged *s);
/* Take @s out of the list and tables and free it (its file's reference
 * dropped). */
void zrfs_staged_drop(struct zrfs_writes *w, struct staged *s);
/* @s, appended, was committed and the mount shows it: its name goes away
 * (the kernel is told), its inode shows its record. */
void zrfs_staged_settle(struct zrfs *fs, struct staged *s);
/* Drop every staged file (unmounting), saying which were never stored. */
void zrfs_staged_free_all(struct zrfs *fs);
/* @f failed and is closed: if it was created and not stored, its name
 * goes away (and its private bytes with it: a full disk gets them back).
 * Takes the writer's lock. */
void zrfs_staged_drop_failed(struct zrfs *fs, struct wfile *f);

/* write_names.c */
/* Store the value of @f, which has a staged name (f->staged; @f's lock
 * held): at its record, or as the next one: the generation, 0 (a hidden
 * name: kept until renamed), or a negative code. */
int64_t zrfs_staged_store(struct zrfs *fs, struct wfile *f);
/* What @ino is to the writes: the file of handle @fi, or of a file created
 * and not stored (*f, referenced), or, placed, record (*field, *id) (*f
 * NULL). 0, or -ENOENT: neither. */
int zrfs_write_node(struct zrfs *fs, fuse_ino_t ino, struct fuse_file_info *fi,
		    struct wfile **f, unsigned *field, uint64_t *id);

/* write_group.c */
/* A new file of @bytes was appended: it joins the group to commit. Under
 * the writer's lock. */
void zrfs_group_add(struct zrfs *fs, uint64_t bytes);
/* The thread that commits new files in groups: start (after fuse_daemonize),
 * stop (committing what is left). */
void zrfs_committer_start(struct zrfs *fs);
void zrfs_committer_stop(struct zrfs *fs);
/* Commit the new files not committed yet, now, and make the mount show
 * them: the generation (0: nothing was pending), or a negative code. */
int64_t zrfs_staged_sync(struct zrfs *fs);

#endif /* ZRFS_WRITE_I_H */
