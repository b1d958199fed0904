/*
 * write_names.c - names in the field directories of a writable mount:
 * files created, renamed and removed.
 *
 * A field directory lists "<id>[.ext]" for the records that have a value.
 * Creating a file there:
 *   - "<id>[.ext]" of a record without a value fills it in; "<N>[.ext]",
 *     N the record count, appends record N (its other fields missing);
 *   - any other name appends a record too, at the next id when the file is
 *     first stored (closed or fsync'd), and the log says where it went.
 *     Such new files are committed in groups (write_group.c: -o commit_ms,
 *     commit_size; at once by fsync): until then the file keeps
 *     its name and its private bytes; once the mount shows the commit the
 *     name goes away and the record is listed as "<id>[.ext]". So
 *     `cp -r photos/. /mnt/ds/image/` appends one record per file, without
 *     a commit (three fsyncs) per file;
 *   - a name that starts with a dot is a temporary file: it stays as it is,
 *     in the daemon only, until it is renamed onto another name (which
 *     places it as above: onto a record's name it replaces that value) or
 *     removed. That is how rsync writes (".NAME.XXXXXX", then rename), and
 *     editors' swap files never become records.
 * A file created and not yet stored is "staged": its bytes are in a private
 * file, its inode number ZRFS_INO_STAGED | n (or the record's, for a
 * record's name); after it is placed that number shows its record until
 * the kernel forgets it.
 * Renaming a record's file onto another record's name moves the value
 * (the source's goes missing); removing a record's file makes its value
 * missing; ids never move under a mount. Renames between directories are
 * EXDEV (mv then copies and removes); anything else is EPERM.
 *
 * Sections: staged files, creating, storing, finding, renaming and
 * removing. The table of staged files is write_staged.c's.
 */
#include "write_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- creating ---- */

int zrfs_write_name(struct zrfs *fs, fuse_ino_t parent, const char *name, bool next,
		    unsigned *field, uint64_t *id)
{
	uint64_t n = zr_length(fs->writes->ds);

	if (parent < ZRFS_INO_DIR || parent >= ZRFS_INO_DIR + fs->nfields)
		return -EPERM;
	*field = (unsigned)(parent - ZRFS_INO_DIR);
	return zrfs_record_name_parse(&fs->fields[*field], name, next ? n + 1 : n, id) < 0
		       ? -ENOENT
		       : 0;
}

/* A staged entry for @name in field @field, which names record @id (NO_ID:
 * none): *out, with its file made. Under the writer's lock. */
static int stage(struct zrfs *fs, unsigned field, const char *name, uint64_t id,
		 struct staged **out)
{
	struct zrfs_writes *w = fs->writes;
	struct staged *s;
	int rc;

	if (w->nstaged >= STAGED_MAX) {
		char esc[ZRFS_LOG_NAME_MAX];
		fuse_log(FUSE_LOG_ERR, "zrfs: %s: %s/%s: %d files are being written and not "
			 "stored: close some first\n", fs->dataset, fs->fields[field].name,
			 zrfs_log_name(name, esc, sizeof esc), STAGED_MAX);
		return -ENOSPC;
	}
	if (!(s = calloc(1, sizeof *s)) || !(s->name = strdup(name))) {
		free(s);
		return -ENOMEM;
	}
	if ((rc = zrfs_wfile_make(fs, field, id, true, &s->f)) < 0) {
		free(s->name);
		free(s);
		return rc;
	}
	s->field = field;
	s->id = id;
	s->hidden = name[0] == '.';
	s->ino = id == NO_ID ? ZRFS_INO_STAGED | ++w->next_staged
			     : zrfs_rec_ino(field, id, zrfs_rec_version(fs, field, id));
	s->f->staged = s;
	zrfs_staged_add(w, s);
	*out = s;
	return 0;
}

void zrfs_write_create(fuse_req_t req, struct zrfs *fs, fuse_ino_t parent, const char *name,
		       mode_t mode, struct fuse_file_info *fi)
{
	struct zrfs_writes *w = fs->writes;
	struct fuse_entry_param e;
	zr_record_stat rs = {0};
	struct staged *s = NULL;
	struct zrfs_view *v;
	struct wfile *f = NULL;
	unsigned field;
	uint64_t id;
	int rc;

	(void)mode; /* every record file has the same mode */
	if (strlen(name) > ZRFS_NAME_MAX) { /* FUSE passes up to 1024 */
		fuse_reply_err(req, ENAMETOOLONG);
		return;
	}
	pthread_mutex_lock(&w->lock);
	rc = zrfs_write_name(fs, parent, name, true, &field, &id);
	if (rc == 0 && id < zr_length(w->ds) && zr_stat(w->ds, field, id, &rs) == 0 && rs.present)
		rc = -EEXIST;
	else if (rc == -ENOENT)
		rc = zrfs_staged_by_name(w, field, name) ? -EEXIST : (id = NO_ID, 0);
	if (rc == 0 && (rc = stage(fs, field, name, id, &s)) == 0)
		f = zrfs_wfile_ref(s->f); /* the handle's */
	pthread_mutex_unlock(&w->lock);
	if (rc < 0) {
		zrfs_reply_err(req, rc);
		return;
	}
	memset(&e, 0, sizeof e);
	v = zrfs_names_begin(fs);
	e.ino = s->ino;
	zrfs_file_attr(fs, v, e.ino, 0, &e.attr);
	zrfs_names_end(fs);
	/* the name is not cached: it is the writer's until it is stored; the
	 * attributes are (the kernel keeps the size as it writes), which spares
	 * a GETATTR per file to cp and its like */
	e.entry_timeout = 0;
	e.attr_timeout = fs->opts.timeout;
	fi->fh = (uintptr_t)f;
	fi->direct_io = 1;
	if (fuse_reply_create(req, &e, fi) != 0) { /* the creator is gone */
		pthread_mutex_lock(&w->lock);
		if (s->f == f)
			zrfs_staged_drop(w, s);
		pthread_mutex_unlock(&w->lock);
		zrfs_wfile_put(f);
	}
}

/* ---- storing ---- */

/* Log where @s went: record @id (unless that is the name it had). */
static void say_placed(struct zrfs *fs, const struct staged *s, uint64_t id)
{
	const char *field = fs->fields[s->field].name;
	char to[ZRFS_NAME_MAX + 1];

	zrfs_record_name_format(&fs->fields[s->field], id, to, sizeof to);
	if (strcmp(to, s->name) != 0) {
		char esc[ZRFS_LOG_NAME_MAX];
		fuse_log(FUSE_LOG_INFO, "zrfs: %s: %s/%s is now %s/%s\n", fs->dataset, field,
			 zrfs_log_name(s->name, esc, sizeof esc), field, to);
	}
}

/* Place @s (under the writer's lock): its value becomes record @id's
 * (NO_ID: the next one's). The generation, or a negative code. */
static int64_t place(struct zrfs *fs, struct staged *s, uint64_t id)
{
	struct zrfs_writes *w = fs->writes;
	struct wfile *f = s->f;
	int64_t gen;

	if (id == NO_ID)
		id = zr_length(w->ds);
	if ((gen = zrfs_wfile_store(fs, f, id, true)) < 0)
		return gen;
	f->id = id;
	f->staged = NULL;
	s->f = NULL;
	zrfs_staged_placed(w, s);
	s->id = id;
	w->nstaged--;
	say_placed(fs, s, id);
	if (zrfs_is_rec_ino(s->ino))
		zrfs_staged_drop(w, s); /* a record's own number: nothing to remember */
	zrfs_wfile_put(f); /* the name's reference; the caller has another */
	return gen;
}

/* Append @s's value as the next record, to be committed with the next
 * group (write_group.c; under the writer's lock, @s->f's lock held): 0 or
 * a negative code. */
static int place_later(struct zrfs *fs, struct staged *s)
{
	struct zrfs_writes *w = fs->writes;
	struct wfile *f = s->f;
	uint64_t id = zr_length(w->ds);
	int rc = (int)zrfs_wfile_store(fs, f, id, false);

	if (rc < 0)
		return rc;
	f->id = id;
	f->staged = NULL; /* written again, it is that record's value */
	s->id = id;
	s->pending = true;
	s->commit_no = w->commits;
	say_placed(fs, s, id);
	zrfs_group_add(fs, f->size);
	return 0;
}

int64_t zrfs_staged_store(struct zrfs *fs, struct wfile *f)
{
	struct zrfs_writes *w = fs->writes;
	int64_t gen;

	pthread_mutex_lock(&w->lock);
	if (!f->staged) /* placed meanwhile through another handle */
		gen = zrfs_wfile_store(fs, f, f->id, true);
	else if (f->staged->hidden)
		gen = 0; /* kept until renamed */
	else if (zrfs_is_rec_ino(f->staged->ino))
		gen = place(fs, f->staged, f->staged->id); /* a record's own name */
	else
		gen = place_later(fs, f->staged);
	pthread_mutex_unlock(&w->lock);
	return gen;
}

/* ---- finding ---- */

int zrfs_write_lookup(struct zrfs *fs, fuse_ino_t parent, const char *name, fuse_ino_t *ino)
{
	struct zrfs_writes *w = fs->writes;
	struct staged *s;

	if (parent < ZRFS_INO_DIR || parent >= ZRFS_INO_DIR + fs->nfields)
		return -ENOENT;
	pthread_mutex_lock(&w->lock);
	s = zrfs_staged_by_name(w, (unsigned)(parent - ZRFS_INO_DIR), name);
	if (s)
		*ino = s->ino;
	pthread_mutex_unlock(&w->lock);
	return s ? 0 : -ENOENT;
}

int zrfs_write_node(struct zrfs *fs, fuse_ino_t ino, struct fuse_file_info *fi,
		    struct wfile **f, unsigned *field, uint64_t *id)
{
	struct zrfs_writes *w = fs->writes;
	struct staged *s;
	int rc = -ENOENT;

	*f = NULL;
	if (fi && fi->fh) {
		*f = zrfs_wfile_ref((struct wfile *)(uintptr_t)fi->fh);
		return 0;
	}
	pthread_mutex_lock(&w->lock);
	if ((s = zrfs_staged_by_ino(w, ino)) != NULL) {
		if (s->f)
			*f = zrfs_wfile_ref(s->f);
		*field = s->field;
		*id = s->id;
		rc = 0;
	}
	pthread_mutex_unlock(&w->lock);
	return rc;
}

void zrfs_write_forget(struct zrfs *fs, fuse_ino_t ino)
{
	struct zrfs_writes *w = fs->writes;
	struct staged *s;

	pthread_mutex_lock(&w->lock);
	if ((s = zrfs_staged_by_ino(w, ino)) != NULL && s->placed)
		zrfs_staged_drop(w, s);
	pthread_mutex_unlock(&w->lock);
}

/* ---- renaming and removing ---- */

/* What a name of field directory @parent stands for, under the writer's
 * lock: a staged file (*s), or record *id with a value. 0 or -ENOENT,
 * -EPERM. */
static int resolve(struct zrfs *fs, fuse_ino_t parent, const char *name, struct staged **s,
		   unsigned *field, uint64_t *id)
{
	zr_record_stat rs = {0};
	int rc = zrfs_write_name(fs, parent, name, false, field, id);

	*s = NULL;
	if (rc == -EPERM)
		return rc;
	if ((*s = zrfs_staged_by_name(fs->writes, *field, name)) != NULL) {
		if ((*s)->pending) { /* appended, its commit to come: the record */
			*id = (*s)->id;
			*s = NULL;
		}
		return 0;
	}
	if (rc == 0 && (rc = zr_stat(fs->writes->ds, *field, *id, &rs)) == 0 && !rs.present)
		rc = -ENOENT;
	return rc;
}

void zrfs_write_unlink(fuse_req_t req, struct zrfs *fs, fuse_ino_t parent, const char *name)
{
	struct zrfs_writes *w = fs->writes;
	struct staged *s;
	unsigned field;
	uint64_t id;
	int64_t rc;

	pthread_mutex_lock(&w->lock);
	rc = resolve(fs, parent, name, &s, &field, &id);
	if (rc == 0 && s)
		zrfs_staged_drop(w, s); /* never stored: nothing to commit */
	else if (rc == 0)
		rc = zrfs_change(fs, field, id, (zr_value){NULL, 0});
	pthread_mutex_unlock(&w->lock);
	if (rc < 0) {
		zrfs_reply_err(req, (int)rc);
		return;
	}
	if (rc > 0)
		zrfs_follow_publish(fs); /* the kernel holds the directory's lock: not told yet */
	fuse_reply_err(req, 0);
}

/* Rename within one field directory, under the writer's lock, with the
 * lock of @sf held if the source is a staged file (@sf its file): the
 * generation committed, 0 (nothing to commit) or a negative code. */
static int64_t rename_locked(struct zrfs *fs, fuse_ino_t parent, const char *name,
			     const char *newname, unsigned flags, struct wfile *sf)
{
	struct zrfs_writes *w = fs->writes;
	struct staged *s, *t;
	unsigned field, tfield;
	uint64_t id, tid;
	int rc = resolve(fs, parent, name, &s, &field, &id);
	bool exists;
	int64_t gen;
	struct wfile *f;

	if (rc < 0)
		return rc;
	if (s && s->f != sf)
		return -EBUSY; /* stored meanwhile through another handle: rare, retried by no one */
	if (flags & ~(unsigned)RENAME_NOREPLACE)
		return -EINVAL; /* RENAME_EXCHANGE, RENAME_WHITEOUT */
	if (zrfs_write_name(fs, parent, newname, true, &tfield, &tid) == -ENOENT)
		tid = NO_ID; /* not a record's name */
	t = zrfs_staged_by_name(w, field, newname);
	exists = t || (tid != NO_ID && resolve(fs, parent, newname, &t, &tfield, &tid) == 0);
	if (exists && (flags & RENAME_NOREPLACE))
		return -EEXIST;
	if (s && t == s)
		return 0;
	if (t)
		zrfs_staged_drop(w, t); /* a staged file replaced */
	if (s && newname[0] == '.') { /* still temporary */
		char *n = strdup(newname);
		if (!n)
			return -ENOMEM;
		zrfs_staged_rename(w, s, n);
		s->hidden = true;
		return 0;
	}
	if (s) /* the file takes its place: a record's, or the next one */
		return place(fs, s, tid);
	/* a record's value moves onto another record's name */
	if (tid == NO_ID)
		return -EPERM;
	if ((rc = zrfs_wfile_make(fs, field, id, false, &f)) < 0)
		return rc;
	pthread_mutex_lock(&f->lock);
	gen = zrfs_wfile_store(fs, f, tid, true);
	pthread_mutex_unlock(&f->lock);
	zrfs_wfile_put(f);
	if (gen >= 0 && tid != id)
		gen = zrfs_change(fs, field, id, (zr_value){NULL, 0});
	return gen;
}

void zrfs_write_rename(fuse_req_t req, struct zrfs *fs, fuse_ino_t parent, const char *name,
		       fuse_ino_t newparent, const char *newname, unsigned flags)
{
	struct zrfs_writes *w = fs->writes;
	bool fields = parent >= ZRFS_INO_DIR && parent < ZRFS_INO_DIR + fs->nfields &&
		      newparent >= ZRFS_INO_DIR && newparent < ZRFS_INO_DIR + fs->nfields;
	struct wfile *sf = NULL;
	struct staged *s;
	int64_t rc;

	if (!fields || parent != newparent) {
		/* between field directories: mv copies and removes instead */
		fuse_reply_err(req, fields ? EXDEV : EPERM);
		return;
	}
	if (strlen(newname) > ZRFS_NAME_MAX) {
		fuse_reply_err(req, ENAMETOOLONG);
		return;
	}
	/* a staged source's file is locked first: the order store() takes */
	pthread_mutex_lock(&w->lock);
	if ((s = zrfs_staged_by_name(w, (unsigned)(parent - ZRFS_INO_DIR), name)) != NULL)
		sf = zrfs_wfile_ref(s->f);
	pthread_mutex_unlock(&w->lock);
	if (sf)
		pthread_mutex_lock(&sf->lock);
	pthread_mutex_lock(&w->lock);
	rc = rename_locked(fs, parent, name, newname, flags, sf);
	pthread_mutex_unlock(&w->lock);
	if (sf) {
		pthread_mutex_unlock(&sf->lock);
		zrfs_wfile_put(sf);
	}
	if (rc < 0) {
		zrfs_reply_err(req, (int)rc);
		return;
	}
	if (rc > 0)
		zrfs_follow_publish(fs); /* the kernel holds the directory's lock */
	fuse_reply_err(req, 0);
}
