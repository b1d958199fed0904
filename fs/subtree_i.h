/*
 * subtree_i.h - the parts of the tree the driver shows, as dispatch.c asks
 * them (struct zrfs_subtree), and what each subtree offers the others
 * (fields.c, batches.c, byclass.c, tree.c). zrfs_i.h includes it.
 */
#ifndef ZRFS_SUBTREE_I_H
#define ZRFS_SUBTREE_I_H

#include "zrfs_i.h"

/* ---- subtrees (fields.c, batches.c, byclass.c, tree.c), iterated by dispatch.c ---- */

/* Listing positions from here on are an overlay's (a subtree's own are
 * below). */
#define ZRFS_OVERLAY_POS (UINT64_C(1) << 62)

/* One entry of a directory listing. */
struct zrfs_dirent {
	char name[ZRFS_NAME_MAX + 1];
	fuse_ino_t ino;
	mode_t type;          /* S_IFDIR, S_IFREG or S_IFLNK */
	uint64_t pos;         /* its position; a listing goes on at pos + 1 */
	bool uncached;        /* an overlay's identity: attributes not cached */
};

/* A lookup's answer for a name nothing has now that a commit may give
 * without the kernel being told (a record's id at or beyond the length:
 * appended records are not announced one by one): a miss the kernel does
 * not cache. */
#define ZRFS_ENOENT_LATER (-ENOENT - 0x10000)

/*
 * A part of the tree and everything about its inodes. Every function is
 * thread-safe. The root directory belongs to dispatch.c, which asks every
 * subtree for its entries there (lookup and entry with ZRFS_INO_ROOT);
 * every other inode has exactly one owner. Every call answers from the view
 * @v it is given: for lookups and listings the current one, under the
 * names lock; for an inode, the one view_of says it shows. Errors are
 * negative codes (-errno or ZR_E*, see zrfs_errno()); "no such name" is
 * -ENOENT.
 */
struct zrfs_subtree {
	const char *name;
	/* A name it does not know now may come to be without a commit telling
	 * the kernel (a spec that fits the records after appends): not cached. */
	bool volatile_names;
	/* A view of records shown elsewhere (/.batches, /by): reachable by name,
	 * in the root's listing only with -o list_views, so that tools walking
	 * the whole mount (du, find, rsync -a) see each record once. */
	bool view;
	/* Whether @ino (not the root) is one of this subtree's nodes. */
	bool (*owns)(const struct zrfs *fs, fuse_ino_t ino);
	/* The view owned node @ino shows, referenced, given the current one @cur
	 * (under the names lock): @cur itself (referenced), a pinned older one,
	 * or NULL when it shows none any more (ESTALE). NULL for a subtree
	 * whose nodes always show the current view. */
	struct zrfs_view *(*view_of)(struct zrfs *fs, struct zrfs_view *cur, fuse_ino_t ino);
	/* A file view_of gives an older view is one whose name shows other
	 * bytes now (removed, replaced), held open: it has no link. Not so
	 * for a subtree whose files are pinned to a view by design (a step's) */
	bool older_unlinked;
	/* Files being written (-o writable): asked first for a name in any
	 * directory, and may stand in for another's entries in its listings
	 * (shadow); its own entries are listed after the owner's. Its names
	 * are never cached. */
	bool overlay;
	/* What a number keeps alive (a table entry, a step's view): each
	 * number its lookup or entry gives holds a reference it took, let go
	 * here exactly once: by the dispatcher where the number is not handed
	 * to the kernel (an error reply, an entry not sent or without
	 * attributes), by inodes.c at once for a number the kernel held
	 * already (it keeps one reference per number held), else when the
	 * kernel forgets the number. A subtree takes references only for
	 * numbers it owns (the dispatcher asks the owner to let go); a number
	 * another subtree adopts (inodes.c) tells the adopter instead. NULL:
	 * its numbers keep nothing. */
	void (*let_go)(struct zrfs *fs, fuse_ino_t ino);
	/* An overlay's: entry @d another subtree lists in @dir is one of its
	 * own now (d->ino replaced: true), or stays (false). */
	bool (*shadow)(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t dir, struct zrfs_dirent *d);
	/* An overlay's: the number of its own the file @ino another subtree
	 * gave (a lookup, an entry) is known to the kernel by (a new file's
	 * number, kept once it is a record), or 0; with @count, counted as
	 * handed to the kernel once more (zrfs_inode_again). @ino is of view
	 * @v: the number of the file that record is in @v, never of one a
	 * commit not in @v moves into its id. Its attributes are not cached:
	 * the record may change under a number no version tells. */
	fuse_ino_t (*identity)(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino, bool count);
	/* An overlay's: whether file @ino another subtree gave (a lookup, an
	 * entry) is removed, not committed yet: not found, not listed, no
	 * link (NULL: none is). */
	bool (*gone)(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino);
	/* @name in directory @parent (the root or an owned node): *out, or
	 * -ENOENT, ZRFS_ENOENT_LATER, -ENOTDIR (@parent is a file). */
	int (*lookup)(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t parent, const char *name,
		      fuse_ino_t *out);
	/* Attributes of an owned node: 0, -ENOENT, -errno. */
	int (*attr)(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino, struct stat *st);
	/* The first entry of directory @dir (the root or an owned node) at
	 * a position >= @pos (positions start at 2, after "." and ".."):
	 * 1 with *out, 0 past the last, or -ENOTDIR, -errno. */
	int (*entry)(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t dir, uint64_t pos,
		     struct zrfs_dirent *out);
	/* Reply to a read of an owned node (EISDIR for a directory). */
	void (*read)(fuse_req_t req, struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino,
		     size_t size, off_t off);
	/* lseek(2)'s SEEK_DATA or SEEK_HOLE (@whence) from @off in owned file
	 * @ino: the offset, -ENXIO, -errno, or -ENOSYS for a file without
	 * holes (its size from attr). NULL: no file of it has holes. */
	int64_t (*seek)(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino, uint64_t off,
			int whence);
};

extern const struct zrfs_subtree zrfs_fields;
extern const struct zrfs_subtree zrfs_batches;
extern const struct zrfs_subtree zrfs_byclass;
extern const struct zrfs_subtree zrfs_tree;
extern const struct zrfs_subtree zrfs_writing;

/* dispatch.c: the FUSE operations of a read-only mount, and of -o writable */
extern const struct fuse_lowlevel_ops zrfs_ops;
extern const struct fuse_lowlevel_ops zrfs_rw_ops;

/* batches.c: set-up of /.batches (tables and background threads), with
 * the -o batches specs checked against view @v */
int zrfs_batches_create(struct zrfs *fs, struct zrfs_view *v, const char *specs);
/* Start the background threads: after fuse_daemonize(), whose fork()
 * would leave them behind in the parent. */
void zrfs_batches_start(struct zrfs *fs);
void zrfs_batches_destroy(struct zrfs *fs);

/* byclass.c: /by exists when a label field has class names and no field is
 * called "by"; the labels are read once, here, from @v */
int zrfs_byclass_create(struct zrfs *fs, struct zrfs_view *v);
void zrfs_byclass_destroy(struct zrfs *fs);
struct zrfs_notes;
/* Record @id of field @field changed, came or went in @v, about to be
 * published (follow.c, under the names lock): update the labels, and note
 * what the kernel must look up again in the class directories. */
int zrfs_byclass_update(struct zrfs *fs, struct zrfs_view *v, unsigned field, uint64_t id,
			struct zrfs_notes *notes);

/* The dataset's directories and links as view @v has them (zr_tree_get)
 * shown in tree/, where they changed since last shown, noting in @notes
 * what the kernel must look up again (follow.c, under the names lock
 * written): 0 or -ENOMEM. */
int zrfs_tree_entries(struct zrfs *fs, struct zrfs_view *v, struct zrfs_notes *notes);
/* A writable mount's: make tree/'s directories and links what writer @ds
 * commits next (zr_tree_set), those its files' names make aside. 0, or a
 * negative code (zr_errmsg(ds) says why). */
int zrfs_tree_save(struct zrfs *fs, zr_dataset *ds);
/* tree/'s links (symbolic links, FIFOs, sockets, devices) for the write
 * layer: whether @name in @dir is one (under the names lock); make one of
 * @mode (S_IFLNK and @target, or S_IFIFO, S_IFSOCK, S_IFCHR or S_IFBLK, ""
 * and device @rdev; now: *out its number; -EEXIST where a name is, -EILSEQ
 * for a name or target not UTF-8); remove one (-ENOENT: none; @under_file:
 * also one a record's file shows over); move one, keeping its number, onto
 * nothing, a link or (@over_file) a record's file the caller removes in the
 * same commit (-EEXIST: onto a directory, or a file unasked; -EILSEQ); set
 * one's times. The others take the names lock written. */
bool zrfs_tree_is_link(const struct zrfs *fs, fuse_ino_t dir, const char *name);
int zrfs_tree_make_link(struct zrfs *fs, fuse_ino_t dir, const char *name, uint32_t mode,
			const char *target, uint64_t rdev, fuse_ino_t *out);
int zrfs_tree_unlink(struct zrfs *fs, fuse_ino_t dir, const char *name, bool under_file);
/* Hard links of tree/ (a second name of a record's file, or of a link; a
 * dataset of paths only). Make @name in @dir one naming record @id's file
 * (@link 0) or link number @link, taking the names lock written: 0,
 * -EPERM (no name of tree/ shows the file), -ENOENT (no link @link),
 * -EEXIST, -EINVAL, -EILSEQ, -ENOMEM; a link's change time moves (a
 * record's is the caller's to store). Whether what @name in @dir shows (a
 * file or a link) has hard links: one of them into *@hdir and @hname
 * (ZRFS_NAME_MAX + 1 bytes). Whether @name in @dir is a hard link, and the
 * record whose file it names (NO_ID: a link, or none). Make the hard links
 * naming path @from (@below: and those naming what is below it) name @to
 * (and what is below it), marked with @token (a rename's, not 0), or
 * (@back) only those @token marked, taking the names lock written: how
 * many, or a negative code. Record @id's file of @field, of attributes @st: the
 * links its hard links add, and the change time they gave it (under the
 * names lock; tree_index.c). */
int zrfs_tree_hard_make(struct zrfs *fs, uint64_t id, fuse_ino_t link, fuse_ino_t dir,
			const char *name);
/* Whether tree/ has a hard link (no lock needed: a rename or an unlink
 * asks it first, to pass by what hard links cost); whether @ino is a
 * link's of tree/ (a symbolic link, FIFO, socket, device). */
bool zrfs_tree_has_hard(const struct zrfs *fs);
bool zrfs_tree_link_ino(const struct zrfs *fs, fuse_ino_t ino);
bool zrfs_tree_hard_any(struct zrfs *fs, fuse_ino_t dir, const char *name, fuse_ino_t *hdir,
			char *hname);
bool zrfs_tree_hard_of(struct zrfs *fs, fuse_ino_t dir, const char *name, uint64_t *id);
int zrfs_tree_retarget(struct zrfs *fs, const char *from, const char *to, bool below,
		       uint64_t token, bool back);
void zrfs_tree_links_attr(struct zrfs *fs, unsigned field, uint64_t id, struct stat *st);
/* Taking the names lock written: move directory @name of @dir, and all
 * that is in it, to @newname in @newdir (an empty directory there is
 * replaced); it keeps its number. The records below it, for their names
 * to follow, in *@ids (*@n of them; free()). 0, -ENOENT, -EINVAL (into
 * itself), -ENOTDIR (a file or link at @newname), -ENOTEMPTY, -ENOMEM. */
int zrfs_tree_dir_move(struct zrfs *fs, fuse_ino_t dir, const char *name, fuse_ino_t newdir,
		       const char *newname, uint64_t **ids, size_t *n);
int zrfs_tree_link_move(struct zrfs *fs, fuse_ino_t dir, const char *name, fuse_ino_t newdir,
			const char *newname, bool over_file);
int zrfs_tree_link_time(struct zrfs *fs, fuse_ino_t ino, struct timespec mtime,
			struct timespec atime);
/* Permission bits @mode for directory, FIFO or socket @ino of tree/: 0 or
 * -ENOENT (none, or a symbolic link, whose bits are 0777). */
int zrfs_tree_mode(struct zrfs *fs, fuse_ino_t ino, uint32_t mode);
/* Directory or link @ino of tree/ is owned by @ids[0] and group @ids[1]
 * from now on (the mount's copy; kept at the next commit), and changed now
 * (@ids NULL: that alone, a chmod or chown that changes nothing): 0 or
 * -ENOENT. */
int zrfs_tree_owner(struct zrfs *fs, fuse_ino_t ino, const uint32_t *ids);
/* Whether directory @dir of tree/ is set-group-ID, and then its group into
 * @gid: what a name made in it takes, as on a local filesystem (takes the
 * names lock to read: not under it). */
bool zrfs_tree_setgid(struct zrfs *fs, fuse_ino_t dir, uint32_t *gid);
/* The target of symbolic link @ino of tree/ into @buf: 0, -EINVAL (not a
 * link), -ENOENT (gone). */
int zrfs_tree_readlink(struct zrfs *fs, fuse_ino_t ino, char *buf, size_t cap);
/* tree.c: /tree exists when the dataset keeps names and no field is called
 * "tree"; the names are read once, here, from @v (the index) */
int zrfs_tree_create(struct zrfs *fs, struct zrfs_view *v);
void zrfs_tree_destroy(struct zrfs *fs);
/* Record @id of @field changed, came or went in @v (follow.c, under the
 * names lock): update the index, and note what the kernel must look up
 * again in tree/. 0 or -ENOMEM. */
int zrfs_tree_update(struct zrfs *fs, struct zrfs_view *v, unsigned field, uint64_t id,
		     struct zrfs_notes *notes);
/* For the write layer, under the names lock: whether @ino is a directory
 * of tree/ now; the record named @name (@len bytes, a key without its
 * extension) in directory @dir (-ENOENT: none); @dir's path below tree/
 * ("" for tree/ itself; -ENOENT, -ENAMETOOLONG); the directory @name in
 * @dir (0: none). */
bool zrfs_tree_dir(const struct zrfs *fs, fuse_ino_t ino);
/* The last component of record @id's name in the tree (@len bytes, not
 * NUL-terminated), or NULL: no tree, or no name that makes a file. Under
 * the names lock. */
const char *zrfs_tree_leaf(const struct zrfs *fs, uint64_t id, size_t *len);
int zrfs_tree_find(const struct zrfs *fs, fuse_ino_t dir, const char *name, size_t len,
		   uint64_t *id);
int zrfs_tree_path(const struct zrfs *fs, fuse_ino_t dir, char *buf, size_t cap);
fuse_ino_t zrfs_tree_subdir(const struct zrfs *fs, fuse_ino_t dir, const char *name);
/* Taking the names lock written: keep directory @dir while the mount lives
 * (files are being written in it); make directory @name in @parent (*out
 * its number; it lives as long as the mount, or until removed); remove an
 * empty one. 0 or -errno. */
int zrfs_tree_keep(struct zrfs *fs, fuse_ino_t dir);
int zrfs_tree_mkdir(struct zrfs *fs, fuse_ino_t parent, const char *name, fuse_ino_t *out);
int zrfs_tree_rmdir(struct zrfs *fs, fuse_ino_t parent, const char *name);
/* Taking the names lock written: directory @dir shows @mtime from now on,
 * for as long as the mount (rsync -a sets it). 0 or -ENOENT. */
int zrfs_tree_touch(struct zrfs *fs, fuse_ino_t dir, struct timespec mtime);
/* Attributes and bytes of (@field, @id) shown as text in @v (a class of a
 * tree of keys), for inode @ino: 0 or a negative code; a reply. */
int zrfs_tree_text_attr(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino, unsigned field,
			uint64_t id, struct stat *st);
void zrfs_tree_text_read(fuse_req_t req, struct zrfs *fs, struct zrfs_view *v, unsigned field,
			 uint64_t id, size_t size, off_t off);
/* Whether record files of @field have a twin in tree/ showing text
 * (ZRFS_INO_TEXT), whose old numbers are pinned as the record's are. */
bool zrfs_tree_text(const struct zrfs *fs, unsigned field);

#endif
