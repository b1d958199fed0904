/*
 * follow.c - following commits: a thread that notices a newly committed
 * state, makes it the mount's view, and tells the kernel what to look up
 * again.
 *
 * It watches the dataset's directory with inotify (meta.json is renamed
 * into place by every commit and rebalance) and stats meta.json every
 * second as well (a filesystem shared with other machines tells inotify
 * nothing). On a change it opens the new state with zr_reopen (sharing the
 * chunk files of the current view), learns from the change log which
 * records changed since the current view (zr_changes, O(changes); a full
 * comparison if the log cannot say), and then, under the names lock:
 *   - gives every changed, removed record file a new inode number (a new
 *     version, versions.c) and pins the old number to the old view if the
 *     kernel holds it (inodes.c: every number a lookup found under the
 *     names lock is counted before it is released, so none is on its way);
 *     the same for FIELD.npy of every field that changed and meta.json;
 *   - updates the labels of /by and the names of /tree;
 *   - publishes the new view.
 * Once the lock is released it tells the kernel the names that now name
 * something else (notify.c): changed and removed records, appended ones
 * whose ids a view had before (the kernel may cache their absence; it
 * caches none of an id no view had, fields.c), the .npy views, meta.json,
 * and the listings of the directories concerned. The work is proportional to the
 * records that changed, never to the dataset.
 *
 * Versions of records of which the kernel holds no number any more are
 * given back at each look, a bounded number at a time (TRIM_BUDGET).
 *
 * A commit this mount's writer makes (-o writable) is not read back: the
 * writer commits under this file's lock (zrfs_follow_commit), tells which
 * records of earlier states it changed, and the view is made of a snapshot
 * of it (zr_snapshot); meta.json is then taken as seen. The change log is
 * read, and the dataset reopened, only for other processes' commits.
 *
 * A change made through a writable mount (write/) is answered from here:
 * the request waits until the view of its commit is published and the
 * kernel told, so the program that made it finds it on its next open.
 *
 * Sections: what changed, publishing, watching, answers, the thread.
 */
#include "zrfs_i.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define POLL_MS 1000
/* A request waits this long at most for the mount to show the commit it
 * made (a close, an fsync): past it, the dataset moved or was damaged from
 * outside and the mount cannot follow it; the request gets EIO. */
#define SHOW_WAIT_MS 10000
#define TRIM_BUDGET 4096 /* versions looked at each time, under the names lock */

/* A request answered once the mount shows generation gen. */
struct answer {
	fuse_req_t req;
	uint64_t gen;
	uint64_t ticket;      /* in the order asked: notes noted before it are sent first */
	uint64_t asked_ms;    /* when: it waits SHOW_WAIT_MS at most */
	bool with_attr;
	struct stat st;
	size_t written;       /* a WRITE's answer: its count (SIZE_MAX: not one) */
};

struct zrfs_follow {
	pthread_t thread;
	bool running;
	atomic_bool stopping;
	int inotify;          /* -1 where inotify is unavailable */
	int wake[2];          /* a pipe: written to wake the thread (to stop, or look now) */
	/* Taken to make a view current (the thread, or a request that must
	 * see its own commit: zrfs_follow_commit) and to give versions back;
	 * never while telling the kernel anything. */
	pthread_mutex_t lock;
	/* Taken after lock, if both: */
	pthread_mutex_t answers_lock;
	struct answer *answers; /* requests waiting for a generation */
	size_t nanswers, answers_cap;
	uint64_t tickets;     /* answers asked for so far */
	struct zrfs_notes unsent; /* of views a request made current */
	struct stat seen;     /* meta.json when the current view was made */
	char last_error[256]; /* said once until it changes */
	size_t versions;      /* versions kept at the last look (under lock) */
	uint64_t high;        /* the most records a view has shown: the kernel
			       * may hold names of ids below, never of ids above
			       * (fields.c caches no miss of them) */
};


/* ---- what changed ---- */

struct changed {
	uint64_t *keys;       /* id * ZR_FIELDS_MAX + field, sorted, unique */
	size_t n, cap;
	int rc;
};

static void changed_add(struct changed *c, uint64_t key)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 256;
		uint64_t *k = realloc(c->keys, cap * sizeof *k);
		if (!k) {
			c->rc = -ENOMEM;
			return;
		}
		c->keys = k;
		c->cap = cap;
	}
	c->keys[c->n++] = key;
}

static void on_change(void *ctx, unsigned field, uint64_t id)
{
	changed_add(ctx, id * ZR_FIELDS_MAX + field);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Without a change log that reaches back: every record both views have,
 * compared by where its bytes are (a new value is stored somewhere new). */
static void compare_all(struct zrfs *fs, struct zrfs_view *a, struct zrfs_view *b,
			struct changed *c)
{
	uint64_t n = a->n < b->n ? a->n : b->n;

	for (unsigned f = 0; f < fs->nfields && c->rc == 0; f++)
		for (uint64_t id = 0; id < n && c->rc == 0; id++) {
			zr_record_stat x, y;
			int rx = zr_stat(a->ds, f, id, &x), ry = zr_stat(b->ds, f, id, &y);
			if (rx < 0 || ry < 0 || x.present != y.present || x.chunk_id != y.chunk_id ||
			    x.offset != y.offset || x.physical_len != y.physical_len)
				changed_add(c, id * ZR_FIELDS_MAX + f);
		}
}

/* Keep the keys of @c once each, sorted, and of ids below @n. */
static void changes_tidy(struct changed *c, uint64_t n)
{
	size_t k = 0;

	if (c->n)
		qsort(c->keys, c->n, sizeof *c->keys, cmp_u64);
	for (size_t i = 0; i < c->n; i++)
		if ((i == 0 || c->keys[i] != c->keys[i - 1]) && c->keys[i] / ZR_FIELDS_MAX < n)
			c->keys[k++] = c->keys[i];
	c->n = k;
}

/* The records (field, id) that differ between @old and @new among the ids
 * both have, as the change log says: c->keys, sorted. */
static int changes_between(struct zrfs *fs, struct zrfs_view *old, struct zrfs_view *new,
			   struct changed *c)
{
	int rc = zr_changes(new->ds, old->gen, on_change, c);

	if (rc == -ESTALE) { /* no log, or not back that far: compare */
		c->n = 0;
		compare_all(fs, old, new, c);
		rc = 0;
	}
	if (rc < 0 || c->rc < 0)
		return rc < 0 ? rc : c->rc;
	changes_tidy(c, old->n < new->n ? old->n : new->n);
	return 0;
}

/* ---- publishing ---- */

/* The numbers of record @id of @field now: its file's, and its twin's in
 * tree/ where that shows a class as text; how many. */
static unsigned rec_numbers(struct zrfs *fs, unsigned field, uint64_t id, fuse_ino_t out[2])
{
	out[0] = zrfs_rec_ino(field, id, zrfs_rec_version(fs, field, id));
	out[1] = zrfs_rec_text_ino(out[0]);
	return zrfs_tree_text(fs, field) ? 2 : 1;
}

/* Record @id of @field has new bytes, or none: a new number, the old one
 * pinned (and its twin in tree/, a class's text), its name noted. A number
 * comes round again after 256 changes: what the cache holds under it is
 * of older bytes. Once every number of the record is pinned (256 changes
 * while the kernel keeps each old inode: it keeps one unused until memory
 * is short), the oldest is taken back: it shows the new bytes, also to a
 * program that has held it open since, and the kernel is told to forget
 * what it cached of it. */
static int record_moved(struct zrfs *fs, struct zrfs_view *old, unsigned field, uint64_t id,
			struct zrfs_notes *notes)
{
	char name[ZRFS_NAME_MAX + 1];
	fuse_ino_t ino[2];
	unsigned n = rec_numbers(fs, field, id, ino);
	bool taken_back;
	int rc;

	for (unsigned i = 0; i < n; i++)
		zrfs_inode_pin(fs, ino[i], old);
	if ((rc = zrfs_rec_version_bump(fs, field, id)) < 0)
		return rc;
	taken_back = rc == 1;
	rec_numbers(fs, field, id, ino);
	zrfs_cache_drop(fs->cache, zrfs_rec_cache_key(ino[0]));
	for (unsigned i = 0; i < n && taken_back; i++) {
		zrfs_inode_unpin(fs, ino[i]);
		if ((rc = zrfs_notes_inode(notes, ino[i])) < 0)
			return rc;
	}
	zrfs_record_name_format(fs, field, id, name, sizeof name);
	return zrfs_notes_entry(notes, ZRFS_INO_DIR + field, name);
}

/* Record @id's files' times or modes changed (zr_names.mtime, .mode, ...): the
 * kernel must ask for the attributes of its other files again (their
 * bytes are the same). */
static int times_changed(struct zrfs *fs, uint64_t id, struct zrfs_notes *notes)
{
	int rc = 0;

	for (unsigned f = 0; f < fs->nfields && rc == 0; f++) {
		fuse_ino_t ino[2];
		unsigned n;
		if (zr_names_own(&fs->names, f) && (int)f != fs->names.field)
			continue;
		n = rec_numbers(fs, f, id, ino);
		for (unsigned i = 0; i < n && rc == 0; i++)
			rc = zrfs_notes_inode(notes, ino[i]);
	}
	return rc;
}

/* Record @id's file by id in the field of files that names are paths of:
 * its name may change with the record's name (its extension's), so the
 * kernel must look it up again. */
static int note_by_id(struct zrfs *fs, uint64_t id, struct zrfs_notes *notes)
{
	char name[ZRFS_NAME_MAX + 1];

	zrfs_record_name_format(fs, (unsigned)fs->names.files, id, name, sizeof name);
	return zrfs_notes_entry(notes, ZRFS_INO_DIR + (unsigned)fs->names.files, name);
}

/* The views that follow records (/by, /tree): record @id of @field
 * changed, came or went in @new; where its name changed, its file by id
 * under the name the tree gave it before and the one it gives now. */
static int views_update(struct zrfs *fs, struct zrfs_view *new, unsigned field, uint64_t id,
			struct zrfs_notes *notes)
{
	bool renamed = (int)field == fs->names.field && fs->names.files >= 0;
	int rc = zrfs_byclass_update(fs, new, field, id, notes);

	if (rc == 0 && renamed)
		rc = note_by_id(fs, id, notes);
	if (rc == 0)
		rc = zrfs_tree_update(fs, new, field, id, notes);
	return rc == 0 && renamed ? note_by_id(fs, id, notes) : rc;
}

/* Everything the move from @old to @new changes, under the names lock;
 * @touched[f]: field f changed. */
static int note_changes(struct zrfs *fs, struct zrfs_view *old, struct zrfs_view *new,
			const struct changed *c, bool *touched, struct zrfs_notes *notes)
{
	char name[ZRFS_NAME_MAX + 8];
	int rc = 0;

	for (size_t i = 0; i < c->n && rc == 0; i++) {
		unsigned f = (unsigned)(c->keys[i] % ZR_FIELDS_MAX);
		uint64_t id = c->keys[i] / ZR_FIELDS_MAX;
		touched[f] = true;
		if ((rc = record_moved(fs, old, f, id, notes)) == 0)
			rc = views_update(fs, new, f, id, notes);
		if (rc == 0 && zr_names_own(&fs->names, f) && (int)f != fs->names.field)
			rc = times_changed(fs, id, notes);
	}
	/* records gone (a delete takes the last one) and records appended (a
	 * lookup of their names may have been cached as missing) */
	for (uint64_t id = new->n; id < old->n && rc == 0; id++)
		for (unsigned f = 0; f < fs->nfields && rc == 0; f++)
			if ((rc = record_moved(fs, old, f, id, notes)) == 0)
				rc = views_update(fs, new, f, id, notes);
	for (uint64_t id = old->n; id < new->n && rc == 0; id++)
		for (unsigned f = 0; f < fs->nfields && rc == 0; f++) {
			if (id < fs->follow->high) {
				zrfs_record_name_format(fs, f, id, name, sizeof name);
				rc = zrfs_notes_entry(notes, ZRFS_INO_DIR + f, name);
			}
			if (rc == 0)
				rc = views_update(fs, new, f, id, notes);
		}
	if (new->n > fs->follow->high)
		fs->follow->high = new->n;
	for (unsigned f = 0; f < fs->nfields && rc == 0; f++) {
		if (!touched[f] && old->n == new->n)
			continue;
		rc = zrfs_notes_inode(notes, ZRFS_INO_DIR + f); /* its listing */
		if (rc < 0)
			continue;
		/* its views: FIELD.npy and FIELD.present.npy, of one version */
		fuse_ino_t npy = ZRFS_INO_NPY | (zrfs_npy_version(fs, f) & ZRFS_GEN_MASK) << 8 | f;
		zrfs_inode_pin(fs, npy | ZRFS_INO_PRESENT, old);
		if (fs->fields[f].has_npy)
			zrfs_inode_pin(fs, npy, old);
		zrfs_npy_version_set(fs, f, new->gen);
		snprintf(name, sizeof name, "%s.present.npy", fs->fields[f].spec->name);
		rc = zrfs_notes_entry(notes, ZRFS_INO_ROOT, name);
		if (rc < 0 || !fs->fields[f].has_npy)
			continue;
		snprintf(name, sizeof name, "%s.npy", fs->fields[f].spec->name);
		rc = zrfs_notes_entry(notes, ZRFS_INO_ROOT, name);
	}
	zrfs_inode_pin(fs, ZRFS_INO_META | (old->gen & ZRFS_GEN_MASK), old);
	return rc < 0 ? rc : zrfs_notes_entry(notes, ZRFS_INO_ROOT, "meta.json");
}

/* Say @msg once, until another one comes. */
static void say(struct zrfs *fs, const char *msg)
{
	if (strcmp(fs->follow->last_error, msg) == 0)
		return;
	snprintf(fs->follow->last_error, sizeof fs->follow->last_error, "%s", msg);
	if (msg[0])
		fuse_log(FUSE_LOG_ERR, "zrfs: %s: not following the dataset for now: %s\n",
			 fs->dataset, msg);
}

/* Make @new the mount's view in place of @cur, with the records of @c
 * changed between them, noting in @notes what the kernel must be told.
 * Under the lock. */
static void show_view(struct zrfs *fs, struct zrfs_view *cur, struct zrfs_view *new,
		      const struct changed *c, struct zrfs_notes *notes)
{
	bool *touched = calloc(fs->nfields, sizeof *touched);
	struct zrfs_view *old;
	int rc = touched ? 0 : -ENOMEM;

	zrfs_state_lock(fs);
	if (rc == 0)
		rc = note_changes(fs, cur, new, c, touched, notes);
	/* the directories and links of tree/: a writable mount's are its own
	 * (it is the dataset's one writer), written at its commits */
	if (rc == 0 && !fs->writes)
		rc = zrfs_tree_entries(fs, new, notes);
	old = zrfs_view_publish(fs, new); /* even short of memory: the state is whole */
	if (fs->view_shown)
		fs->view_shown(fs, cur, new->gen);
	fs->follow->versions = zrfs_versions_trim(fs, TRIM_BUDGET);
	zrfs_state_unlock(fs);
	zrfs_view_put(old);
	free(touched);
	say(fs, rc < 0 ? "out of memory: some names may show an older state" : "");
}

/* Make the dataset's current committed state the mount's view, noting in
 * @notes what the kernel must be told: false if it could not (said; the
 * next poll tries again). Under the lock. */
static bool refresh(struct zrfs *fs, struct zrfs_notes *notes)
{
	struct zrfs_view *cur = zrfs_view_current(fs), *new = NULL;
	struct changed c = {0};
	zr_dataset *ds;
	int rc = zr_reopen(cur->ds, &ds);

	if (rc < 0) {
		/* the files of a state committed on another machine sharing the
		 * dataset (or its meta.json, just renamed) may show here a moment
		 * later: the next poll tries */
		say(fs, rc == -ENOMEM   ? "out of memory"
			: rc == -ESTALE ? "a new state's files are not all visible here yet "
					  "(a filesystem shared with other machines); trying again"
					: zr_errmsg(NULL));
		goto out;
	}
	if (zr_generation(ds) == cur->gen) {
		zr_close(ds);
		goto out;
	}
	if ((rc = zrfs_view_make(fs, ds, &new)) < 0) {
		zr_close(ds);
		say(fs, strerror(-rc));
		goto out;
	}
	if ((rc = changes_between(fs, cur, new, &c)) < 0) {
		say(fs, rc == -ENOMEM ? "out of memory" : zr_errmsg(new->ds));
		zrfs_view_put(new);
		goto out;
	}
	show_view(fs, cur, new, &c, notes);
out:
	free(c.keys);
	zrfs_view_put(cur);
	return rc == 0;
}

/* This mount's commit of @writer was made, telling its changes into @c:
 * make the state it committed the view from what the writer holds
 * (zr_snapshot), with the changes it told, where the view is the state
 * before it; else as any commit, read back. Under the lock. */
static void show_commit(struct zrfs *fs, zr_dataset *writer, struct changed *c,
			struct zrfs_notes *notes)
{
	struct zrfs_view *cur = zrfs_view_current(fs), *new = NULL;
	char path[4096];
	zr_dataset *ds;
	int rc = c->rc;

	if (rc == 0 && (rc = zr_snapshot(writer, cur->ds, &ds)) == 0) {
		if (zr_generation(ds) == cur->gen) { /* nothing was committed */
			zr_close(ds);
			goto out;
		}
		if ((rc = zrfs_view_make(fs, ds, &new)) < 0)
			zr_close(ds);
	}
	if (rc < 0 || new->gen != cur->gen + 1) {
		/* short of memory, or the view is older than the state before
		 * (a failure said before): the commit is read back */
		zrfs_view_put(new);
		if (!refresh(fs, notes))
			fs->follow->seen.st_ino = 0; /* not followed: the next look tries */
		goto out;
	}
	changes_tidy(c, cur->n < new->n ? cur->n : new->n);
	show_view(fs, cur, new, c, notes);
out:
	zrfs_view_put(cur);
	cur = zrfs_view_current(fs);
	if (cur->gen < zr_generation(writer)) {
		/* not shown (whatever the way): the next look reads it back,
		 * and a request waiting for it is told why if it never shows */
		char why[160];
		snprintf(why, sizeof why, "commit %llu is not shown yet (the view is of %llu%s%s)",
			 (unsigned long long)zr_generation(writer), (unsigned long long)cur->gen,
			 rc < 0 ? ": " : "", rc < 0 ? strerror(-rc) : "");
		if (!fs->follow->last_error[0])
			say(fs, why);
		fs->follow->seen.st_ino = 0;
	} else if (fs->follow->seen.st_ino) {
		/* the commit's meta.json is seen: the next look does not read it back */
		snprintf(path, sizeof path, "%s/meta.json", fs->dataset);
		if (stat(path, &fs->follow->seen) < 0)
			fs->follow->seen.st_ino = 0;
	}
	zrfs_view_put(cur);
}

/* ---- watching ---- */

/* Whether meta.json is not the one last seen (a commit renames a new file
 * into place: another inode). */
static bool meta_changed(struct zrfs *fs)
{
	char path[4096];
	struct stat st;

	snprintf(path, sizeof path, "%s/meta.json", fs->dataset);
	if (stat(path, &st) < 0)
		return false;
	if (st.st_ino == fs->follow->seen.st_ino && st.st_dev == fs->follow->seen.st_dev &&
	    st.st_size == fs->follow->seen.st_size &&
	    st.st_mtim.tv_sec == fs->follow->seen.st_mtim.tv_sec &&
	    st.st_mtim.tv_nsec == fs->follow->seen.st_mtim.tv_nsec)
		return false;
	fs->follow->seen = st;
	return true;
}

/* If a commit came since the last look, make it the mount's view (noting
 * in @notes what the kernel must be told); else give back the versions of
 * records the kernel forgot, if any are kept. Under the lock. */
static void look(struct zrfs *fs, struct zrfs_notes *notes)
{
	struct zrfs_follow *w = fs->follow;

	if (meta_changed(fs)) {
		if (!refresh(fs, notes))
			w->seen.st_ino = 0; /* not followed: try again */
	} else if (w->versions) {
		zrfs_state_lock(fs);
		w->versions = zrfs_versions_trim(fs, TRIM_BUDGET);
		zrfs_state_unlock(fs);
	}
}

int zrfs_follow_commit(struct zrfs *fs, zr_dataset *writer)
{
	struct zrfs_follow *w = fs->follow;
	struct zrfs_notes notes = {0};
	struct changed c = {0};
	int rc;

	if (!w)
		return zr_commit(writer); /* nothing follows */
	/* the follower does not look while the commit lands: it would read
	 * back what the writer is about to tell */
	pthread_mutex_lock(&w->lock);
	if (!w->running) { /* stopped: the mount's session is over */
		pthread_mutex_unlock(&w->lock);
		return zr_commit(writer);
	}
	if ((rc = zr_commit_changes(writer, on_change, &c)) == 0)
		show_commit(fs, writer, &c, &notes);
	pthread_mutex_lock(&w->answers_lock);
	zrfs_notes_take(&w->unsent, &notes);
	pthread_mutex_unlock(&w->answers_lock);
	pthread_mutex_unlock(&w->lock);
	zrfs_notes_free(&notes); /* what the swap left it */
	free(c.keys);
	if (rc == 0 && write(w->wake[1], "", 1) < 0) {
		/* full: the thread has wake-ups waiting already */
	}
	return rc;
}

/* ---- answers ---- */

static void answer_send(const struct answer *a)
{
	if (a->written != SIZE_MAX)
		zrfs_reply_write(a->req, a->written);
	else if (a->with_attr)
		zrfs_reply_attr(a->req, &a->st, 0);
	else
		zrfs_reply_status(a->req, 0);
}

/* Whether answer @a waits for generation @gen or an older one, asked for
 * up to ticket @upto (any, with @all): it is sent. */
static bool answer_due(const struct answer *a, uint64_t gen, uint64_t upto, bool all)
{
	return all || (a->gen <= gen && a->ticket <= upto);
}

/* Answer the requests waiting for generation @gen or an older one that
 * were asked for up to ticket @upto (all of them when @all); and EIO to
 * those that waited SHOW_WAIT_MS for a generation the mount has not shown
 * (it is at @gen), saying why once, before the first EIO reaches anyone. */
static void answer_up_to(struct zrfs *fs, uint64_t gen, uint64_t upto, bool all)
{
	struct zrfs_follow *w = fs->follow;
	uint64_t now = zrfs_now_ms(), late = 0;
	size_t k = 0;

	pthread_mutex_lock(&w->answers_lock);
	for (size_t i = 0; i < w->nanswers; i++) {
		const struct answer *a = &w->answers[i];
		if (!answer_due(a, gen, upto, all) && a->gen > gen &&
		    now - a->asked_ms >= SHOW_WAIT_MS && a->gen > late)
			late = a->gen;
	}
	if (late && zrfs_log_admit())
		fuse_log(FUSE_LOG_ERR,
			 "zrfs: %s: the mount cannot show commit %llu, made through it, and shows "
			 "%llu (%s): its close or fsync fails with EIO\n",
			 fs->dataset, (unsigned long long)late, (unsigned long long)gen,
			 w->last_error[0] ? w->last_error : "the dataset is not where it was");
	for (size_t i = 0; i < w->nanswers; i++) {
		const struct answer *a = &w->answers[i];
		if (answer_due(a, gen, upto, all))
			answer_send(a);
		else if (a->gen > gen && now - a->asked_ms >= SHOW_WAIT_MS)
			zrfs_reply_err(a->req, -EIO);
		else
			w->answers[k++] = *a;
	}
	w->nanswers = k;
	pthread_mutex_unlock(&w->answers_lock);
}

/* Answer @a now or once generation a->gen shows (zrfs_follow_answer). */
static void answer(struct zrfs *fs, struct answer a)
{
	struct zrfs_follow *w = fs->follow;
	bool queued = false;

	if (a.gen > 0 && w && w->running) {
		pthread_mutex_lock(&w->answers_lock);
		if (w->nanswers == w->answers_cap) {
			size_t cap = w->answers_cap ? w->answers_cap * 2 : 64;
			struct answer *p = realloc(w->answers, cap * sizeof *p);
			if (p) {
				w->answers = p;
				w->answers_cap = cap;
			}
		}
		if (w->nanswers < w->answers_cap) {
			a.ticket = ++w->tickets;
			w->answers[w->nanswers++] = a;
			queued = true;
		}
		pthread_mutex_unlock(&w->answers_lock);
	}
	if (!queued) {
		/* nothing to wait for, nothing follows, or short of memory: the
		 * commit is made */
		answer_send(&a);
		return;
	}
	if (write(w->wake[1], "", 1) < 0) {
		/* the pipe is full: the thread has wake-ups waiting already */
	}
}

void zrfs_follow_answer(struct zrfs *fs, int64_t gen, fuse_req_t req, const struct stat *st)
{
	struct answer a = {req, (uint64_t)gen, 0, zrfs_now_ms(), st != NULL, {0}, SIZE_MAX};

	if (gen < 0) {
		zrfs_reply_err(req, (int)gen);
		return;
	}
	if (st)
		a.st = *st;
	answer(fs, a);
}

void zrfs_follow_answer_write(struct zrfs *fs, int64_t gen, fuse_req_t req, size_t size)
{
	struct answer a = {req, gen < 0 ? 0 : (uint64_t)gen, 0, zrfs_now_ms(), false, {0}, size};

	answer(fs, a); /* written either way: a failed change of mode is not the write's */
}

/* ---- the thread ---- */

static void *follower(void *arg)
{
	struct zrfs *fs = arg;
	struct zrfs_follow *w = fs->follow;
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

	for (;;) {
		struct pollfd p[2] = {{w->wake[0], POLLIN, 0}, {w->inotify, POLLIN, 0}};
		poll(p, w->inotify >= 0 ? 2 : 1, POLL_MS);
		if (atomic_load(&w->stopping))
			break;
		/* every event and wake-up at once: several commits, one refresh */
		while (read(w->wake[0], buf, sizeof buf) > 0)
			;
		while (w->inotify >= 0 && read(w->inotify, buf, sizeof buf) > 0)
			;
		/* the view now current, and everything to tell of it and before */
		struct zrfs_notes notes = {0};
		pthread_mutex_lock(&w->lock);
		look(fs, &notes);
		struct zrfs_view *cur = zrfs_view_current(fs);
		uint64_t gen = cur->gen;
		zrfs_view_put(cur);
		pthread_mutex_lock(&w->answers_lock);
		zrfs_notes_take(&notes, &w->unsent);
		uint64_t upto = w->tickets;
		pthread_mutex_unlock(&w->answers_lock);
		pthread_mutex_unlock(&w->lock);
		zrfs_notes_send(fs, &notes);
		zrfs_notes_free(&notes);
		/* the old numbers pinned: the kernel need not keep them now */
		zrfs_inodes_prune(fs, zrfs_now_ms());
		answer_up_to(fs, gen, upto, false);
	}
	return NULL;
}

int zrfs_follow_start(struct zrfs *fs)
{
	struct zrfs_follow *w = calloc(1, sizeof *w);
	char path[4096];

	if (!w)
		return -ENOMEM;
	fs->follow = w;
	pthread_mutex_init(&w->lock, NULL);
	pthread_mutex_init(&w->answers_lock, NULL);
	if (pipe2(w->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
		free(w);
		fs->follow = NULL;
		return -errno;
	}
	snprintf(path, sizeof path, "%s/meta.json", fs->dataset);
	stat(path, &w->seen);
	struct zrfs_view *first = zrfs_view_current(fs);
	w->high = first->n;
	zrfs_view_put(first);
	w->inotify = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w->inotify >= 0 &&
	    inotify_add_watch(w->inotify, fs->dataset, IN_MOVED_TO | IN_CLOSE_WRITE) < 0) {
		close(w->inotify);
		w->inotify = -1; /* the poll alone, then */
	}
	/* a commit between the first view's opening and now (no request is
	 * served yet: the kernel can be told from here) */
	struct zrfs_notes notes = {0};
	refresh(fs, &notes);
	zrfs_notes_send(fs, &notes);
	zrfs_notes_free(&notes);
	w->running = zrfs_thread_start(&w->thread, follower, fs) == 0;
	return w->running ? 0 : -EAGAIN;
}

void zrfs_follow_stop(struct zrfs *fs)
{
	struct zrfs_follow *w = fs->follow;

	if (!w || !w->running)
		return;
	atomic_store(&w->stopping, true);
	if (write(w->wake[1], "", 1) < 0) {
		/* full: the thread is woken already */
	}
	pthread_join(w->thread, NULL);
	/* a commit showing itself (the committer's, a close's) ends first;
	 * those after it are not shown (zrfs_follow_commit) */
	pthread_mutex_lock(&w->lock);
	w->running = false;
	pthread_mutex_unlock(&w->lock);
	answer_up_to(fs, 0, 0, true); /* the commits they wait for are made */
}

void zrfs_follow_free(struct zrfs *fs)
{
	struct zrfs_follow *w = fs->follow;

	if (!w)
		return;
	zrfs_follow_stop(fs);
	if (w->inotify >= 0)
		close(w->inotify);
	close(w->wake[0]);
	close(w->wake[1]);
	free(w->answers);
	zrfs_notes_free(&w->unsent);
	pthread_mutex_destroy(&w->answers_lock);
	pthread_mutex_destroy(&w->lock);
	free(w);
	fs->follow = NULL;
}
