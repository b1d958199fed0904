/*
 * publish.c - values becoming records' values: a record node's value at
 * the close that publishes it, drafts in groups, and the changes renames
 * and removals make. Every change is made and committed under the writer's
 * lock (w->lock), and the mount is made to show it before the lock goes
 * (zrfs_follow_commit): so the next change starts from the state the
 * mount shows, and a lookup sees a draft or its record, never both (a
 * draft whose commit the view has is settled, write_i.h).
 *
 * Drafts are committed in groups by a thread of their own, at most
 * -o commit_ms after the first is ready, or once -o commit_size bytes or
 * DRAFTS_MAX / 2 of them wait, or at once by an fsync of a file or a
 * directory: so cp -r of many small files is not a commit per file. A
 * commit that fails is logged and retried less and less often (a full
 * disk: every 5 s at most); what it carried stays stored and goes with the
 * next commit that succeeds.
 *
 * Removals of records' files wait for a group too (names.c): each is an
 * entry of the table of removals, by the id and version the view has;
 * the next commit through the mount makes them in the writer first, the
 * highest id first (no record then moves but one below them), and the
 * entries go once the view has the commit.
 *
 * A record made through this mount (its id at least the length at mount)
 * that has lost every value is removed again, as zr rm does (the last
 * record takes its id, and the log says so): a temporary file a commit took
 * along before it was renamed away or removed leaves no record behind.
 *
 * The thread that commits groups is committer.c's.
 *
 * Sections: values and names, removing, records, drafts.
 */
#include "write_i.h"

#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- values and names ---- */

/* The value record @id's name takes for file name @name in field @field:
 * the name itself, or where names are WebDataset keys the key the file
 * name holds when it is this field's file (KEY.FIELD, zr_names): zr export
 * and tree/ add the field back. */
static zr_value name_value(const struct zrfs *fs, unsigned field, const char *name)
{
	size_t len = strlen(name), key_len;
	unsigned f;

	if (fs->names.key &&
	    zr_names_field_of(fs->writes->ds, &fs->names, name, len, &f, &key_len) == 0 &&
	    f == field)
		len = key_len;
	return (zr_value){name, len};
}

/* Whether @name is the name new record @id's file has anyway, without a
 * name of its own ("ID.ext", the field's extension). */
static bool own_name(const struct zrfs *fs, unsigned field, uint64_t id, const char *name)
{
	char own[ZRFS_NAME_MAX + 1];

	zrfs_record_name_for(fs, field, id, NULL, 0, own, sizeof own);
	return strcmp(own, name) == 0;
}

/* Make (@field, @id) hold @v (data NULL: missing), not committed; @id the
 * length: a new record, its other fields missing, named @name where the
 * dataset keeps names (NULL: none). 0 or a negative code (logged). Under
 * w->lock. */
static int set_value(struct zrfs *fs, unsigned field, uint64_t id, zr_value v, const char *name)
{
	struct zrfs_writes *w = fs->writes;
	uint64_t n = zr_length(w->ds);
	int rc;

	zrfs_nodes_keep(fs, field, id < n ? id : NO_ID); /* what descriptors read */
	if (id == n) {
		zr_value *row = calloc(fs->nfields, sizeof *row);
		if (!row)
			return -ENOMEM;
		row[field] = v;
		if (name && fs->names.field >= 0 && (unsigned)fs->names.field != field)
			row[fs->names.field] = name_value(fs, field, name);
		rc = zr_append(w->ds, row, NULL);
		free(row);
	} else {
		rc = id < n ? zr_modify(w->ds, field, id, v) : -ENOENT;
	}
	if (rc < 0 && zrfs_log_admit()) /* not committed: it goes with the next commit */
		fuse_log(FUSE_LOG_ERR, "zrfs: %s: %s/%llu: cannot store: %s\n", fs->dataset,
			 fs->fields[field].name, (unsigned long long)id, zr_errmsg(w->ds));
	return rc;
}

static int apply_removals(struct zrfs *fs);

static int class_cmp(const void *a, const void *b)
{
	return strcmp(((const struct wclass *)a)->name, ((const struct wclass *)b)->name);
}

static const struct wclass *class_find(const struct zrfs_writes *w, const char *name)
{
	struct wclass key = {.name = (char *)name};

	return w->nclasses ? bsearch(&key, w->classes, w->nclasses, sizeof *w->classes, class_cmp)
			   : NULL;
}

int zrfs_classes_load(struct zrfs *fs)
{
	struct zrfs_writes *w = fs->writes;
	char *text;
	json_t *root, *names, *v;
	size_t i = 0;

	if (fs->names.label < 0)
		return 0;
	text = zr_attrs(w->ds);
	root = text ? json_loads(text, 0, NULL) : NULL;
	free(text);
	names = json_object_get(json_object_get(root, "classes"),
				fs->fields[fs->names.label].name);
	if (!root || !(w->classes = calloc(json_array_size(names) + 1, sizeof *w->classes))) {
		json_decref(root);
		return -ENOMEM;
	}
	json_array_foreach(names, i, v) {
		if (!json_is_string(v))
			continue;
		if (!(w->classes[w->nclasses].name = strdup(json_string_value(v))))
			break;
		w->classes[w->nclasses++].no = (int64_t)i;
	}
	bool whole = i == json_array_size(names);
	json_decref(root);
	qsort(w->classes, w->nclasses, sizeof *w->classes, class_cmp);
	return whole ? 0 : -ENOMEM;
}

void zrfs_classes_free(struct zrfs_writes *w)
{
	for (size_t i = 0; i < w->nclasses; i++)
		free(w->classes[i].name);
	free(w->classes);
	w->classes = NULL;
	w->nclasses = 0;
}

/* Record @id, at @path in tree/, takes the class its path gives (the
 * label zr import dir gave it from its directory: zr_names.label), or
 * none where the directory names no class (said, rarely). Not committed;
 * 0 or a negative code (logged). */
static int set_label(struct zrfs *fs, uint64_t id, const char *path)
{
	struct zrfs_writes *w = fs->writes;
	char name[ZRFS_NAME_MAX + 1];
	const struct wclass *hit = NULL;
	size_t len;
	const char *dir;

	if (fs->names.label < 0)
		return 0;
	dir = zr_name_class_dir(path, strlen(path), fs->names.label_top, &len);
	if (dir && len < sizeof name) {
		memcpy(name, dir, len);
		name[len] = 0;
		hit = class_find(w, name);
	}
	if (!hit && zrfs_log_admit())
		fuse_log(FUSE_LOG_INFO, "zrfs: %s: tree/%s is in no class of %s (attrs.classes): "
			 "its label is missing\n", fs->dataset, path,
			 fs->fields[fs->names.label].name);
	return set_value(fs, (unsigned)fs->names.label, id,
			 hit ? (zr_value){&hit->no, sizeof hit->no} : (zr_value){NULL, 0}, NULL);
}

/* Commit what was changed, with the removals waiting, and make the mount
 * show it (under w->lock): the generation, or a negative code (logged). */
static int64_t commit(struct zrfs *fs)
{
	struct zrfs_writes *w = fs->writes;
	int rc = apply_removals(fs);

	/* tree/'s directories and links as they are now (a change after
	 * this goes with the next commit); past what a dataset keeps, or
	 * short of memory, the records are committed all the same, and the
	 * log says what was not kept */
	uint64_t tree = zrfs_tree_due_ms(w);
	if (rc == 0 && tree && tree <= zrfs_now_ms()) {
		atomic_store(&w->tree_changed, false);
		atomic_store(&w->tree_now, false);
		w->tree_saved_ms = zrfs_now_ms();
	} else {
		tree = 0;
	}
	if (tree && zrfs_tree_save(fs, w->ds) < 0 && zrfs_log_admit())
		fuse_log(FUSE_LOG_ERR, "zrfs: %s: tree/'s directories and links are not kept: %s\n",
			 fs->dataset, zr_errmsg(w->ds));
	if (rc == 0)
		rc = zrfs_follow_commit(fs, w->ds);
	if (rc == 0 && w->gone_applied) { /* shown: the view has them */
		pthread_mutex_lock(&w->names_lock);
		zrfs_gone_clear(w);
		w->gone_applied = false;
		pthread_mutex_unlock(&w->names_lock);
	}
	if (rc < 0) {
		if (zrfs_log_admit()) /* a full disk, every close */
			fuse_log(FUSE_LOG_ERR, "zrfs: %s: cannot commit: %s\n", fs->dataset,
				 zr_errmsg(w->ds));
		return rc;
	}
	/* the changes to earlier records that every view has (the one of
	 * the state before is held at least by the request that made this
	 * commit) go into the tables, so that the next commits' journals hold
	 * only what came since (failure: logged, kept in the journal) */
	if (zr_settle(w->ds) < 0 && zrfs_log_admit())
		fuse_log(FUSE_LOG_ERR, "zrfs: %s: cannot bring the tables up to date: %s\n",
			 fs->dataset, zr_errmsg(w->ds));
	return (int64_t)zr_generation(w->ds);
}

/* The value, in field @of (-1: the dataset keeps none) of @width-byte
 * values one a record or one a field (zr_names.mtime, .mode), of the file
 * of (@field, @id) is @val from now on (@none: the other fields' where the
 * record has none yet); not committed (under w->lock). 0 or a negative
 * code (logged). */
static int set_per_file(struct zrfs *fs, int of, unsigned field, uint64_t id, const void *val,
			size_t width, const void *none)
{
	struct zrfs_writes *w = fs->writes;
	unsigned char vals[ZR_FIELDS_MAX * 8];
	unsigned each;

	if (of < 0)
		return 0;
	each = fs->fields[of].spec->ndim ? fs->nfields : 1;
	if (each > 1 && (zr_present(w->ds, (unsigned)of, id) != 1 ||
			 zr_record_load(w->ds, (unsigned)of, id, vals, sizeof vals) !=
				 (int64_t)(each * width)))
		for (unsigned f = 0; f < each; f++)
			memcpy(vals + f * width, none, width);
	memcpy(vals + (each > 1 ? field : 0) * width, val, width);
	return set_value(fs, (unsigned)of, id, (zr_value){vals, each * width}, NULL);
}

/* A time, in field @of (zr_names.mtime, .atime, .ctime; -1: the dataset
 * keeps none), of the file of (@field, @id) is @ns from now on; not
 * committed (under w->lock). */
static int set_time(struct zrfs *fs, int of, unsigned field, uint64_t id, int64_t ns)
{
	static const int64_t none = ZR_MTIME_NONE;

	return set_per_file(fs, of, field, id, &ns, sizeof ns, &none);
}

/* The file of (@field, @id) was changed (its value, name, mode or times)
 * at @ns, where the dataset keeps change times; not committed. */
static int set_changed(struct zrfs *fs, unsigned field, uint64_t id, int64_t ns)
{
	return set_time(fs, fs->names.ctime, field, id, ns);
}

int zrfs_publish_changed_later(struct zrfs *fs, unsigned field, uint64_t id)
{
	struct zrfs_writes *w = fs->writes;

	if (fs->names.ctime < 0 || id >= zr_length(w->ds))
		return 0;
	return set_changed(fs, field, id, zrfs_now_ns());
}

/* The mode of the file of (@field, @id) is @mode from now on, where the
 * dataset keeps modes; not committed (under w->lock). */
static int set_mode(struct zrfs *fs, unsigned field, uint64_t id, uint32_t mode)
{
	static const uint32_t none = ZR_MODE_NONE;

	return set_per_file(fs, fs->names.mode, field, id, &mode, sizeof mode, &none);
}

/* The owner and group of the file of (@field, @id) are @uid and @gid from
 * now on, where the dataset keeps them; not committed (under w->lock). */
static int set_owner(struct zrfs *fs, unsigned field, uint64_t id, uint32_t uid, uint32_t gid)
{
	static const uint32_t none = ZR_OWNER_NONE;
	int rc = set_per_file(fs, fs->names.uid, field, id, &uid, sizeof uid, &none);

	return rc < 0 ? rc : set_per_file(fs, fs->names.gid, field, id, &gid, sizeof gid, &none);
}

/* The times of node @n, whose value is stored now as record @id's
 * (n->lock held): its last change's or the ones set on it since, else
 * now's; its access time where one was set or it was made. */
static int set_node_times(struct zrfs *fs, const struct wnode *n, uint64_t id)
{
	int64_t now = zrfs_now_ns();
	int rc = set_time(fs, fs->names.mtime, n->field, id, n->mtime_set ? n->mtime : now);

	if (rc == 0 && n->atime_set)
		rc = set_time(fs, fs->names.atime, n->field, id, n->atime);
	return rc < 0 ? rc : set_changed(fs, n->field, id, n->ctime_set ? n->ctime : now);
}

int64_t zrfs_publish_times(struct zrfs *fs, struct wnode *n, const struct wtimes *t)
{
	struct zrfs_writes *w = fs->writes;
	int64_t now = zrfs_now_ns();
	uint64_t id;
	int64_t rc;
	bool kept;

	if (fs->names.mtime < 0)
		return 0; /* the dataset keeps no times: the commit's show */
	pthread_mutex_lock(&w->lock);
	pthread_mutex_lock(&n->lock);
	pthread_mutex_lock(&w->names_lock);
	kept = (n->kind == WN_DRAFT && n->stored == NO_ID) || n->changed;
	id = n->kind == WN_DRAFT ? n->stored : n->id;
	pthread_mutex_unlock(&w->names_lock);
	/* shown from now on: stored with what is being written, or now */
	if (t->mtime != ZR_MTIME_NONE) {
		n->mtime = t->mtime;
		n->mtime_set = true;
	}
	if (t->atime != ZR_MTIME_NONE && fs->names.atime >= 0) {
		n->atime = t->atime;
		n->atime_set = true;
	}
	zrfs_node_changed(n, now);
	pthread_mutex_unlock(&n->lock);
	if (kept || id == NO_ID) {
		pthread_mutex_unlock(&w->lock);
		return 0;
	}
	rc = id < zr_length(w->ds) ? 0 : -ENOENT;
	if (rc == 0 && t->mtime != ZR_MTIME_NONE)
		rc = set_time(fs, fs->names.mtime, n->field, id, t->mtime);
	if (rc == 0 && t->atime != ZR_MTIME_NONE)
		rc = set_time(fs, fs->names.atime, n->field, id, t->atime);
	if (rc == 0)
		rc = set_changed(fs, n->field, id, now);
	if (rc == 0)
		rc = commit(fs);
	pthread_mutex_unlock(&w->lock);
	return rc;
}

int64_t zrfs_publish_attrs(struct zrfs *fs, struct wnode *n, const uint32_t *mode,
			   const uint32_t *owner)
{
	struct zrfs_writes *w = fs->writes;
	int64_t now = zrfs_now_ns();
	uint64_t id;
	int64_t rc = 0;
	bool kept;

	mode = fs->names.mode >= 0 ? mode : NULL;
	owner = zrfs_owners_kept(fs) ? owner : NULL;
	if (!mode && !owner && fs->names.ctime < 0)
		return 0;
	pthread_mutex_lock(&w->lock);
	pthread_mutex_lock(&n->lock);
	pthread_mutex_lock(&w->names_lock);
	kept = n->kind == WN_DRAFT && n->stored == NO_ID;
	id = n->kind == WN_DRAFT ? n->stored : n->id;
	pthread_mutex_unlock(&w->names_lock);
	if (n->kind == WN_DRAFT) { /* stored with it, and shown meanwhile */
		if (mode) {
			n->mode = *mode;
			n->mode_set = true;
		}
		if (owner) {
			n->uid = owner[0];
			n->gid = owner[1];
			n->owner_set = true;
		}
	}
	zrfs_node_changed(n, now);
	pthread_mutex_unlock(&n->lock);
	if (kept || id == NO_ID) {
		pthread_mutex_unlock(&w->lock);
		return 0;
	}
	if (id >= zr_length(w->ds))
		rc = -ENOENT;
	if (rc == 0 && mode)
		rc = set_mode(fs, n->field, id, *mode);
	if (rc == 0 && owner)
		rc = set_owner(fs, n->field, id, owner[0], owner[1]);
	if (rc == 0)
		rc = set_changed(fs, n->field, id, now);
	if (rc == 0)
		rc = commit(fs);
	pthread_mutex_unlock(&w->lock);
	return rc;
}

int64_t zrfs_drop_ids(fuse_req_t req, struct zrfs *fs, struct wnode *n, fuse_ino_t ino,
		      struct stat *st)
{
	struct stat now;
	mode_t m;

	if (!st) {
		if (zrfs_node_stat(fs, n, ino, &now) < 0)
			return 0;
		st = &now;
	}
	if ((m = zrfs_mode_after_write(req, st)) == st->st_mode)
		return 0;
	uint32_t bits = S_IFREG | (m & 07777);
	int64_t rc = zrfs_publish_attrs(fs, n, &bits, NULL);
	if (rc >= 0)
		st->st_mode = m;
	return rc;
}

/* A value of the wrong size for a fixed shape is refused, and logged. */
static int check_shape(struct zrfs *fs, unsigned field, const char *what, uint64_t size)
{
	const struct zrfs_field *f = &fs->fields[field];
	char esc[ZRFS_LOG_NAME_MAX];

	if (!f->record_size || size == f->record_size)
		return 0;
	if (zrfs_log_admit())
		fuse_log(FUSE_LOG_ERR,
			 "zrfs: %s: %s/%s: %llu bytes written, the field's shape takes %llu: "
			 "not stored\n",
			 fs->dataset, f->name, zrfs_log_name(what, esc, sizeof esc),
			 (unsigned long long)size, (unsigned long long)f->record_size);
	return -EINVAL;
}

/* ---- removing ---- */

/* Remove record @id if it has no value left and was made through this
 * mount or (@by_name) is known by its name (under w->lock): the last record
 * takes its id. 0 or a negative code. */
static int remove_if_empty(struct zrfs *fs, uint64_t id, bool by_name)
{
	struct zrfs_writes *w = fs->writes;
	uint64_t last = zr_length(w->ds) - 1;
	int rc;

	if ((id < w->made_from && !by_name) || id > last)
		return 0;
	/* its name, time, mode are no values; nor, by name, the label its
	 * path gives it */
	for (unsigned f = 0; f < fs->nfields; f++)
		if (!zr_names_own(&fs->names, f) && !(by_name && (int)f == fs->names.label) &&
		    (rc = zr_present(w->ds, f, id)) != 0)
			return rc < 0 ? rc : 0;
	if ((rc = zr_delete(w->ds, id)) < 0) {
		if (zrfs_log_admit())
			fuse_log(FUSE_LOG_ERR, "zrfs: %s: record %llu: cannot remove: %s\n",
				 fs->dataset, (unsigned long long)id, zr_errmsg(w->ds));
		return rc;
	}
	pthread_mutex_lock(&w->names_lock);
	zrfs_nodes_retarget(w, ZR_FIELDS_MAX, id, NO_ID);
	if (id != last)
		zrfs_nodes_retarget(w, ZR_FIELDS_MAX, last, id);
	pthread_mutex_unlock(&w->names_lock);
	/* said where ids are the files' names; in tree/ no name changes (a
	 * line per file of an rm -rf of a million) */
	if (id != last && !by_name)
		fuse_log(FUSE_LOG_INFO, "zrfs: %s: record %llu is now record %llu (record %llu, "
			 "made through the mount, had no value left)\n", fs->dataset,
			 (unsigned long long)last, (unsigned long long)id, (unsigned long long)id);
	return 0;
}

/* Removals by record id, the highest first (a record removed takes the
 * last one's id: the ones above are done by then). */
static int gone_cmp(const void *a, const void *b)
{
	const struct wgone *x = *(struct wgone *const *)a, *y = *(struct wgone *const *)b;

	return x->id < y->id ? 1 : x->id > y->id ? -1 : 0;
}

/* (w->lock held) Make the removals waiting in the writer, if not made
 * yet: each file's value goes, then each record left without a value
 * that remove_if_empty() removes. Their entries stay until the commit is
 * shown (lookups see the view they name). 0 or a negative code (logged,
 * the rest made: the commit carries what was). */
static int apply_removals(struct zrfs *fs)
{
	struct zrfs_writes *w = fs->writes;
	struct wgone **all;
	size_t n;
	int rc = 0, first = 0;

	if (!atomic_load(&w->ngone) || w->gone_applied)
		return 0;
	pthread_mutex_lock(&w->names_lock);
	if ((all = zrfs_gone_all(w, &n)) != NULL)
		for (size_t i = 0; i < n; i++) /* what is open on it writes to no file */
			zrfs_nodes_detach_record(w, all[i]->field, all[i]->id);
	pthread_mutex_unlock(&w->names_lock);
	if (!all)
		return -ENOMEM;
	w->gone_applied = true;
	qsort(all, n, sizeof *all, gone_cmp);
	for (size_t i = 0; i < n; i++)
		if (all[i]->id < zr_length(w->ds) &&
		    zr_present(w->ds, all[i]->field, all[i]->id) == 1 &&
		    (rc = set_value(fs, all[i]->field, all[i]->id, (zr_value){NULL, 0}, NULL)) < 0 &&
		    !first)
			first = rc;
	for (size_t i = 0; i < n; i++) {
		bool by_name = all[i]->by_name;
		while (i + 1 < n && all[i + 1]->id == all[i]->id)
			by_name |= all[++i]->by_name;
		if ((rc = remove_if_empty(fs, all[i]->id, by_name)) < 0 && !first)
			first = rc;
	}
	free(all);
	return first;
}

int64_t zrfs_publish_removals(struct zrfs *fs)
{
	return atomic_load(&fs->writes->ngone) ? commit(fs) : 0;
}

int64_t zrfs_lock_settled(struct zrfs *fs)
{
	pthread_mutex_lock(&fs->writes->lock);
	return zrfs_publish_removals(fs);
}

int64_t zrfs_publish_remove(struct zrfs *fs, unsigned field, uint64_t id, bool by_name)
{
	struct zrfs_writes *w = fs->writes;
	int rc;

	/* a descriptor open on the value writes to a file no name has now */
	pthread_mutex_lock(&w->names_lock);
	zrfs_nodes_detach_record(w, field, id);
	pthread_mutex_unlock(&w->names_lock);
	if ((rc = set_value(fs, field, id, (zr_value){NULL, 0}, NULL)) < 0 ||
	    (rc = remove_if_empty(fs, id, by_name)) < 0)
		return rc;
	return commit(fs);
}

int64_t zrfs_publish_replaced(struct zrfs *fs, unsigned field, uint64_t id, bool by_name)
{
	struct zrfs_writes *w = fs->writes;

	if (id >= zr_length(w->ds) || zr_present(w->ds, field, id) != 1)
		return 0; /* it had no value: a name filled in, not replaced */
	return zrfs_publish_remove(fs, field, id, by_name);
}

int64_t zrfs_publish_move(struct zrfs *fs, unsigned field, uint64_t from, uint64_t to,
			  const char *name, bool by_name)
{
	struct zrfs_writes *w = fs->writes;
	unsigned version;
	int rc;

	if (from == to)
		return 0;
	/* onto a name no record has: a new record takes the value, named so;
	 * the value keeps its time, as mv keeps a file's */
	int64_t ns, atime;
	uint32_t mode;
	bool timed = zr_name_mtime(w->ds, &fs->names, from, field, &ns) == 1;
	bool atimed = zr_name_atime(w->ds, &fs->names, from, field, &atime) == 1;
	bool moded = zr_name_mode(w->ds, &fs->names, from, field, &mode) == 1;
	if (to == zr_length(w->ds) && (rc = set_value(fs, field, to, (zr_value){NULL, 0}, name)) < 0)
		return rc;
	if ((timed && (rc = set_time(fs, fs->names.mtime, field, to, ns)) < 0) ||
	    (atimed && (rc = set_time(fs, fs->names.atime, field, to, atime)) < 0) ||
	    (moded && (rc = set_mode(fs, field, to, mode)) < 0) ||
	    (rc = set_changed(fs, field, to, zrfs_now_ns())) < 0)
		return rc;
	zrfs_nodes_keep(fs, field, to);
	if ((rc = zr_move(w->ds, field, from, to)) < 0) {
		if (zrfs_log_admit())
			fuse_log(FUSE_LOG_ERR, "zrfs: %s: %s/%llu: cannot move to %llu: %s\n",
				 fs->dataset, fs->fields[field].name, (unsigned long long)from,
				 (unsigned long long)to, zr_errmsg(w->ds));
		return rc;
	}
	/* the kernel moves the source's inode to the new name: what is open
	 * or written through it goes to the record it is now; the target's
	 * old inode has no name */
	zrfs_names_begin(fs);
	version = zrfs_rec_version(fs, field, from);
	zrfs_names_end(fs);
	pthread_mutex_lock(&w->names_lock);
	zrfs_nodes_detach_record(w, field, to);
	zrfs_nodes_retarget(w, field, from, to);
	zrfs_winode_moved(w, zrfs_rec_ino(field, from, version), field, to, &zrfs_writing);
	pthread_mutex_unlock(&w->names_lock);
	if ((rc = remove_if_empty(fs, from, by_name)) < 0)
		return rc;
	return commit(fs);
}

int64_t zrfs_publish_name(struct zrfs *fs, unsigned field, uint64_t id, const char *name)
{
	int rc;

	if (fs->names.field < 0 || (unsigned)fs->names.field == field)
		return 0; /* the dataset keeps no names: the mount's alias is all */
	rc = set_value(fs, (unsigned)fs->names.field, id, name_value(fs, field, name), NULL);
	if (rc == 0) /* renamed: a change */
		rc = set_changed(fs, field, id, zrfs_now_ns());
	return rc < 0 ? rc : commit(fs);
}

int64_t zrfs_publish_rename(struct zrfs *fs, uint64_t id, const char *name, uint64_t gone)
{
	struct zrfs_writes *w = fs->writes;
	int rc = set_value(fs, (unsigned)fs->names.field, id, (zr_value){name, strlen(name)}, NULL);

	if (rc == 0 && fs->names.files >= 0) /* renamed: a change */
		rc = set_changed(fs, (unsigned)fs->names.files, id, zrfs_now_ns());
	if (rc == 0) /* into another class directory: that class */
		rc = set_label(fs, id, name);
	for (unsigned f = 0; rc == 0 && gone != NO_ID && f < fs->nfields; f++) {
		pthread_mutex_lock(&w->names_lock);
		zrfs_nodes_detach_record(w, f, gone); /* its descriptors write nowhere */
		pthread_mutex_unlock(&w->names_lock);
		if (zr_present(w->ds, f, gone) == 1)
			rc = set_value(fs, f, gone, (zr_value){NULL, 0}, NULL);
	}
	if (rc == 0 && gone != NO_ID)
		rc = remove_if_empty(fs, gone, true);
	return rc < 0 ? rc : commit(fs);
}

int64_t zrfs_publish_moved(struct zrfs *fs, const uint64_t *ids, size_t n, const char *from,
			   const char *to)
{
	struct zrfs_writes *w = fs->writes;
	size_t flen = strlen(from), tlen = strlen(to);
	char *old = malloc(ZRFS_PATH_MAX), *name = malloc(ZRFS_PATH_MAX);
	int64_t rc = old && name ? 0 : -ENOMEM;

	for (size_t i = 0; rc == 0 && i < n; i++) {
		int64_t got = zr_record_load(w->ds, (unsigned)fs->names.field, ids[i], old,
					     ZRFS_PATH_MAX);
		if (got < 0) {
			if (zrfs_log_admit())
				fuse_log(FUSE_LOG_ERR, "zrfs: %s: the name of record %llu: %s\n",
					 fs->dataset, (unsigned long long)ids[i], zr_errmsg(w->ds));
			rc = got;
			break;
		}
		/* below @from: "FROM/..." */
		if ((size_t)got <= flen || memcmp(old, from, flen) != 0 || old[flen] != '/')
			continue;
		if (tlen + ((size_t)got - flen) >= ZRFS_PATH_MAX) {
			rc = -ENAMETOOLONG;
			break;
		}
		memcpy(name, to, tlen);
		memcpy(name + tlen, old + flen, (size_t)got - flen);
		name[tlen + (size_t)got - flen] = 0;
		rc = set_value(fs, (unsigned)fs->names.field, ids[i],
			       (zr_value){name, strlen(name)}, NULL);
		if (rc == 0) /* into another class directory: that class */
			rc = set_label(fs, ids[i], name);
	}
	free(old);
	free(name);
	return rc < 0 ? rc : commit(fs);
}

/* ---- records ---- */

int64_t zrfs_publish_record(struct zrfs *fs, struct wnode *n)
{
	char what[32];
	zr_value v;
	void *map;
	int64_t rc;

	if (n->error)
		return n->error;
	assert(n->loaded); /* a change loaded it first (handles.c) */
	snprintf(what, sizeof what, "%llu", (unsigned long long)n->id);
	if ((rc = check_shape(fs, n->field, what, atomic_load(&n->val.size))) < 0 ||
	    (rc = zrfs_value_bytes(&n->val, &v, &map)) < 0)
		return rc;
	rc = set_value(fs, n->field, n->id, v, NULL);
	zrfs_value_unmap(map, v.len);
	if (rc == 0)
		rc = set_node_times(fs, n, n->id);
	if (rc == 0 && (rc = commit(fs)) > 0) {
		n->changed = false;
		zrfs_node_writers_clear(n);
		n->cutter = n->shaper = 0;
	}
	return rc;
}

/* ---- drafts ---- */

static void make_ready(struct zrfs *fs, struct wnode *d, bool now)
{
	struct zrfs_writes *w = fs->writes;

	if (d->ready || d->detached || !d->listed || d->kind != WN_DRAFT ||
	    zrfs_node_hidden(fs->writes, d))
		return;
	if (!now && d->tree && zrfs_name_hidden(d->name)) { /* a temporary file, likely */
		if (!d->late && w->nlate++ == 0) {
			w->late_since_ms = zrfs_now_ms();
			pthread_cond_signal(&w->wake);
		}
		d->late = true;
		return;
	}
	if (d->late) {
		d->late = false;
		w->nlate--;
	}
	d->ready = true;
	if (w->nready++ == 0 && !atomic_load(&w->ngone))
		w->ready_since_ms = zrfs_now_ms();
	d->ready_size = atomic_load(&d->val.size);
	w->ready_bytes += d->ready_size;
	/* the first starts the clock; a full group is committed at once */
	if (w->nready == 1 || zrfs_group_full(w))
		pthread_cond_signal(&w->wake);
}

void zrfs_publish_ready(struct zrfs *fs, struct wnode *d)
{
	make_ready(fs, d, false);
}

void zrfs_publish_late(struct zrfs *fs)
{
	struct zrfs_writes *w = fs->writes;

	for (struct wnode *d = w->first; d; d = d->next)
		if (d->late) {
			d->late = false;
			make_ready(fs, d, true);
		}
	w->nlate = 0; /* and any that left the list without saying */
}

int64_t zrfs_publish_all(struct zrfs *fs)
{
	struct zrfs_writes *w = fs->writes;

	pthread_mutex_lock(&w->names_lock);
	zrfs_publish_late(fs);
	pthread_mutex_unlock(&w->names_lock);
	atomic_store(&w->tree_now, true); /* a sync, the unmount: tree/'s too */
	return zrfs_publish_group(fs, NULL);
}

void zrfs_publish_unready(struct zrfs_writes *w, struct wnode *d)
{
	if (d->late) {
		d->late = false;
		w->nlate--;
	}
	if (!d->ready)
		return;
	d->ready = false;
	w->nready--;
	w->ready_bytes -= d->ready_size;
}

/* Log where draft @d, at @path, went, if not under its own name (in
 * tree/ a record is known by its name: nothing to say). */
static void say_placed(struct zrfs *fs, const struct wnode *d, const char *path, uint64_t id)
{
	const char *field = fs->fields[d->field].name;
	char to[ZRFS_NAME_MAX + 1], esc[ZRFS_LOG_NAME_MAX * 4];

	/* a draft that is not "ID.ext" names its record (the tree, which
	 * knows names, is not asked under a node's lock) */
	if (fs->names.field >= 0 && !own_name(fs, d->field, id, path))
		zrfs_record_name_for(fs, d->field, id, path, strlen(path), to, sizeof to);
	else
		zrfs_record_name_for(fs, d->field, id, NULL, 0, to, sizeof to);
	if (!d->tree && strcmp(to, path) != 0)
		fuse_log(FUSE_LOG_INFO, "zrfs: %s: %s/%s is now %s/%s\n", fs->dataset, field,
			 zrfs_log_name(path, esc, sizeof esc), field, to);
}

/* The stored bytes of a class written as decimal text (blanks around it
 * allowed, as zr import tar reads .cls members), into @out: 0, or -EINVAL
 * (logged: not stored). */
static int parse_class(struct zrfs *fs, const char *path, const zr_value *v, int64_t *out)
{
	char text[VALUE_TEXT_MAX + 1], *end, esc[ZRFS_LOG_NAME_MAX * 4];
	size_t len = v->len < VALUE_TEXT_MAX ? v->len : VALUE_TEXT_MAX;
	long long x;

	memcpy(text, v->data, len);
	text[len] = 0;
	errno = 0;
	x = strtoll(text, &end, 10);
	while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')
		end++;
	if (len == 0 || end == text || *end || errno) {
		if (zrfs_log_admit())
			fuse_log(FUSE_LOG_ERR,
				 "zrfs: %s: %s/%s: not a class (decimal text): not stored\n",
				 fs->dataset, ZRFS_TREE_NAME, zrfs_log_name(path, esc, sizeof esc));
		return -EINVAL;
	}
	*out = x;
	return 0;
}

/* The bytes of draft @d as record @id (@n the length: a new one, named
 * @path), not committed (store_draft). */
static int store_value(struct zrfs *fs, struct wnode *d, uint64_t id, uint64_t n, const char *path)
{
	int64_t cls;
	zr_value v;
	void *map;
	int rc;

	if ((rc = zrfs_value_bytes(&d->val, &v, &map)) < 0)
		return rc;
	if (d->text && (rc = parse_class(fs, path, &v, &cls)) == 0) {
		zrfs_value_unmap(map, v.len);
		map = NULL;
		v = (zr_value){&cls, sizeof cls};
	}
	if (rc == 0)
		rc = check_shape(fs, d->field, path, v.len);
	/* a new record is named by the file's path, but in a field directory
	 * a file under the record's own name ("ID.ext") gives it none */
	if (rc == 0)
		rc = set_value(fs, d->field, id, v,
			       d->stored == NO_ID && id == n &&
					       (d->tree || !own_name(fs, d->field, id, path))
				       ? path
				       : NULL);
	zrfs_value_unmap(map, v.len);
	/* a new file of tree/ in a class directory: labelled as imported */
	if (rc == 0 && d->stored == NO_ID && id == n && d->tree)
		rc = set_label(fs, id, path);
	if (rc == 0)
		rc = set_node_times(fs, d, id);
	if (rc == 0 && d->mode_set)
		rc = set_mode(fs, d->field, id, d->mode);
	if (rc == 0 && d->owner_set)
		rc = set_owner(fs, d->field, id, d->uid, d->gid);
	if (rc < 0)
		return rc;
	/* what changes it from now on is a record's change, published by
	 * the close of whoever makes it (a process that only punches a hole
	 * or truncates it included), as zrfs_publish_record starts afresh */
	d->changed = false;
	zrfs_node_writers_clear(d);
	d->cutter = d->shaper = 0;
	return 0;
}

/* Store draft @d (w->lock and d->lock held; checked to be a listed draft
 * that needs it): replacing or filling the record it names, or as a new
 * one; not committed. 0 or a negative code (logged). */
static int store_draft(struct zrfs *fs, struct wnode *d)
{
	struct zrfs_writes *w = fs->writes;
	uint64_t n = zr_length(w->ds), id;
	char path[ZRFS_PATH_MAX];
	int rc;

	if (d->error)
		return d->error;
	/* where it goes and under which name, decided at once: a rename or an
	 * unlink of the draft from now on waits for the writer's lock (a
	 * rename in between stored a save as a new record under its temporary
	 * name, and left the record it replaced as it was) */
	pthread_mutex_lock(&w->names_lock);
	id = d->stored != NO_ID ? d->stored : d->id != NO_ID && d->id < n ? d->id : n;
	rc = zrfs_node_path(w, d, path, sizeof path);
	d->storing = rc == 0;
	pthread_mutex_unlock(&w->names_lock);
	if (rc < 0)
		return rc;
	rc = store_value(fs, d, id, n, path);
	pthread_mutex_lock(&w->names_lock);
	d->storing = false;
	if (rc == 0 && d->stored == NO_ID)
		zrfs_draft_stored(w, d, id);
	pthread_mutex_unlock(&w->names_lock);
	if (rc == 0)
		say_placed(fs, d, path, id);
	return rc;
}

/* Records a group appended for keys (tree/ of a dataset of keys): a key's
 * other files in the same group fill the same record. */
struct group_keys {
	struct group_key {
		char *key;    /* the record's name */
		uint64_t id;
	} *v;
	size_t n;
};

/* The target of tree/ draft @d of keys, if it has none yet: the record its
 * key names, appended by this group (@keys) or in the view (w->lock held). */
static void find_key_target(struct zrfs *fs, struct wnode *d, const struct group_keys *keys)
{
	struct zrfs_writes *w = fs->writes;
	char path[ZRFS_PATH_MAX];
	unsigned field;
	size_t len;
	uint64_t id = NO_ID;

	zrfs_names_begin(fs);
	pthread_mutex_lock(&w->names_lock);
	if (d->tree && fs->names.key && d->listed && d->stored == NO_ID && d->id == NO_ID &&
	    zrfs_node_path(w, d, path, sizeof path) == 0 &&
	    zr_names_field_of(w->ds, &fs->names, path, strlen(path), &field, &len) == 0) {
		for (size_t i = 0; i < keys->n && id == NO_ID; i++)
			if (strlen(keys->v[i].key) == len && memcmp(keys->v[i].key, path, len) == 0)
				id = keys->v[i].id;
		/* the key's last part: the name without its extension */
		size_t stem = len - (strlen(path) - strlen(d->name));
		if (id == NO_ID && zrfs_tree_find(fs, d->parent, d->name, stem, &id) < 0)
			id = NO_ID;
		if (id != NO_ID && zr_present(w->ds, d->field, id) != 1)
			zrfs_draft_target(w, d, id); /* fills it in */
	}
	pthread_mutex_unlock(&w->names_lock);
	zrfs_names_end(fs);
}

/* Remember that tree/ draft @d of keys made a new record. */
static void group_key_add(struct zrfs *fs, struct wnode *d, struct group_keys *keys,
			  uint64_t n_before)
{
	struct zrfs_writes *w = fs->writes;
	char path[ZRFS_PATH_MAX];
	unsigned field;
	size_t len;
	struct group_key *k;

	if (!d->tree || !fs->names.key || d->stored != n_before)
		return;
	pthread_mutex_lock(&w->names_lock);
	if (zrfs_node_path(w, d, path, sizeof path) == 0 &&
	    zr_names_field_of(w->ds, &fs->names, path, strlen(path), &field, &len) == 0 &&
	    (k = realloc(keys->v, (keys->n + 1) * sizeof *k)) != NULL) {
		keys->v = k;
		if ((k[keys->n].key = strndup(path, len)) != NULL)
			k[keys->n++].id = d->stored;
	}
	pthread_mutex_unlock(&w->names_lock);
}

/* The drafts a group takes: every ready one, and @also; referenced. */
static struct wnode **take_group(struct zrfs_writes *w, struct wnode *also, size_t *count)
{
	struct wnode **g;
	size_t n = 0;

	pthread_mutex_lock(&w->names_lock);
	g = malloc((w->nready + 1) * sizeof *g);
	for (struct wnode *d = w->first; g && d; d = d->next)
		if ((d->ready || d == also) && n < w->nready + 1)
			g[n++] = zrfs_node_ref(d);
	pthread_mutex_unlock(&w->names_lock);
	*count = n;
	return g;
}

/* Whether @d still needs storing (under w->lock and d->lock). */
static bool needs_store(struct zrfs_writes *w, struct wnode *d, struct wnode *also)
{
	bool yes;

	pthread_mutex_lock(&w->names_lock);
	yes = d->listed && !d->detached && (d->ready || d == also) &&
	      (d->stored == NO_ID || d->changed);
	pthread_mutex_unlock(&w->names_lock);
	return yes;
}

/* The drafts @g[0..@n) stored and not settled are records from view
 * generation @gen on (under the names lock and w->names_lock). */
static void settle(struct zrfs *fs, struct wnode **g, size_t n, uint64_t gen)
{
	for (size_t i = 0; i < n; i++) {
		struct wnode *d = g[i];
		if (!d->listed || d->stored == NO_ID || d->gen)
			continue;
		d->gen = gen;
		zrfs_publish_unready(fs->writes, d);
		zrfs_draft_settle(fs, d, d->stored);
	}
}

void zrfs_write_shown(struct zrfs *fs, struct zrfs_view *old, uint64_t gen)
{
	struct zrfs_writes *w = fs->writes;

	pthread_mutex_lock(&w->names_lock);
	if (w->ncommitting && gen >= w->committing_gen)
		settle(fs, w->committing, w->ncommitting, w->committing_gen);
	zrfs_winodes_unlinked_shown(fs, old, gen);
	w->shown_gen = gen;
	pthread_mutex_unlock(&w->names_lock);
}

/* zrfs_publish_group under w->lock. */
static int64_t publish_group_held(struct zrfs *fs, struct wnode *also)
{
	struct zrfs_writes *w = fs->writes;
	struct group_keys keys = {0};
	struct wnode **g;
	size_t n;
	int64_t gen = 0;
	int rc, also_rc = 0, store_rc = 0;
	bool any = false;

	/* removals first, committed on their own: a new file under a name
	 * removed fills its record in, a key's record is found as it is after
	 * them, and an id a removal frees is another file's only in a later
	 * commit, which gives that file a number of its own (the kernel may
	 * still hold the removed file's) */
	if ((gen = zrfs_publish_removals(fs)) < 0) {
		store_rc = (int)gen;
		gen = 0;
	}
	if (!(g = take_group(w, also, &n)))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		uint64_t before = zr_length(w->ds);
		find_key_target(fs, g[i], &keys);
		pthread_mutex_lock(&g[i]->lock);
		if (needs_store(w, g[i], also) && (rc = store_draft(fs, g[i])) < 0) {
			if (g[i] == also)
				also_rc = rc; /* told to the fsync; the others are logged */
			else if (!store_rc)
				store_rc = rc;
		}
		pthread_mutex_unlock(&g[i]->lock);
		group_key_add(fs, g[i], &keys, before);
	}
	for (size_t i = 0; i < keys.n; i++)
		free(keys.v[i].key);
	free(keys.v);
	/* a failed commit's drafts stay stored: the next commit takes them */
	pthread_mutex_lock(&w->names_lock);
	for (size_t i = 0; i < n; i++)
		any |= g[i]->listed && g[i]->stored != NO_ID && !g[i]->gen;
	pthread_mutex_unlock(&w->names_lock);
	uint64_t tree = zrfs_tree_due_ms(w);
	if (any || w->gone_applied || (tree && tree <= zrfs_now_ms())) {
		/* settled as the view with the commit is made (zrfs_write_shown),
		 * else (a view read back) once it is */
		pthread_mutex_lock(&w->names_lock);
		w->committing = g;
		w->ncommitting = n;
		w->committing_gen = zr_generation(w->ds) + 1;
		pthread_mutex_unlock(&w->names_lock);
		gen = commit(fs);
		zrfs_names_begin(fs); /* settling reads the tree's names */
		pthread_mutex_lock(&w->names_lock);
		w->committing = NULL;
		w->ncommitting = 0;
		if (gen > 0)
			settle(fs, g, n, (uint64_t)gen);
		pthread_mutex_unlock(&w->names_lock);
		zrfs_names_end(fs);
	}
	for (size_t i = 0; i < n; i++)
		zrfs_node_put(g[i]);
	free(g);
	/* the committer's group: nothing stored is a failure, which it
	 * retries less and less often, not a group with nothing to commit */
	if (!also && gen == 0 && store_rc < 0)
		return store_rc;
	return also_rc < 0 ? also_rc : gen;
}

int64_t zrfs_publish_group(struct zrfs *fs, struct wnode *also)
{
	struct zrfs_writes *w = fs->writes;
	int64_t gen;

	pthread_mutex_lock(&w->lock);
	gen = publish_group_held(fs, also);
	pthread_mutex_unlock(&w->lock);
	return gen;
}
