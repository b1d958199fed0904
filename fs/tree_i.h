/*
 * tree_i.h - tree/'s index, shared by the subtree (tree.c) and the index
 * itself (tree_index.c): every named record's entry in its directory, by
 * (directory, name) and by id, and the dataset's directories and links.
 * Guarded by the names lock (view.c): read by lookups and listings,
 * written by follow.c's publication and the write layer's mkdir, rmdir,
 * symlink and the like.
 */
#ifndef ZRFS_TREE_I_H
#define ZRFS_TREE_I_H

#include "zrfs_i.h"

#define NO_ID UINT64_MAX
/* Listing positions: entry slot s of a directory at 2 + s * SPAN + k, k 0
 * its directory, 1 + f its file of field f. */
#define SPAN (ZR_FIELDS_MAX + 1)

struct tdir;
struct tent;

/* What a directory or link of tree/ keeps beside its mode and times: its
 * owner, and its change time while the mount changes it. */
/* The size a directory made through the mount shows (and keeps), as a
 * new directory of ext4 does: its first block. */
#define TREE_DIR_SIZE 4096

struct tmeta {
	bool owned;              /* uid and gid kept (else the dataset directory's) */
	uint32_t uid, gid;
	bool changed;            /* changed through the mount (a name in it, its */
	struct timespec ctime;   /* ... mode, owner or times): then; else the commit's */
};

/* A symbolic link, FIFO, socket, device or hard link of tree/
 * (zr_tree_entry): kept by the dataset, or made by symlink, mknod or link
 * through a writable mount. All are "links" here: a name and its
 * attributes, no data the mount serves (the kernel itself is a FIFO's
 * pipe, a socket's end and a device's driver). A hard link (mode S_IFREG
 * alone) is a second name of what the path in its target shows, a file
 * or another link: looked up, it is that (tree_hard_target). */
struct tlink {
	struct zrfs_link link;   /* in t->links, by number */
	uint64_t no;             /* its inode is ZRFS_INO_TREE_LINK | no */
	struct tent *ent;        /* its entry */
	uint32_t mode;           /* S_IFLNK, S_IFIFO, S_IFSOCK, S_IFCHR or S_IFBLK, and the
				  * permission bits; S_IFREG alone: a hard link */
	uint64_t rdev;           /* a device's number */
	uint64_t moved;          /* a hard link: the rename that last made it follow (a token) */
	struct tmeta meta;
	struct timespec mtime, atime;
	char target[];           /* a symbolic link's, a hard link's; "" for the others */
};

/* A name in a directory of tree/: a directory, a record's name, or both
 * (a key "a" and a key "a/b": files a.jpg and a/b.jpg). */
struct tent {
	struct zrfs_link link;   /* in t->names, by (directory number, name) */
	struct tdir *dir;        /* the directory it is in */
	struct tdir *sub;        /* the directory of this name; NULL: none */
	struct tlink *lnk;       /* the symbolic link of this name; NULL: none */
	uint64_t id;             /* the record of this name shown; NO_ID: none */
	uint64_t *more;          /* other records of this name, not shown */
	uint32_t nmore;
	uint32_t slot;           /* its place in dir->ents */
	uint16_t len;
	char name[];
};

struct tdir {
	struct zrfs_link link;   /* in t->dirs, by number */
	uint64_t no;             /* its inode is ZRFS_INO_TREE_DIR | no; tree/ is 0 */
	struct tent *self;       /* its entry in its parent; NULL for tree/ */
	struct tent **ents;      /* in order of arrival; NULL where one left */
	uint32_t n, cap, live;
	uint32_t subs;           /* entries that are directories (its link count) */
	bool made;               /* by mkdir: lives as long as the mount */
	bool stored;             /* one of the dataset's (zr_tree_entry): lives while it is */
	bool timed;              /* a time was set on it (stored, utimensat): mtime, atime */
	uint32_t mode;           /* S_IFDIR and its permission bits; 0: 0755 */
	struct tmeta meta;
	uint64_t size;           /* its size as imported (stored) */
	struct timespec mtime, atime;
};

#define TREE_GONE_LINKS 256

struct zrfs_tree_index {
	struct zrfs_table names, dirs, links;
	zr_tree_entry *shown;    /* the dataset's directories and links last applied */
	size_t nshown;
	struct tdir *root;
	struct tent **of_id;     /* each record's entry (NULL: no name in the tree) */
	uint64_t cap;            /* records of_id has room for */
	uint64_t next_no;
	bool keep_emptied;       /* a writable mount's: a directory whose last entry
				  * goes stays until removed (tree_prune) */
	/* hard links (read without the names lock: whether there are any),
	 * and how many name each path (struct hcount; idle: of none now,
	 * swept past hard_sweep) */
	_Atomic uint64_t nhard;
	uint64_t hard_idle, hard_sweep;
	struct zrfs_table hard_counts;
	/* links removed (not hard links), the last TREE_GONE_LINKS: a FIFO,
	 * socket or device a program still has open is fstat'ed as it was,
	 * without a name (tree_link_gone); the oldest forgotten first */
	struct tlink *gone[TREE_GONE_LINKS];
	size_t gone_next;
	bool makes[ZR_FIELDS_MAX]; /* fields whose values are files of the tree */
	bool text[ZR_FIELDS_MAX];  /* ... holding decimal text (zr_names_text) */
};

/* ---- the index (tree_index.c) ---- */

/* The entry @name (@len bytes) in @d, or NULL. */
struct tent *tree_ent_find(const struct zrfs_tree_index *t, const struct tdir *d, const char *name,
			   size_t len);
/* Directory number @no, or NULL. */
struct tdir *tree_dir_find(const struct zrfs_tree_index *t, uint64_t no);
/* A new directory, the one of entry @self (NULL: tree/ itself), numbered
 * with the next number; NULL if out of memory. */
struct tdir *tree_dir_new(struct zrfs_tree_index *t, struct tent *self);
void tree_dir_free(struct zrfs_tree_index *t, struct tdir *d);
/* A new entry @name in @d (neither a directory nor a record yet). */
struct tent *tree_ent_new(struct zrfs_tree_index *t, struct tdir *d, const char *name, size_t len);
/* Remove entries and directories that hold nothing any more, from @e up
 * (directories only where the index does not keep them: keep_emptied);
 * the directories that go are noted in @notes (when not NULL): 0, or
 * -ENOMEM (the notes lost; the index is right). */
int tree_prune(struct zrfs_tree_index *t, struct tent *e, struct zrfs_notes *notes);
/* The path of directory @d below tree/ ("" for tree/ itself) into @buf
 * (@cap >= 1 bytes): its length, or -1 when it does not fit. */
int tree_dir_path(const struct tdir *d, char *buf, size_t cap);
/* The path below tree/ of @name in directory @d ("" for @d itself) into
 * @buf (PATH_MAX bytes): its length, or -1 when it does not fit. */
int tree_name_path(const struct tdir *d, const char *name, char *buf);
/* Whether @s is UTF-8 text, as the dataset keeps its directories' and
 * links' paths and targets. */
bool tree_text(const char *s);
/* Give entry @e the link of @mode (its type and bits): a symbolic link to
 * @target (@len bytes), a FIFO, a socket or device @rdev (@target ""), or
 * take it away (@target NULL; the entry pruned then): 0 or -ENOMEM. */
int tree_link_set(struct zrfs_tree_index *t, struct tent *e, const char *target, size_t len,
		  uint32_t mode, uint64_t rdev, struct timespec mtime, struct timespec atime);
/* Take entry @e's link away, leaving the entry (a link renamed onto it). */
void tree_link_drop(struct zrfs_tree_index *t, struct tent *e);
/* Link number @no, or NULL. */
struct tlink *tree_link_find(const struct zrfs_tree_index *t, uint64_t no);
/* Link number @no removed lately (no entry any more), or NULL. */
struct tlink *tree_link_gone(const struct zrfs_tree_index *t, uint64_t no);
/* The entry of @path (@len bytes, no "."), or NULL. */
struct tent *tree_ent_at(const struct zrfs_tree_index *t, const char *path, size_t len);
/* How many hard links name the path of entry @e, whatever it shows, and
 * (@changed not NULL) when that last changed, where it ever had one
 * (under the names lock). */
uint32_t tree_hard_count(const struct zrfs_tree_index *t, const struct tent *e,
			 struct timespec *changed);
/* Whether /tree is shown: the dataset keeps names and no field is "tree". */
bool tree_shown(const struct zrfs *fs);

#endif
