/*
 * committer.c - the thread that commits drafts, and removals, in groups on
 * a writable mount (publish.c says when: -o commit_ms after the first is
 * ready or removed, or once -o commit_size bytes or DRAFTS_MAX / 2 drafts
 * or GONE_MAX / 2 removals wait), retrying a failed commit less and less
 * often, and holding a group while a listing of the directories it changes
 * is open.
 */
#include "write_i.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

static void *committer(void *arg)
{
	struct zrfs *fs = arg;
	struct zrfs_writes *w = fs->writes;

	pthread_mutex_lock(&w->names_lock);
	while (!w->stopping) {
		uint64_t due = w->ready_since_ms + w->commit_ms, now = zrfs_now_ms();
		uint64_t late_due = w->late_since_ms + LATE_MS;
		bool full = !w->retry_ms && zrfs_group_full(w);

		if (w->nlate && now >= late_due) { /* temporary files not renamed away */
			zrfs_publish_late(fs);
			continue;
		}
		bool waiting = zrfs_group_waiting(w);

		if (w->nlate && (!waiting || late_due < due))
			due = late_due; /* only to wake then */
		uint64_t tree_due = zrfs_tree_due_ms(w);
		if (tree_due && !waiting && (!w->nlate || tree_due < due))
			due = tree_due; /* tree/'s changes alone: kept then */
		/* a listing open: its entries would move under it (write_i.h) */
		if (waiting && !full && w->listings && now >= due && now < due + LISTING_WAIT_MS)
			due += LISTING_WAIT_MS;
		else if (waiting && (full || now >= due)) {
			w->grouping = true;
			pthread_mutex_unlock(&w->names_lock);
			int64_t gen = zrfs_publish_group(fs, NULL);
			pthread_mutex_lock(&w->names_lock);
			w->grouping = false;
			pthread_cond_broadcast(&w->grouped);
			/* a failure is logged and retried, less and less often (a
			 * full disk: once in 5 s at most); fsync is told at once */
			if (gen < 0)
				w->retry_ms = !w->retry_ms      ? w->commit_ms
					      : w->retry_ms < 2500 ? w->retry_ms * 2
								   : 5000;
			else
				w->retry_ms = 0;
			w->ready_since_ms = now + w->retry_ms;
			continue;
		}
		if (!waiting && w->nlate == 0 && !tree_due) {
			pthread_cond_wait(&w->wake, &w->names_lock);
		} else {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			uint64_t ns = (uint64_t)ts.tv_nsec + (due - now) * 1000000;
			ts.tv_sec += (time_t)(ns / 1000000000);
			ts.tv_nsec = (long)(ns % 1000000000);
			pthread_cond_timedwait(&w->wake, &w->names_lock, &ts);
		}
	}
	pthread_mutex_unlock(&w->names_lock);
	return NULL;
}

void zrfs_write_listing(struct zrfs *fs, bool open)
{
	struct zrfs_writes *w = fs->writes;

	pthread_mutex_lock(&w->names_lock);
	if (open) {
		/* no group starts now; one under way is shown before the
		 * listing starts */
		w->listings++;
		while (w->grouping)
			pthread_cond_wait(&w->grouped, &w->names_lock);
	} else if (w->listings && --w->listings == 0) {
		pthread_cond_signal(&w->wake); /* a group may be waiting */
	}
	pthread_mutex_unlock(&w->names_lock);
}

void zrfs_committer_start(struct zrfs *fs)
{
	struct zrfs_writes *w = fs->writes;

	w->committer_running = zrfs_thread_start(&w->committer, committer, fs) == 0;
	if (!w->committer_running)
		fuse_log(FUSE_LOG_ERR, "zrfs: %s: no thread to commit new files in groups: "
			 "each is committed at fsync or unmount\n", fs->dataset);
}

void zrfs_committer_stop(struct zrfs *fs)
{
	struct zrfs_writes *w = fs->writes;

	if (w->committer_running) {
		pthread_mutex_lock(&w->names_lock);
		w->stopping = true;
		pthread_cond_signal(&w->wake);
		pthread_mutex_unlock(&w->names_lock);
		pthread_join(w->committer, NULL);
		w->committer_running = false;
	}
	zrfs_publish_all(fs); /* what is ready is committed now, temporary files too */
}
