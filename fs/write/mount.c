/*
 * mount.c - a writable mount's writer, from before the mount to after it:
 * the dataset opened for writing (a second writer is refused with a
 * message naming the mount: DATASET/writer), and at the end what was
 * being written.
 *
 * Sections: opening, the end.
 */
#include "write_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
	if ((rc = zr_open(&w->ds, fs->dataset, ZR_RDWR | (fs->opts.check ? ZR_CHECK : 0))) < 0) {
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
	if (!fs->writes)
		return;
	zr_holder_set(fs->writes->ds, fs->writes->holder); /* the daemon's pid now */
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
