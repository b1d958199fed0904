/*
 * write_group.c - new files committed in groups on a writable mount: a
 * file created under a name of its own is appended when it is stored
 * (write_names.c) and committed with the others by a thread of its own, at
 * most -o commit_ms after the first of them, or once -o commit_size bytes
 * or STAGED_MAX / 2 files wait, or at once by fsync of a file or a
 * directory; so cp -r of many small files is not three fsyncs per file.
 * Once the mount shows a commit, the names of the files it took along go
 * away and the kernel is told. A commit that fails is logged and retried,
 * less and less often (a full disk: every 5 s at most).
 *
 * Sections: joining a group, committing, the thread.
 */
#include "write_i.h"

#include <time.h>

/* ---- joining a group ---- */

/* Whether the files waiting make a full group. Under the writer's lock. */
static bool group_full(const struct zrfs_writes *w)
{
	return w->npending >= STAGED_MAX / 2 || w->pending_bytes >= w->commit_bytes;
}

void zrfs_group_add(struct zrfs *fs, uint64_t bytes)
{
	struct zrfs_writes *w = fs->writes;

	if (w->npending++ == 0)
		w->pending_since_ms = zrfs_now_ms();
	w->pending_bytes += bytes;
	/* the first starts the clock; a full group is committed at once */
	if (w->npending == 1 || group_full(w))
		pthread_cond_signal(&w->wake);
}

/* ---- committing ---- */

/* Settle the new files a commit took along (the mount shows it by now):
 * their names go away (the kernel is told), their inodes show their
 * records. Under the writer's lock. */
static void settle_pending(struct zrfs *fs)
{
	struct zrfs_writes *w = fs->writes;

	for (struct staged *s = w->staged; s && w->npending; s = s->next) {
		if (!s->pending || s->commit_no >= w->commits)
			continue;
		zrfs_staged_settle(fs, s);
		w->npending--;
	}
	if (w->npending == 0)
		w->pending_bytes = 0;
}

/* Whether a new file waits for a commit that has not been made. Under the
 * writer's lock. */
static bool uncommitted(struct zrfs_writes *w)
{
	for (struct staged *s = w->staged; s; s = s->next)
		if (s->pending && s->commit_no == w->commits)
			return true;
	return false;
}

/* Commit the new files not committed yet, make the mount show them, and
 * settle them: the generation (0: none was pending). Called and returns
 * with the writer's lock held, but lets go of it to publish: a lookup holds
 * the names lock while it asks for the writer's (lock order: names, then
 * writer). */
static int64_t commit_pending(struct zrfs *fs)
{
	struct zrfs_writes *w = fs->writes;
	int64_t gen = uncommitted(w) ? zrfs_commit_now(fs) : 0;

	if (gen < 0 || w->npending == 0)
		return gen;
	pthread_mutex_unlock(&w->lock);
	zrfs_follow_publish(fs);
	pthread_mutex_lock(&w->lock);
	settle_pending(fs);
	return gen;
}

int64_t zrfs_staged_sync(struct zrfs *fs)
{
	int64_t gen;

	pthread_mutex_lock(&fs->writes->lock);
	gen = commit_pending(fs);
	pthread_mutex_unlock(&fs->writes->lock);
	return gen;
}

/* ---- the thread ---- */

static void *committer(void *arg)
{
	struct zrfs *fs = arg;
	struct zrfs_writes *w = fs->writes;

	pthread_mutex_lock(&w->lock);
	while (!w->stopping) {
		uint64_t due = w->pending_since_ms + w->commit_ms, now = zrfs_now_ms();
		bool full = !w->retry_ms && group_full(w);
		if (w->npending && (full || now >= due)) {
			/* a failure is logged and retried, less and less often (a
			 * full disk: once in 5 s at most); fsync is told at once */
			if (commit_pending(fs) < 0)
				w->retry_ms = !w->retry_ms      ? w->commit_ms
					      : w->retry_ms < 2500 ? w->retry_ms * 2
								   : 5000;
			else
				w->retry_ms = 0;
			w->pending_since_ms = now + w->retry_ms;
			continue;
		}
		if (w->npending == 0) {
			pthread_cond_wait(&w->wake, &w->lock);
		} else {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			uint64_t ns = (uint64_t)ts.tv_nsec + (due - now) * 1000000;
			ts.tv_sec += (time_t)(ns / 1000000000);
			ts.tv_nsec = (long)(ns % 1000000000);
			pthread_cond_timedwait(&w->wake, &w->lock, &ts);
		}
		if (w->npending && !uncommitted(w))
			commit_pending(fs); /* another commit took them along: settle */
	}
	commit_pending(fs);
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

void zrfs_committer_start(struct zrfs *fs)
{
	struct zrfs_writes *w = fs->writes;

	w->committer_running = pthread_create(&w->committer, NULL, committer, fs) == 0;
	if (!w->committer_running)
		fuse_log(FUSE_LOG_ERR, "zrfs: %s: no thread to commit new files in groups: "
			 "each is committed when it is closed\n", fs->dataset);
}

void zrfs_committer_stop(struct zrfs *fs)
{
	struct zrfs_writes *w = fs->writes;

	if (w->committer_running) {
		pthread_mutex_lock(&w->lock);
		w->stopping = true;
		pthread_cond_signal(&w->wake);
		pthread_mutex_unlock(&w->lock);
		pthread_join(w->committer, NULL);
		w->committer_running = false;
	}
	zrfs_staged_sync(fs); /* no thread, or it stopped: what is left */
}
