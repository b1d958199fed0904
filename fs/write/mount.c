/*
 * mount.c - a writable mount's writer, from before the mount to after it:
 * the dataset opened for writing (a second writer is refused with a
 * message naming the mount: DATASET/writer), and at the end what was
 * being written.
 *
 * Sections: a writer ending, opening, the end.
 */
#include "write_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- a writer ending ---- */

/* fusermount3 -u, umount(8), return once the kernel lets go of the mount;
 * its daemon then commits what it was given and exits, and holds the
 * writer lock until it does. A writable mount made right after (a script's
 * remount, a test's next step) waits for it rather than being refused by a
 * daemon that is going (zr_holder_ending: the mount it named is gone); one
 * whose mount is still there refuses at once. */
static int open_for_writing(struct zrfs *fs, zr_dataset **out)
{
	unsigned flags = ZR_RDWR | (fs->opts.check ? ZR_CHECK : 0);
	int rc = zr_open(out, fs->dataset, flags);
	long pid;

	if (rc != -EBUSY || !(pid = zr_holder_ending(fs->dataset)))
		return rc;
	fprintf(stderr, "zrfs: %s: waiting for pid %ld, a zrfs mount of it that was unmounted, "
			"to finish writing\n", fs->dataset, pid);
	return zr_open(out, fs->dataset, flags | ZR_WAIT);
}

/* ---- opening ---- */

int zrfs_writes_open(struct zrfs *fs, const char *mountpoint)
{
	struct zrfs_writes *w = calloc(1, sizeof *w);
	char *where = realpath(mountpoint, NULL);
	int rc;

	if (!w) {
		free(where);
		fprintf(stderr, "zrfs: out of memory\n");
		return -1;
	}
	pthread_mutex_init(&w->lock, NULL);
	pthread_mutex_init(&w->names_lock, NULL);
	pthread_mutex_init(&w->handles_lock, NULL);
	pthread_cond_init(&w->wake, NULL);
	pthread_cond_init(&w->grouped, NULL);
	w->commit_ms = fs->opts.commit_ms;
	w->commit_bytes = fs->opts.commit_bytes;
	w->dirfd = -1;
	w->fs = fs;
	fs->writes = w;
	fs->view_shown = zrfs_write_shown;
	if ((rc = open_for_writing(fs, &w->ds)) < 0) {
		fprintf(stderr, "zrfs: cannot mount read-write: %s\n", zr_errmsg(NULL));
		free(where);
		return -1;
	}
	w->dirfd = open(fs->dataset, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (w->dirfd < 0) {
		fprintf(stderr, "zrfs: %s: %s\n", fs->dataset, strerror(errno));
		free(where);
		return -1;
	}
	w->made_from = zr_length(w->ds);
	w->shown_gen = zr_generation(w->ds); /* the view's, or the first commit's before it */
	if (zrfs_classes_load(fs) < 0) {
		fprintf(stderr, "zrfs: out of memory\n");
		free(where);
		return -1;
	}
	zrfs_values_limit();
	/* named before the mount appears, so that a writer refused from then
	 * on is told which mount holds the dataset */
	snprintf(w->holder, sizeof w->holder, "zrfs mount on %s", where ? where : mountpoint);
	snprintf(w->mountpoint, sizeof w->mountpoint, "%s", where ? where : "");
	free(where);
	zr_holder_set(w->ds, w->holder); /* only a message: best effort */
	return 0;
}

void zrfs_writes_mounted(struct zrfs *fs)
{
	struct zrfs_writes *w = fs->writes;
	char devno[32];
	uint64_t id;

	if (!w)
		return;
	zr_holder_set(w->ds, w->holder); /* the daemon's pid now */
	if (w->mountpoint[0] && zrfs_mount_at(w->mountpoint, "fuse.zrfs", devno, &id))
		zr_holder_mount(w->ds, w->mountpoint, id); /* best effort, as the message */
	zrfs_committer_start(fs);
}

/* ---- the end ---- */

void zrfs_writes_close(struct zrfs *fs)
{
	struct zrfs_writes *w = fs->writes;

	if (!w)
		return;
	if (w->ds) {
		zrfs_committer_stop(fs); /* what is ready is committed now */
		zrfs_nodes_free_all(fs); /* what was still being written: said there */
		zrfs_handles_free_all(fs); /* and the handles that wrote it */
	}
	zr_close(w->ds); /* every change was committed when it was stored */
	if (w->dirfd >= 0)
		close(w->dirfd);
	zrfs_classes_free(w);
	pthread_mutex_destroy(&w->lock);
	pthread_mutex_destroy(&w->names_lock);
	pthread_mutex_destroy(&w->handles_lock);
	pthread_cond_destroy(&w->wake);
	pthread_cond_destroy(&w->grouped);
	free(w);
	fs->writes = NULL;
	fs->view_shown = NULL;
}
