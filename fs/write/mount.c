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
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- a writer ending ---- */

/* fusermount3 -u, umount(8), return once the kernel lets go of the mount;
 * its daemon then commits what it was given and exits, and holds the
 * writer lock until it does. A writable mount made right after (a script's
 * remount, a test's next step) waits for it rather than being refused by a
 * daemon that is going; one whose mount is still there refuses at once. */
enum { ENDING_WAIT_S = 60 };

struct rw_mount {
	const char *dataset;
	bool found;
};

static void rw_mount_one(const struct zrfs_mount *m, void *ctx)
{
	struct rw_mount *r = ctx;

	if (m->rw && strcmp(m->type, "fuse.zrfs") == 0 && strcmp(m->source, r->dataset) == 0)
		r->found = true;
}

/* The pid of the zrfs daemon that holds @dataset's writer lock on this
 * machine with no writable mount of it left here, or 0. */
static pid_t writer_ending(const char *dataset)
{
	long pid = zr_holder_pid(dataset);
	struct rw_mount r = {dataset, false};
	char path[64], comm[32] = "";
	FILE *f;

	if (pid <= 0 || pid == getpid())
		return 0;
	snprintf(path, sizeof path, "/proc/%ld/comm", pid);
	if ((f = fopen(path, "re"))) {
		if (!fgets(comm, sizeof comm, f))
			comm[0] = 0;
		fclose(f);
	}
	if (strcmp(comm, "zrfs\n") != 0)
		return 0;
	zrfs_mounts_each(rw_mount_one, &r);
	return r.found ? 0 : (pid_t)pid;
}

/* zr_open(ZR_RDWR) of @fs's dataset into @out, waiting up to ENDING_WAIT_S
 * for a daemon that is ending (said once it takes more than a second). */
static int open_for_writing(struct zrfs *fs, zr_dataset **out)
{
	unsigned flags = ZR_RDWR | (fs->opts.check ? ZR_CHECK : 0);
	pid_t pid;
	int rc;

	for (unsigned waited = 0;; waited++) {
		if ((rc = zr_open(out, fs->dataset, flags)) != -EBUSY || waited == ENDING_WAIT_S ||
		    !(pid = writer_ending(fs->dataset)))
			return rc;
		if (waited == 1)
			fprintf(stderr, "zrfs: %s: waiting for pid %ld, a zrfs mount of it that was "
					"unmounted, to finish writing\n",
				fs->dataset, (long)pid);
		/* its exit, or a second; then the lock is tried again, and
		 * whether the holder is still one ending */
		struct pollfd exited = {.fd = (int)syscall(SYS_pidfd_open, pid, 0), .events = POLLIN};
		poll(exited.fd >= 0 ? &exited : NULL, exited.fd >= 0, 1000);
		if (exited.fd >= 0)
			close(exited.fd);
	}
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
