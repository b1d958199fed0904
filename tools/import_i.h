/*
 * import_i.h - what the two files of zr import share: the plan (where each
 * record's bytes come from), an import's options and state, and the
 * planners of each kind of source.
 *
 *   import.c          the command: options, writers and progress, DEST
 *   import_sources.c  the planners: dir, tar, npy, flat
 */
#ifndef ZR_IMPORT_I_H
#define ZR_IMPORT_I_H

#include "zr_i.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>

/* The fields of the files' times, modes and owners, beside the names
 * (zr_names.mtime, .mode, .atime, .ctime, .uid, .gid). */
#define MTIME_FIELD "mtime"
#define MODE_FIELD "mode"
#define ATIME_FIELD "atime"
#define CTIME_FIELD "ctime"
#define UID_FIELD "uid"
#define GID_FIELD "gid"

/* ---- the plan: where each record's bytes come from ---- */

/* dir, tar: the tree's directories and symbolic links, kept beside the
 * records (zr_tree_set); paths and targets are the list's. */
struct tree_list {
	zr_tree_entry *v;
	bool *full;     /* each entry: a directory something is kept in */
	size_t n, cap;
};
/* An entry of @path as @st has it (its owner and group too if @owned). */
int tree_list_add(struct tree_list *t, const char *path, const struct stat *st,
		  const char *target, bool owned);
/* At most ZR_TREE_MAX entries: past it, directories with something in them
 * go (a warning says so), empty ones and links stay; 0, or -1 with the
 * reason in @err when that is still too many. */
int tree_list_fit(struct tree_list *t, char *err, size_t errlen);
void tree_list_free(struct tree_list *t);

/* One value: @len bytes at @off of @path; path NULL = missing. With
 * @nsegs, a sparse one: the data of @segs stored one after another at @off,
 * zeros between them. */
struct src {
	const char *path;
	uint64_t off, len;
	const struct zr_tar_seg *segs;
	uint32_t nsegs;
};

/* Records of @width file values each (srcs[i * width + f]), and with
 * labels an i64 label field after them. */
struct plan {
	struct src *srcs;
	int64_t *labels;  /* --label-from-parent, a tar's .cls members, or NULL */
	bool *unlabelled; /* with labels: records whose label is missing (a tar's) */
	const char **names; /* each record's original name, a field after the label, or NULL */
	int64_t *mtimes;  /* with names: each record's files' times (ns), the field after */
	unsigned mtime_width; /* times a record has: 1, or one per field */
	uint32_t *modes;  /* with times: each record's file's mode (dir), the field after */
	int64_t *atimes;  /* with modes: each record's file's access time (ns), the field
			     after, and the import's time, every change time, the next */
	int64_t ctime;
	uint32_t *owners; /* with access times: each record's file's owner and group, the two
			     fields after the change time's */
	bool nofollow;    /* dir: a file that became a link since it was listed is refused */
	unsigned width;
	uint64_t n, cap, bytes;
	char err[PATH_MAX + 256];
	pthread_mutex_t err_lock;
	atomic_bool failed;
	atomic_ullong done, done_bytes;
};

/* Add a record of p->width values (and if the plan has labels, *@label,
 * or a missing label for NULL), or one value of @len bytes at @off of
 * @path. 0 or -ENOMEM. */
int plan_add_record(struct plan *p, const struct src *vals, const int64_t *label);
int plan_add(struct plan *p, const char *path, uint64_t off, uint64_t len, const int64_t *label);
/* Fill ids [first, first + n) of @ds, n the plan's records, with @writers
 * threads, each appending to its own chunk; a progress line on a tty; the
 * first failure in p->err (import_write.c). */
void write_all_records(struct plan *p, zr_dataset *ds, uint64_t first, unsigned writers);

/* ---- one import ---- */

struct opts {
	const char *field, *label_field;
	const char *ext; /* dir: --ext, the field's extension ("": none) */
	const char *names; /* dir, tar: the field of original names (--names), NULL: none */
	bool label_top; /* the class is the first directory under SRC */
	bool follow_links;
	bool hidden;           /* dir: keep names starting with a dot */
	zr_compress compress;
	uint64_t chunk_size, writers, record_size;
};

/* An import: the command line, the plan, and the dataset's fields. */
struct import {
	const struct source *src;
	struct opts o;
	const char *pos[64];  /* the inputs, then DEST */
	int npos;
	struct plan p;
	zr_field_spec f[ZR_FIELDS_MAX];
	unsigned nf;
	char ext[ZR_EXT_MAX + 1];
	struct strs files, classes; /* dir: the files, the class names */
	int64_t *mtimes;              /* dir, tar: each record's files' times (ns), or NULL */
	unsigned mtime_width;         /* ... 1 a record (dir), or one per field (tar) */
	uint32_t *modes;              /* dir: each record's file's mode (st_mode), or NULL */
	int64_t *atimes;              /* dir: each record's file's access time (ns), or NULL */
	uint32_t *owners;             /* dir: each record's file's uid and gid, or NULL */
	struct tree_list tree;        /* dir, tar: directories and symbolic links */
	struct zr_tar t;              /* tar: the members */
	struct strs unpacked;         /* tar: streamed shards' names, /proc/self/fd/N */
	int unpacked_fd[64];
	int nunpacked;
};

/* The planners (import_sources.c): list the records of im->pos[0..npos-2]
 * into im->p and set im->f, im->nf; 0, or -1 with the reason in im->p.err
 * (empty: out of memory). Nothing is written. */
int plan_dir(struct import *im);
int plan_npy(struct import *im);
int plan_tar(struct import *im);
int plan_flat(struct import *im);

#endif
