/*
 * handles.c - files opened for writing: each OPEN or CREATE for writing
 * gets a handle (fi->fh) that answers its own requests, and the rules of
 * write_i.h for when a close publishes what was written.
 *
 * FUSE sends a FLUSH for every close(2) of a descriptor, with the lock
 * owner of the closing process's descriptor table (its threads share it; a
 * forked child has its own), and a RELEASE once the last descriptor of the
 * open file is gone, without waiting for it. A WRITE carries the writer's
 * lock owner too. So a FLUSH publishes when it comes from a table that
 * wrote since the value was stored (or from the process that ftruncate()d,
 * nothing written since): not the close of a duplicate before a write (a shell redirection
 * opens, duplicates and closes before the program writes), not a forked
 * child's exit; and not the close of a duplicate its process keeps another
 * descriptor of the file open beside (bash runs `cmd >&3` as dup2, the
 * command, and a close of the duplicate: a loop of them would publish, and
 * commit, once per command), which /proc tells from a handle's second FLUSH
 * on. The RELEASE publishes what is left: an open(O_TRUNC) closed with
 * nothing written. An exit by a signal sends the same FLUSH as a close: the
 * closer's exit status in /proc tells them apart.
 *
 * open(O_TRUNC) reaches the daemon as an OPEN without O_TRUNC followed by
 * a SETATTR of the size without the new handle (the kernel strips the flag
 * unless FUSE_CAP_ATOMIC_O_TRUNC, which would empty the inode its readers
 * share): handles just opened wait on a list for it, found by inode and
 * process, until they are used.
 *
 * Sections: processes, just opened, opening, the handle's operations.
 */
#include "write_i.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct zrfs_handle_ops handle_ops;

/* ---- processes ---- */

/* The /proc/PID/stat files of the last processes that closed files, kept
 * open by each thread: procfs makes the file afresh at every read from its
 * start, so a read is the process's state now (2 us, where open, read and
 * close take 10, on every close of cp -r); once the process is gone the
 * read fails (ESRCH) and its number may be another's: opened again. */
#define PROC_FILES 4
struct proc_files {
	pid_t pid[PROC_FILES];
	int fd[PROC_FILES];
	unsigned next;
};
static pthread_key_t proc_key;
static pthread_once_t proc_once = PTHREAD_ONCE_INIT;

static void proc_files_free(void *p)
{
	struct proc_files *c = p;

	for (int i = 0; i < PROC_FILES; i++)
		if (c->pid[i])
			close(c->fd[i]);
	free(c);
}

static void proc_key_init(void)
{
	pthread_key_create(&proc_key, proc_files_free);
}

/* Up to @cap bytes of /proc/@pid/stat now: the count, or -1. */
static ssize_t proc_stat(pid_t pid, char *buf, size_t cap)
{
	struct proc_files *c;
	char path[64];
	ssize_t n = -1;
	int k;

	pthread_once(&proc_once, proc_key_init);
	if (!(c = pthread_getspecific(proc_key)) && (c = calloc(1, sizeof *c)) != NULL &&
	    pthread_setspecific(proc_key, c) != 0) {
		free(c);
		c = NULL;
	}
	for (k = 0; c && k < PROC_FILES && c->pid[k] != pid; k++)
		;
	if (c && k < PROC_FILES && (n = pread(c->fd[k], buf, cap, 0)) > 0)
		return n;
	if (c && k < PROC_FILES) { /* gone: its number may be another's now */
		close(c->fd[k]);
		c->pid[k] = 0;
	}
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = pread(fd, buf, cap, 0);
	if (!c || n <= 0) {
		close(fd);
		return n;
	}
	k = (int)(c->next++ % PROC_FILES);
	if (c->pid[k])
		close(c->fd[k]);
	c->pid[k] = pid;
	c->fd[k] = fd;
	return n;
}

/* Whether process (thread) @pid is exiting because of a signal: the
 * kernel sets the exit status before it closes an exiting process's files
 * (do_exit), and /proc/PID/stat shows it with the PF_EXITING flag. False
 * when it cannot be told (another PID namespace: pid 0). */
static bool dying_of_signal(pid_t pid)
{
	char buf[1024];
	unsigned long long flags = 0;
	long long code = 0;
	ssize_t n;

	if (pid <= 0 || (n = proc_stat(pid, buf, sizeof buf - 1)) <= 0)
		return false;
	buf[n] = 0;
	/* "pid (comm) state ppid ...": the comm may hold anything, so count
	 * fields after the last ')': flags is field 9, exit_code field 52 */
	char *p = strrchr(buf, ')');
	for (int field = 2; p && *p; p++)
		if (*p == ' ') {
			field++;
			if (field == 9)
				flags = strtoull(p + 1, NULL, 10);
			else if (field == 52)
				code = strtoll(p + 1, NULL, 10);
		}
	return (flags & 0x4 /* PF_EXITING */) && (code & 0x7f) != 0;
}

/* Whether process @pid has a descriptor open on inode @ino of this mount
 * (the closing one is out of its table by the time of its FLUSH): its
 * /proc/PID/fd links into the mount, and their fdinfo's inode number.
 * Nothing it reads reaches the mount. 1 yes, 0 no, -1 where /proc cannot
 * say (another PID namespace). */
static int open_elsewhere(struct zrfs *fs, pid_t pid, fuse_ino_t ino)
{
	const char *top = fs->writes->mountpoint;
	size_t top_len = strlen(top);
	char path[300], link[4200], info[512];
	struct dirent *e;
	bool yes = false;
	DIR *d;

	snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
	if (!top_len || !(d = opendir(path)))
		return -1;
	while (!yes && (e = readdir(d)) != NULL) {
		ssize_t n;
		int fd;
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "/proc/%d/fd/%s", (int)pid, e->d_name);
		if ((n = readlink(path, link, sizeof link - 1)) <= (ssize_t)top_len ||
		    memcmp(link, top, top_len) != 0 || link[top_len] != '/')
			continue;
		snprintf(path, sizeof path, "/proc/%d/fdinfo/%s", (int)pid, e->d_name);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			continue;
		if ((n = read(fd, info, sizeof info - 1)) > 0) {
			const char *p;
			info[n] = 0;
			p = strstr(info, "\nino:");
			yes = p && strtoull(p + 5, NULL, 10) == (unsigned long long)ino;
		}
		close(fd);
	}
	closedir(d);
	return yes ? 1 : 0;
}

/* ---- just opened ---- */

static void fresh_end(struct zrfs *fs, struct whandle *h)
{
	struct zrfs_writes *w = fs->writes;

	if (!h->fresh) /* read unlocked: it only goes from true to false */
		return;
	pthread_mutex_lock(&w->handles_lock);
	for (struct whandle **p = &w->fresh; *p; p = &(*p)->fresh_next)
		if (*p == h) {
			*p = h->fresh_next;
			break;
		}
	h->fresh = false;
	pthread_mutex_unlock(&w->handles_lock);
}

struct wnode *zrfs_handle_fresh(struct zrfs *fs, fuse_ino_t ino, pid_t pid)
{
	struct zrfs_writes *w = fs->writes;
	struct wnode *n = NULL;

	pthread_mutex_lock(&w->handles_lock);
	for (struct whandle **p = &w->fresh; *p; p = &(*p)->fresh_next)
		if ((*p)->ino == ino && (*p)->pid == pid) {
			struct whandle *h = *p;
			*p = h->fresh_next;
			h->fresh = false;
			n = zrfs_node_ref(h->node);
			break;
		}
	pthread_mutex_unlock(&w->handles_lock);
	return n;
}

/* ---- opening ---- */

struct whandle *zrfs_handle_new(struct zrfs *fs, struct wnode *n, fuse_ino_t ino, pid_t pid,
				bool fresh)
{
	struct zrfs_writes *w = fs->writes;
	struct whandle *h = calloc(1, sizeof *h);

	if (!h)
		return NULL;
	h->h.ops = &handle_ops;
	h->node = zrfs_node_ref(n);
	h->ino = ino;
	h->pid = pid;
	pthread_mutex_lock(&w->handles_lock);
	if (fresh) {
		h->fresh = true;
		h->fresh_next = w->fresh;
		w->fresh = h;
	}
	h->next = w->handles;
	if (h->next)
		h->next->prev = h;
	w->handles = h;
	atomic_fetch_add(&w->nhandles, 1);
	pthread_mutex_unlock(&w->handles_lock);
	return h;
}

void zrfs_handle_drop(struct zrfs *fs, struct whandle *h)
{
	struct zrfs_writes *w = fs->writes;

	fresh_end(fs, h);
	pthread_mutex_lock(&w->handles_lock);
	*(h->prev ? &h->prev->next : &w->handles) = h->next;
	if (h->next)
		h->next->prev = h->prev;
	atomic_fetch_sub(&w->nhandles, 1);
	pthread_mutex_unlock(&w->handles_lock);
	pthread_mutex_lock(&w->names_lock);
	h->node->handles--;
	zrfs_node_release(w, h->node);
	pthread_mutex_unlock(&w->names_lock);
	zrfs_node_put(h->node);
	free(h);
}

void zrfs_handles_free_all(struct zrfs *fs)
{
	while (fs->writes->handles)
		zrfs_handle_drop(fs, fs->writes->handles);
	while (fs->writes->reading)
		zrfs_reading_close(fs, fs->writes->reading);
}

void zrfs_reading_open(struct zrfs *fs, struct zrfs_reading *r)
{
	struct zrfs_writes *w = fs->writes;

	pthread_mutex_lock(&w->handles_lock);
	r->prev = NULL;
	r->next = w->reading;
	if (w->reading)
		w->reading->prev = r;
	w->reading = r;
	pthread_mutex_unlock(&w->handles_lock);
}

void zrfs_reading_close(struct zrfs *fs, struct zrfs_reading *r)
{
	struct zrfs_writes *w = fs->writes;

	pthread_mutex_lock(&w->handles_lock);
	*(r->prev ? &r->prev->next : &w->reading) = r->next;
	if (r->next)
		r->next->prev = r->prev;
	pthread_mutex_unlock(&w->handles_lock);
	if (r->let_go)
		r->let_go(r);
	zrfs_view_put(r->v);
	free(r);
}

struct wnode *zrfs_node_of_number(struct zrfs *fs, fuse_ino_t ino, bool handle, int *rc)
{
	struct zrfs_writes *w = fs->writes;
	struct wnode *n = zrfs_node_of_ino(fs, ino, handle, false, rc);

	if (!n && *rc == -EAGAIN) { /* a group may be moving ids: none does under the lock */
		zrfs_lock_settled(fs); /* a failure: logged, its removals shown as such */
		n = zrfs_node_of_ino(fs, ino, handle, true, rc);
		pthread_mutex_unlock(&w->lock);
	}
	return n;
}

void zrfs_write_open(fuse_req_t req, struct zrfs *fs, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct whandle *h;
	struct wnode *n;
	int rc;

	if (!(n = zrfs_node_of_number(fs, ino, true, &rc))) {
		zrfs_reply_err(req, rc);
		return;
	}
	h = zrfs_handle_new(fs, n, ino, fuse_req_ctx(req)->pid, true);
	if (!h) {
		pthread_mutex_lock(&fs->writes->names_lock);
		n->handles--;
		zrfs_node_release(fs->writes, n);
		pthread_mutex_unlock(&fs->writes->names_lock);
		zrfs_node_put(n);
		zrfs_reply_err(req, -ENOMEM);
		return;
	}
	struct stat st; /* a set-ID file opened by one without CAP_FSETID */
	atomic_init(&h->drop_ids, zrfs_node_stat(fs, n, ino, &st) == 0 &&
					  zrfs_mode_after_write(req, &st) != st.st_mode);
	zrfs_node_put(n);
	fi->fh = (uintptr_t)h;
	fi->direct_io = 1; /* shares no pages with the record's readers */
	if (zrfs_reply_open(req, fi) != 0)
		zrfs_handle_drop(fs, h); /* the opener is gone: no RELEASE comes */
}

/* ---- the handle's operations ---- */

static void h_read(fuse_req_t req, struct zrfs *fs, struct zrfs_handle *hh, fuse_ino_t ino,
		   size_t size, off_t off)
{
	struct whandle *h = (struct whandle *)hh;
	struct wnode *n = h->node;
	char *buf = zrfs_scratch(ZRFS_SCRATCH_REPLY, size);
	ssize_t got;

	(void)ino;
	fresh_end(fs, h);
	if (!buf) {
		zrfs_reply_err(req, -ENOMEM);
		return;
	}
	pthread_mutex_lock(&n->lock);
	got = zrfs_node_load(fs, n);
	if (got == 0)
		got = zrfs_value_read(&n->val, buf, size, (uint64_t)off);
	pthread_mutex_unlock(&n->lock);
	if (got < 0)
		zrfs_reply_err(req, (int)got);
	else
		zrfs_reply_buf(req, buf, (size_t)got);
}

/* A write failed (-errno): the value cannot be whole and is never stored;
 * every close says so. Under n->lock. */
static void write_failed(struct wnode *n, int rc)
{
	if (!n->error)
		n->error = rc;
	n->changed = true;
}

static void h_write(fuse_req_t req, struct zrfs *fs, struct zrfs_handle *hh, const char *buf,
		    size_t size, off_t off, struct fuse_file_info *fi)
{
	struct zrfs_writes *w = fs->writes;
	struct whandle *h = (struct whandle *)hh;
	struct wnode *n = h->node;
	uint64_t at = (uint64_t)off;
	int rc;

	fresh_end(fs, h);
	pthread_mutex_lock(&n->lock);
	if ((rc = zrfs_node_load(fs, n)) == 0) {
		/* O_APPEND: at the end of the value being written, not at the
		 * size the kernel keeps for the inode (its readers' size) */
		if (fi->flags & O_APPEND)
			at = atomic_load(&n->val.size);
		if (at + size > zrfs_node_max(fs, n))
			rc = -EFBIG;
		else if ((rc = zrfs_value_write(&n->val, w->dirfd, buf, size, at)) < 0)
			write_failed(n, rc); /* a full disk */
	}
	if (rc == 0) {
		n->changed = true;
		zrfs_node_touched(n); /* written: its time is now's */
		zrfs_node_wrote(n, fi->lock_owner);
		n->cutter = 0;
		/* a draft written again is not ready until closed again (one
		 * stored already is a record's value once its commit is made) */
		pthread_mutex_lock(&w->names_lock);
		if (n->kind == WN_DRAFT && n->stored == NO_ID)
			zrfs_publish_unready(w, n);
		pthread_mutex_unlock(&w->names_lock);
	}
	pthread_mutex_unlock(&n->lock);
	if (rc < 0)
		zrfs_reply_err(req, rc);
	else if (atomic_exchange(&h->drop_ids, false))
		zrfs_follow_answer_write(fs, zrfs_drop_ids(req, fs, n, h->ino, NULL), req, size);
	else
		zrfs_reply_write(req, size);
}

/* Drop what was written to @n (n->lock held): its value is the stored
 * one again, to be loaded when changed. */
static void drop_written(struct wnode *n)
{
	zrfs_value_free(&n->val);
	n->loaded = n->changed = false;
	zrfs_node_writers_clear(n);
	n->cutter = n->shaper = 0;
	n->error = 0;
}

/* Drop what @n holds that is not stored (n->lock held): a record node
 * keeps its stored value, a draft not stored goes. @why is logged. */
static void discard(struct zrfs *fs, struct wnode *n, const char *why)
{
	struct zrfs_writes *w = fs->writes;
	char esc[ZRFS_LOG_NAME_MAX * 4];

	drop_written(n);
	pthread_mutex_lock(&w->names_lock);
	if (n->kind == WN_DRAFT && n->stored == NO_ID) {
		char path[ZRFS_PATH_MAX];
		if (zrfs_node_path(w, n, path, sizeof path) < 0)
			snprintf(path, sizeof path, "%s", n->name);
		if (zrfs_log_admit()) /* a process killed with many files open */
			fuse_log(FUSE_LOG_WARNING, "zrfs: %s: %s/%s: %s: not stored\n",
				 fs->dataset, zrfs_node_top(fs, n),
				 zrfs_log_name(path, esc, sizeof esc), why);
		zrfs_publish_unready(w, n);
		n->detached = true;
		zrfs_draft_unlist(w, n);
	} else if (zrfs_log_admit()) {
		fuse_log(FUSE_LOG_WARNING, "zrfs: %s: %s/%llu: %s: it keeps its value\n", fs->dataset,
			 fs->fields[n->field].name,
			 (unsigned long long)(n->kind == WN_DRAFT ? n->stored : n->id), why);
	}
	pthread_mutex_unlock(&w->names_lock);
}

/* A failed write, said at a close (n->lock held): what was written is
 * dropped, once; the code for the close. */
static int refuse_failed(struct zrfs *fs, struct wnode *n)
{
	int rc = n->error;
	char why[128];

	snprintf(why, sizeof why, "a write failed (%s)", strerror(-rc));
	discard(fs, n, why);
	return rc;
}

/* Store what node @n holds now (a record: committed; a draft: ready for
 * its group): the generation to wait for, 0, or a negative code. A draft
 * takes no writer's lock: a group being committed does not hold up the
 * closes of the new files after it (cp -r: 7-10% faster than when it did).
 * @last: only if the caller's handle is its only one, which is decided
 * under n->lock, so that no open that comes meanwhile (a RELEASE is sent
 * after close(2) returns: the writer's next open(O_TRUNC) of the file may
 * come first) has its truncation stored as the value, or has the value
 * it writes dropped with what the store refused. */
static int64_t publish(struct zrfs *fs, struct wnode *n, bool last)
{
	struct zrfs_writes *w = fs->writes;
	int64_t gen = 0;
	bool draft, live, locked;

	/* A record node's store needs the writer's lock, taken first (the
	 * order of write_i.h); a draft's does not, and a close of a new file
	 * must not wait for the committer's group. But a draft a group has
	 * stored and not yet committed, written since, waits for the group
	 * (which holds the writer's lock): the group makes it its record's
	 * node with the bytes it stored, and what was written since is then
	 * published as a record's (made ready instead, it was dropped with the
	 * ready mark as the group settled it, and readers got the bytes the
	 * group stored). So does a draft the group made its record's node
	 * before names_lock is taken (a record node stays one: once). */
	locked = n->kind != WN_DRAFT;
	for (;;) {
		if (locked)
			pthread_mutex_lock(&w->lock);
		pthread_mutex_lock(&n->lock);
		pthread_mutex_lock(&w->names_lock);
		if (!locked && (n->kind == WN_RECORD || (n->changed && n->stored != NO_ID))) {
			pthread_mutex_unlock(&w->names_lock);
			pthread_mutex_unlock(&n->lock);
			locked = true;
			continue;
		}
		break;
	}
	draft = n->kind == WN_DRAFT; /* still: its group's commit failed (retried) */
	live = !n->detached && (!last || n->handles == 1);
	if (live && draft && !n->error)
		zrfs_publish_ready(fs, n);
	pthread_mutex_unlock(&w->names_lock);
	if (live && n->error && (draft || n->changed))
		gen = refuse_failed(fs, n);
	else if (live && !draft && n->changed &&
		 (gen = zrfs_publish_record(fs, n)) == -EINVAL)
		drop_written(n); /* refused, as its shape says (logged): once */
	pthread_mutex_unlock(&n->lock);
	if (locked)
		pthread_mutex_unlock(&w->lock);
	return gen;
}

static void h_flush(fuse_req_t req, struct zrfs *fs, struct zrfs_handle *hh,
		    struct fuse_file_info *fi)
{
	struct whandle *h = (struct whandle *)hh;
	struct wnode *n = h->node;
	pid_t pid = fuse_req_ctx(req)->pid;
	bool mine, by_me, emptied, dead = false;
	int rc = 0;

	fresh_end(fs, h);
	pthread_mutex_lock(&n->lock);
	mine = n->changed && (zrfs_node_written(n) ? zrfs_node_written_by(n, fi->lock_owner)
						    : n->cutter && n->cutter == pid);
	/* emptied by this process's open(O_TRUNC), nothing written since:
	 * its last descriptor's close publishes it (: > f; cat f), where
	 * /proc says it was the last (not a shell redirection's close of
	 * the descriptor it has just duplicated; where /proc cannot say, the
	 * RELEASE does it); in a field of a fixed shape, which takes no empty
	 * value, the RELEASE offers it (refused, logged) */
	emptied = !mine && n->changed && !zrfs_node_written(n) && n->shaper &&
		  n->shaper == pid && !fs->fields[n->field].record_size;
	/* what a process that dies of a signal made is dropped, whether it
	 * wrote, truncated, or only opened it emptied (exec sleep 60 > f);
	 * where another process wrote too, nothing is: its close publishes */
	by_me = n->changed && (zrfs_node_written(n) ? zrfs_node_written_by_only(n, fi->lock_owner)
						     : n->cutter == pid || n->shaper == pid);
	if ((mine || by_me) && (dead = dying_of_signal(pid))) {
		char why[64];
		snprintf(why, sizeof why, "its writer (pid %d) was killed", (int)pid);
		if (by_me)
			discard(fs, n, why);
	} else if (mine && n->error) {
		rc = refuse_failed(fs, n);
	}
	pthread_mutex_unlock(&n->lock);
	/* the close of a duplicate: the last descriptor's close publishes */
	if (mine && !dead && rc == 0 && atomic_fetch_add(&h->flushes, 1) > 0 &&
	    open_elsewhere(fs, pid, h->ino) > 0)
		mine = false;
	if (emptied && !dead && rc == 0 && open_elsewhere(fs, pid, h->ino) == 0)
		mine = true;
	/* success but for a failed write, or once its store shows */
	zrfs_follow_answer(fs, rc < 0 || dead || !mine ? rc : publish(fs, n, false), req, NULL);
}

void zrfs_handle_close(struct zrfs *fs, struct whandle *h)
{
	struct wnode *n = zrfs_node_ref(h->node);

	/* the last close: what is left is stored (a draft never written, as
	 * touch makes it, is an empty value); the closer is gone, so a
	 * failure is logged, not answered */
	publish(fs, n, true);
	zrfs_handle_drop(fs, h);
	zrfs_node_put(n);
}

static void h_release(fuse_req_t req, struct zrfs *fs, struct zrfs_handle *hh)
{
	zrfs_handle_close(fs, (struct whandle *)hh);
	zrfs_reply_status(req, 0);
}

/* Store draft @n and commit (an fsync): the generation to wait for, 0, or
 * a negative code. A group that took it before this one (the committer's,
 * or another fsync's) made it its record's node and stored what it held
 * then: what was written since is stored as a record's. */
static int64_t sync_draft(struct zrfs *fs, struct wnode *n)
{
	int64_t gen = zrfs_publish_group(fs, n), again;
	bool record;

	record = n->kind == WN_RECORD; /* the group made it its record's node */
	if (gen < 0 || !record)
		return gen;
	again = publish(fs, n, false);
	return again != 0 ? again : gen;
}

static void h_fsync(fuse_req_t req, struct zrfs *fs, struct zrfs_handle *hh)
{
	struct zrfs_writes *w = fs->writes;
	struct whandle *h = (struct whandle *)hh;
	struct wnode *n = h->node;
	bool draft, hidden;

	fresh_end(fs, h);
	pthread_mutex_lock(&w->names_lock);
	draft = n->kind == WN_DRAFT && !n->detached;
	hidden = draft && zrfs_node_hidden(w, n);
	pthread_mutex_unlock(&w->names_lock);
	if (hidden) /* a temporary file: nothing stores it by itself */
		zrfs_reply_status(req, 0);
	else if (draft)
		zrfs_follow_answer(fs, sync_draft(fs, n), req, NULL);
	else
		zrfs_follow_answer(fs, publish(fs, n, false), req, NULL);
}

/* SEEK_DATA, SEEK_HOLE: in the value being written, its holes its own */
static int64_t h_seek(struct zrfs *fs, struct zrfs_handle *hh, fuse_ino_t ino, uint64_t off,
		      int whence)
{
	struct whandle *h = (struct whandle *)hh;
	struct wnode *n = h->node;
	int64_t rc;

	(void)ino;
	fresh_end(fs, h);
	pthread_mutex_lock(&n->lock);
	rc = zrfs_node_load(fs, n);
	if (rc == 0)
		rc = zrfs_value_seek(&n->val, off, whence);
	pthread_mutex_unlock(&n->lock);
	return rc;
}

static void h_getattr(fuse_req_t req, struct zrfs *fs, struct zrfs_handle *hh, fuse_ino_t ino)
{
	struct whandle *h = (struct whandle *)hh;
	struct wnode *n = h->node;
	struct zrfs_view *v = zrfs_view_current(fs);
	struct stat st;

	/* asked with the handle (lseek SEEK_END): the size being written,
	 * not cached, as the inode is the record's readers' too */
	fresh_end(fs, h);
	zrfs_file_attr(fs, v, ino, 0, &st);
	pthread_mutex_lock(&n->lock);
	int rc = zrfs_node_load(fs, n);
	st.st_size = (off_t)atomic_load(&n->val.size);
	zrfs_node_meta(n, &st);
	pthread_mutex_unlock(&n->lock);
	st.st_blocks = (st.st_size + 511) / 512;
	zrfs_names_begin(fs);
	zrfs_node_links_attr(fs, n, &st); /* tree/'s hard links */
	zrfs_names_end(fs);
	pthread_mutex_lock(&fs->writes->names_lock); /* removed, or replaced: no link */
	if (n->kind == WN_DRAFT ? zrfs_draft_removed(n) : n->detached)
		st.st_nlink = 0;
	pthread_mutex_unlock(&fs->writes->names_lock);
	zrfs_view_put(v);
	if (rc < 0)
		zrfs_reply_err(req, rc);
	else
		zrfs_reply_attr(req, &st, 0);
}

/* Whether thread @tid is of the same process as thread @of. */
static bool same_process(pid_t of, pid_t tid)
{
	char path[64];
	struct stat st;

	if (of == tid)
		return true;
	snprintf(path, sizeof path, "/proc/%d/task/%d", (int)of, (int)tid);
	return stat(path, &st) == 0;
}

/* The node that thread @pid (@threads: or another thread of its process)
 * has @ino open for writing on, referenced (NULL: none); *@open whether
 * any process has. */
static struct wnode *writer_node(struct zrfs_writes *w, fuse_ino_t ino, pid_t pid, bool threads,
				 bool *open)
{
	pid_t others[8];
	size_t nothers = 0;
	struct wnode *n = NULL;

	*open = false;
	pthread_mutex_lock(&w->handles_lock);
	for (struct whandle *h = w->handles; h && !n; h = h->next) {
		if (h->ino != ino)
			continue;
		*open = true;
		if (h->pid == pid)
			n = zrfs_node_ref(h->node);
		else if (nothers < sizeof others / sizeof *others)
			others[nothers++] = h->pid;
	}
	pthread_mutex_unlock(&w->handles_lock);
	/* another thread of an opener: asked of /proc, without the lock */
	for (size_t i = 0; threads && !n && i < nothers; i++) {
		if (!same_process(others[i], pid))
			continue;
		pthread_mutex_lock(&w->handles_lock);
		for (struct whandle *h = w->handles; h && !n; h = h->next)
			if (h->ino == ino && h->pid == others[i])
				n = zrfs_node_ref(h->node);
		pthread_mutex_unlock(&w->handles_lock);
	}
	return n;
}

struct wnode *zrfs_write_own_node(fuse_req_t req, struct zrfs *fs, fuse_ino_t ino)
{
	bool open;

	if (!atomic_load(&fs->writes->nhandles))
		return NULL;
	return writer_node(fs->writes, ino, fuse_req_ctx(req)->pid, false, &open);
}

int zrfs_write_own_attr(fuse_req_t req, struct zrfs *fs, fuse_ino_t ino, struct stat *st)
{
	struct zrfs_writes *w = fs->writes;
	struct wnode *n;
	bool open;

	if (!S_ISREG(st->st_mode) || !atomic_load(&w->nhandles))
		return -1;
	if (!(n = writer_node(w, ino, fuse_req_ctx(req)->pid, true, &open)))
		return open ? 0 : -1;
	/* loaded: the value being written is the truth (before, the stored
	 * one is: nothing changed it); the size read without its lock, as a
	 * listing reads it */
	if (atomic_load(&n->loaded)) {
		st->st_size = (off_t)atomic_load(&n->val.size);
		st->st_blocks = (st->st_size + 511) / 512;
	}
	zrfs_node_meta(n, st);
	zrfs_node_put(n);
	return 1;
}

/* A change of @n's value by @pid that is not a write: bytes [@zero, @zero +
 * @len) within it read as zeros (none: @len 0), then its size is @size, or
 * at least @size where @grow. @at_open: O_TRUNC's, published by the last
 * close. 0 or -errno. */
static int reshape(struct zrfs *fs, struct wnode *n, uint64_t zero, uint64_t len, uint64_t size,
		   bool grow, pid_t pid, bool at_open)
{
	int rc = 0;

	if (size > zrfs_node_max(fs, n))
		return -EFBIG;
	pthread_mutex_lock(&n->lock);
	if (n->kind == WN_RECORD && !n->loaded && size == 0 && !grow)
		n->loaded = true; /* nothing of the stored value is needed */
	if ((rc = zrfs_node_load(fs, n)) == 0) {
		if (len)
			rc = zrfs_value_zero(&n->val, zero, len);
		if (rc == 0 && (!grow || size > atomic_load(&n->val.size)))
			rc = zrfs_value_truncate(&n->val, fs->writes->dirfd, size);
		if (rc < 0)
			write_failed(n, rc);
	}
	if (rc == 0) {
		n->changed = true;
		zrfs_node_touched(n); /* cut: its time is now's */
		if (at_open)
			n->shaper = pid;
		else if (!zrfs_node_written(n))
			n->cutter = pid;
	}
	pthread_mutex_unlock(&n->lock);
	return rc;
}

int zrfs_node_truncate(struct zrfs *fs, struct wnode *n, uint64_t size, pid_t pid, bool at_open)
{
	return reshape(fs, n, 0, 0, size, false, pid, at_open);
}

static void h_setattr(fuse_req_t req, struct zrfs *fs, struct zrfs_handle *hh, fuse_ino_t ino,
		      const struct stat *attr, int to_set, const struct stat *now)
{
	struct whandle *h = (struct whandle *)hh;
	struct wnode *n = h->node;
	struct stat st = *now;
	struct wtimes t;
	int64_t rc = 0;

	/* modes and owners of a file being written: accepted, ignored (cp -p
	 * and rsync -a set them before it is stored); its time, where the
	 * dataset keeps times, stored with it (or now, if nothing is written) */
	fresh_end(fs, h);
	if (to_set & FUSE_SET_ATTR_SIZE) {
		rc = zrfs_node_truncate(fs, n, (uint64_t)attr->st_size, fuse_req_ctx(req)->pid,
					false);
		st.st_size = attr->st_size;
		st.st_blocks = (st.st_size + 511) / 512;
		if (rc == 0)
			rc = zrfs_drop_ids(req, fs, n, ino, &st);
	}
	if (rc >= 0 && zrfs_asked_times(attr, to_set, &t)) {
		rc = zrfs_gen_later(rc, zrfs_publish_times(fs, n, &t));
	}
	if (rc >= 0)
		zrfs_node_meta(n, &st);
	zrfs_follow_answer(fs, rc, req, &st);
}

/* fallocate(2), as ext4 answers it but for what it reserves: nothing (the
 * value is stored at its close, and a full disk fails that). Mode 0 makes
 * the value at least @off + @len long, FALLOC_FL_KEEP_SIZE alone changes
 * no byte, FALLOC_FL_PUNCH_HOLE and FALLOC_FL_ZERO_RANGE make the range
 * read as zeros (the second, without FALLOC_FL_KEEP_SIZE, may lengthen
 * the value); each moves the file's times, and a caller without
 * CAP_FSETID drops its set-ID bits, as a write does. Other modes (collapse,
 * insert, unshare) are EOPNOTSUPP. */
static void h_fallocate(fuse_req_t req, struct zrfs *fs, struct zrfs_handle *hh, int mode,
			off_t off, off_t len)
{
	struct whandle *h = (struct whandle *)hh;
	bool keep = mode & FALLOC_FL_KEEP_SIZE;
	bool zero = mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE);
	int rc;

	fresh_end(fs, h);
	/* (the kernel refuses PUNCH_HOLE without KEEP_SIZE before it asks) */
	if ((mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) ||
	    ((mode & FALLOC_FL_PUNCH_HOLE) && (mode & FALLOC_FL_ZERO_RANGE))) {
		zrfs_reply_err(req, -EOPNOTSUPP);
		return;
	}
	if (off < 0 || len <= 0) {
		zrfs_reply_err(req, -EINVAL);
		return;
	}
	rc = reshape(fs, h->node, (uint64_t)off, zero ? (uint64_t)len : 0,
		     keep ? 0 : (uint64_t)off + (uint64_t)len, true, fuse_req_ctx(req)->pid, false);
	if (rc < 0)
		zrfs_reply_err(req, rc);
	else if (atomic_exchange(&h->drop_ids, false))
		zrfs_follow_answer(fs, zrfs_drop_ids(req, fs, h->node, h->ino, NULL), req, NULL);
	else
		zrfs_reply_status(req, 0);
}

static const struct zrfs_handle_ops handle_ops = {
	.fallocate = h_fallocate,
	.read = h_read,
	.write = h_write,
	.flush = h_flush,
	.fsync = h_fsync,
	.release = h_release,
	.getattr = h_getattr,
	.setattr = h_setattr,
	.seek = h_seek,
};
