/*
 * notify.c - what the kernel must forget when a new view is published:
 * names that name something else now (a record file with a new inode
 * number, one that came or went, a .npy view or meta.json of a new state)
 * and directories whose listings changed (FUSE_NOTIFY_INVAL_INODE). They
 * are collected while follow.c holds the names lock and sent after it lets
 * go: a notification may wait on the kernel, which may wait on a request,
 * which may wait on the lock.
 *
 * Names are told with FUSE_NOTIFY_INC_EPOCH where the kernel has it
 * (Linux 6.16, FUSE 7.44): every name it caches is looked up again before
 * its next use, and the kernel takes no lock to hear it. The older
 * FUSE_NOTIFY_INVAL_ENTRY takes the directory's lock, which a program's
 * rename, create or lookup in that directory holds while it waits for our
 * answer: if the daemon is killed then (SIGKILL, the OOM killer), its
 * notifying thread cannot finish dying, /dev/fuse is never closed, and the
 * program and the mount hang until `umount -f`. An epoch cannot: on those
 * kernels only, zrfs falls back to the old notification (zrfs(8)).
 * An epoch leaves the stale names cached, with the inodes they hold, until
 * their next use: a record file looked up once before a commit would keep
 * its old number, and the older state its pin shows (inodes.c), for as
 * long as the kernel keeps the name. FUSE_NOTIFY_PRUNE (FUSE 7.45) has the
 * kernel drop a number's names and inode unless a file of it is open (it
 * takes no lock a request holds either): then the FORGET comes at once.
 * A listing's notification (INVAL_INODE of a directory) takes no lock that
 * a request holds across its answer; a record file's, sent only when every
 * version of it is held and the oldest number is taken back for new bytes
 * (versions.c), waits for its pages being read, as the old one did.
 */
#include "zrfs_i.h"

#include <errno.h>
#include <linux/fuse.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* fuse_notify_code's next after FUSE_NOTIFY_RESEND (7); libfuse 3.14 and
 * Debian 12's headers have neither */
#define NOTIFY_INC_EPOCH 8
#define EPOCH_MINOR 44
#define NOTIFY_PRUNE 9 /* followed by struct prune and the numbers */
#define PRUNE_MINOR 45
#define PRUNE_BATCH 512 /* numbers a write; the kernel takes them so */

struct prune {
	uint32_t count;
	uint32_t padding;
	uint64_t spare;
};

void zrfs_notify_setup(struct zrfs *fs, const struct fuse_conn_info *conn)
{
	atomic_store(&fs->epochs, conn->proto_major == 7 && conn->proto_minor >= EPOCH_MINOR);
	atomic_store(&fs->prunes, conn->proto_major == 7 && conn->proto_minor >= PRUNE_MINOR);
}

bool zrfs_notify_epoch(struct zrfs *fs)
{
	struct fuse_out_header h = {.len = sizeof h, .error = NOTIFY_INC_EPOCH, .unique = 0};

	if (!fs->se || !atomic_load(&fs->epochs))
		return false;
	if (write(fuse_session_fd(fs->se), &h, sizeof h) == (ssize_t)sizeof h)
		return true;
	if (errno == EINVAL) /* a kernel that says 7.44 but has it not: never again */
		atomic_store(&fs->epochs, false);
	return false;
}

bool zrfs_notify_prune(struct zrfs *fs, const fuse_ino_t *ino, size_t n)
{
	for (size_t i = 0; i < n; i += PRUNE_BATCH) {
		uint32_t count = n - i < PRUNE_BATCH ? (uint32_t)(n - i) : PRUNE_BATCH;
		struct prune p = {.count = count};
		struct fuse_out_header h = {
			.len = (uint32_t)(sizeof h + sizeof p + count * sizeof *ino),
			.error = NOTIFY_PRUNE,
		};
		struct iovec iov[3] = {
			{&h, sizeof h}, {&p, sizeof p}, {(void *)(ino + i), count * sizeof *ino}};
		if (!fs->se || !atomic_load(&fs->prunes))
			return false;
		if (writev(fuse_session_fd(fs->se), iov, 3) == (ssize_t)h.len)
			continue;
		if (errno == EINVAL) /* a kernel without it: never again */
			atomic_store(&fs->prunes, false);
		return false;
	}
	return true;
}

static int note(struct zrfs_notes *notes, fuse_ino_t ino, const char *name)
{
	char *copy = NULL;

	if (notes->n == notes->cap) {
		size_t cap = notes->cap ? notes->cap * 2 : 256;
		struct zrfs_note *v = realloc(notes->v, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		notes->v = v;
		notes->cap = cap;
	}
	if (name && !(copy = strdup(name)))
		return -ENOMEM;
	notes->v[notes->n++] = (struct zrfs_note){ino, copy};
	return 0;
}

int zrfs_notes_entry(struct zrfs_notes *notes, fuse_ino_t parent, const char *name)
{
	return note(notes, parent, name);
}

int zrfs_notes_inode(struct zrfs_notes *notes, fuse_ino_t ino)
{
	return note(notes, ino, NULL);
}

static int cmp(const void *a, const void *b)
{
	const struct zrfs_note *x = a, *y = b;

	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	if (!x->name || !y->name)
		return !x->name - !y->name;
	return strcmp(x->name, y->name);
}

void zrfs_notes_send(struct zrfs *fs, struct zrfs_notes *notes)
{
	bool names = false, epoch;

	if (notes->n)
		qsort(notes->v, notes->n, sizeof *notes->v, cmp);
	for (size_t i = 0; i < notes->n; i++) {
		const struct zrfs_note *t = &notes->v[i];
		names |= t->name != NULL;
		/* -ENOENT: the kernel has nothing of it cached, which is fine */
		if (!t->name && (i == 0 || cmp(t, t - 1) != 0))
			fuse_lowlevel_notify_inval_inode(fs->se, t->ino, 0, 0);
	}
	epoch = names && zrfs_notify_epoch(fs);
	for (size_t i = 0; i < notes->n && names && !epoch; i++) {
		const struct zrfs_note *t = &notes->v[i];
		if (t->name && (i == 0 || cmp(t, t - 1) != 0))
			fuse_lowlevel_notify_inval_entry(fs->se, t->ino, t->name, strlen(t->name));
	}
	for (size_t i = 0; i < notes->n; i++)
		free(notes->v[i].name);
	notes->n = 0;
}

int zrfs_notes_take(struct zrfs_notes *dst, struct zrfs_notes *src)
{
	if (src->n == 0)
		return 0;
	if (dst->n == 0) { /* the usual case: nothing to copy */
		struct zrfs_notes empty = *dst;
		*dst = *src;
		*src = empty;
		return 0;
	}
	if (dst->n + src->n > dst->cap) {
		struct zrfs_note *v = realloc(dst->v, (dst->n + src->n) * sizeof *v);
		if (!v) {
			zrfs_notes_free(src);
			return -ENOMEM;
		}
		dst->v = v;
		dst->cap = dst->n + src->n;
	}
	memcpy(dst->v + dst->n, src->v, src->n * sizeof *src->v); /* the names move too */
	dst->n += src->n;
	src->n = 0;
	return 0;
}

void zrfs_notes_free(struct zrfs_notes *notes)
{
	for (size_t i = 0; i < notes->n; i++)
		free(notes->v[i].name);
	free(notes->v);
	memset(notes, 0, sizeof *notes);
}
