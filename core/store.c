/*
 * store.c - the dataset handle: create, open, close, and questions about it.
 *
 * Open reads meta.json, opens every table and validates its size against
 * meta.json; chunk files are opened on first use (chunk.c). A reader first
 * registers the generation it reads (readers.c) and checks at the end that
 * no commit landed meanwhile, or starts over (FORMAT.md, "Readers and
 * writers"). A writer takes flock(LOCK_EX) on the dataset directory itself,
 * so no lock file is needed, and on open removes chunk files that no commit
 * references (left by a crash), and those a rebalance replaced once no
 * reader holds a state that has them. Close discards uncommitted changes
 * and trims the files to the committed data.
 *
 * Questions about an open handle are info.c's.
 *
 * Sections: create, open, close.
 */
#include "store_i.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int table_name(char *buf, size_t cap, const char *field)
{
	return snprintf(buf, cap, "%s.offset", field);
}

/* ---- create ---- */

/* Empty but perhaps for the lock of an import that creates it. */
static int dir_is_empty(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int empty = 1;

	if (!d)
		return -errno;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
		    strcmp(de->d_name, ZR_IMPORT_LOCK) != 0)
			empty = 0;
	closedir(d);
	return empty;
}

int zr_create(const char *dir, const zr_field_spec *fields, unsigned nfields,
	      const zr_create_opts *opts)
{
	zr_meta m = {0};
	int dirfd = -1, rc = 0;

	RETURN_IF(opts && opts->version > ZR_FORMAT_VERSION, ZR_EVERSION,
		  "%s: format version %u, this library writes versions 1 to %d", dir,
		  opts->version, ZR_FORMAT_VERSION);
	RETURN_IF(nfields == 0 || nfields > ZR_FIELDS_MAX, ZR_EINVAL_SPEC,
		  "%s: a dataset has 1..%d fields, not %u", dir, ZR_FIELDS_MAX, nfields);
	for (unsigned i = 0; i < nfields; i++) {
		FORWARD_IF_ERR(zr_field_check(&fields[i]));
		for (unsigned j = 0; j < i; j++)
			RETURN_IF(strcmp(fields[i].name, fields[j].name) == 0, ZR_EINVAL_SPEC,
				  "field '%s' is given twice", fields[i].name);
	}
	if (opts && opts->attrs) { /* checked before anything is created */
		json_error_t jerr;
		json_t *a = json_loads(opts->attrs, JSON_REJECT_DUPLICATES, &jerr);
		bool ok = json_is_object(a);
		json_decref(a);
		RETURN_IF(!ok, ZR_EINVAL_SPEC, "attrs: not a JSON object (%s)",
			  a ? "another JSON value" : jerr.text);
	}
	if (mkdir(dir, 0755) < 0) {
		RETURN_IF(errno != EEXIST, -errno, "%s: cannot create: %s", dir, strerror(errno));
		rc = dir_is_empty(dir);
		RETURN_IF(rc < 0, rc, "%s: %s", dir, strerror(-rc));
		RETURN_IF(rc == 0, -EEXIST, "%s: exists and is not empty", dir);
	}
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	RETURN_IF(dirfd < 0, -errno, "%s: %s", dir, strerror(errno));
	if (mkdirat(dirfd, "chunk", 0755) < 0 && errno != EEXIST) {
		rc = zr_err(-errno, "%s/chunk: cannot create: %s", dir, strerror(errno));
		goto out;
	}
	for (unsigned i = 0; i < nfields; i++) {
		char name[ZR_NAME_MAX + 16];
		int fd;
		table_name(name, sizeof name, fields[i].name);
		fd = zr_create_fresh(dirfd, name, O_WRONLY);
		if (fd < 0) {
			rc = zr_err(-errno, "%s/%s: cannot create: %s", dir, name, strerror(errno));
			goto out;
		}
		close(fd);
	}
	{
		/* readers register in it from the first open on (readers.c) */
		int fd = zr_sys.openat(dirfd, "readers", O_WRONLY | O_CREAT, 0644);
		if (fd < 0) {
			rc = zr_err(-errno, "%s/readers: cannot create: %s", dir, strerror(errno));
			goto out;
		}
		close(fd);
	}
	m.version = opts && opts->version ? opts->version : ZR_FORMAT_VERSION;
	m.created = m.modified = (int64_t)time(NULL);
	m.chunk_size = opts && opts->chunk_size ? opts->chunk_size : ZR_CHUNK_SIZE_DEFAULT;

	m.nfields = nfields;
	m.fields = calloc(nfields, sizeof *m.fields);
	if (!m.fields) {
		rc = zr_err(-ENOMEM, "out of memory");
		goto out;
	}
	for (unsigned i = 0; i < nfields; i++) {
		zr_fielddef *d = &m.fields[i];
		d->spec = fields[i];
		snprintf(d->name, sizeof d->name, "%s", fields[i].name);
		d->spec.name = d->name;
		if (fields[i].ext) {
			snprintf(d->ext, sizeof d->ext, "%s", fields[i].ext);
			d->spec.ext = d->ext;
		}
	}
	if (opts && opts->attrs)
		m.attrs = json_loads(opts->attrs, JSON_REJECT_DUPLICATES, NULL);
	rc = zr_meta_write(dirfd, dir, &m); /* the dataset exists from here on */
out:
	free(m.fields);
	json_decref(m.attrs);
	if (dirfd >= 0)
		close(dirfd);
	return rc;
}

/* ---- open ---- */

static int open_fields(zr_dataset *ds, const zr_meta *m, bool new_tables)
{
	ds->nfields = m->nfields;
	ds->fields = calloc(m->nfields, sizeof *ds->fields);
	ds->specs = calloc(m->nfields, sizeof *ds->specs);
	RETURN_IF(!ds->fields || !ds->specs, -ENOMEM, "out of memory");
	for (unsigned i = 0; i < m->nfields; i++)
		ds->fields[i].fd = -1;
	for (unsigned i = 0; i < m->nfields; i++) {
		zr_fstate *f = &ds->fields[i];
		char name[ZR_NAME_MAX + 16];
		f->def = m->fields[i];
		f->def.spec.name = f->def.name;
		f->def.spec.ext = f->def.ext[0] ? f->def.ext : NULL;
		ds->specs[i] = f->def.spec;
		f->record_size = zr_spec_record_size(&f->def.spec);
		/* raw records start at a multiple of their element size, so that a
		 * zero-copy pointer can be read as the field's dtype */
		f->align = f->def.spec.compress == ZR_RAW ? zr_dtype_size(f->def.spec.dtype) : 1;
		/* a reader of a rebalance being switched uses the new tables wherever
		 * they have not been renamed into place yet */
		if (new_tables) {
			snprintf(name, sizeof name, "%s.offset.new", f->def.name);
			int rc = zr_table_open(ds, f, name, false);
			/* a table that opened and then failed is an error; one
			 * that is gone was renamed into place since the manifest
			 * was read, so <field>.offset is it */
			if (rc == 0)
				continue;
			if (f->fd >= 0)
				return rc;
		}
		table_name(name, sizeof name, f->def.name);
		FORWARD_IF_ERR(zr_table_open(ds, f, name, false));
	}
	return 0;
}

/*
 * A rebalance that reached its commit point but not its end: a writer
 * finishes it; a reader takes the manifest as meta.json. Without one, a
 * writer removes new tables of a rebalance that did not commit.
 */
static int pending_rebalance(zr_dataset *ds, zr_meta *m, bool *new_tables)
{
	zr_meta pm;
	int rc = zr_manifest_pending(ds->dirfd, ds->path, m->generation, &pm);

	if (rc < 0)
		return rc;
	if (rc == 1) {
		if (ds->flags & ZR_RDWR)
			rc = zr_manifest_finish(ds->dirfd, ds->chunkdirfd, ds->path, &pm);
		else
			*new_tables = true;
		zr_meta_free(m);
		*m = pm;
		return rc < 0 ? rc : 0;
	}
	for (unsigned i = 0; (ds->flags & ZR_RDWR) && i < m->nfields; i++) {
		char name[ZR_NAME_MAX + 16];
		snprintf(name, sizeof name, "%s.offset.new", m->fields[i].name);
		zr_sys.unlinkat(ds->dirfd, name, 0);
	}
	return 0;
}

/* How long zr_open(ZR_WAIT) waits for a writer that is ending, in seconds. */
enum { ZR_WAIT_S = 60 };

/* Whether mount @id on @path, served by process @pid, is gone: @pid has
 * exited or is exiting (its namespaces are gone: its lock goes next, if it
 * has not yet), or it sees the mounts this process sees (one mount
 * namespace) and @path is another mount now, or nothing. A mount still
 * there is not asked (no request to its filesystem: cached attributes). */
static bool mount_gone(long pid, const char *path, uint64_t id)
{
	char link[64], mine[64], theirs[64];
	struct statx sx;
	ssize_t a, b;

	snprintf(link, sizeof link, "/proc/%ld/ns/mnt", pid);
	a = readlink("/proc/self/ns/mnt", mine, sizeof mine);
	b = readlink(link, theirs, sizeof theirs);
	if (a > 0 && b < 0 && errno == ENOENT)
		return true;
	if (a <= 0 || a != b || memcmp(mine, theirs, (size_t)a) != 0)
		return false;
	if (statx(AT_FDCWD, path, AT_STATX_DONT_SYNC | AT_NO_AUTOMOUNT, STATX_MNT_ID, &sx) < 0)
		return errno == ENOENT || errno == ENOTDIR;
	return (sx.stx_mask & STATX_MNT_ID) && sx.stx_mnt_id != id;
}

/* DATASET/writer says who holds the writer lock, for the message a second
 * writer gets: written by each writer once it holds the lock (a writer that
 * dies keeps no lock, and the next one overwrites the file). A second line,
 * "mount ID PATH", where the writer serves a mount (zr_holder_mount). */
static void writer_write(zr_dataset *ds)
{
	char line[PATH_MAX + 600], comm[64] = "?", host[128] = "?";
	const char *what = ds->holder;
	time_t now = time(NULL);
	struct tm tm;
	int fd = zr_create_fresh(ds->dirfd, "writer", O_WRONLY);
	FILE *f = fopen("/proc/self/comm", "r");

	if (f) {
		if (fgets(comm, sizeof comm, f))
			comm[strcspn(comm, "\n")] = 0;
		fclose(f);
	}
	gethostname(host, sizeof host - 1);
	gmtime_r(&now, &tm);
	int n = snprintf(line, sizeof line,
			 "pid %ld (%s) on %s, since %04d-%02d-%02d %02d:%02d:%02d UTC%s%.256s\n",
			 (long)getpid(), comm, host, tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
			 tm.tm_hour, tm.tm_min, tm.tm_sec, what ? ", " : "", what ? what : "");
	if (n > 0 && (size_t)n < sizeof line && ds->holder_mount)
		n += snprintf(line + n, sizeof line - (size_t)n, "mount %" PRIu64 " %s\n",
			      ds->holder_mount_id, ds->holder_mount);
	if (fd >= 0) {
		if (n > 0 && (size_t)n < sizeof line)
			zr_write_full(fd, line, (size_t)n, 0); /* best effort: only a message */
		close(fd);
	}
}

void zr_progress_set(zr_dataset *ds, zr_progress_cb cb, void *ctx)
{
	ds->progress = cb;
	ds->progress_ctx = ctx;
}

/* *@slot takes a copy of @s (NULL: none): 0 or -ENOMEM. */
static int replace_text(char **slot, const char *s)
{
	char *copy = s ? strdup(s) : NULL;

	RETURN_IF(s && !copy, -ENOMEM, "out of memory");
	free(*slot);
	*slot = copy;
	return 0;
}

int zr_holder_set(zr_dataset *ds, const char *what)
{
	if (!(ds->flags & ZR_RDWR))
		return zr_err(-EROFS, "%s: not open for writing", ds->path);
	if (what && strchr(what, '\n'))
		return zr_err(-EINVAL, "the holder's description is one line");
	FORWARD_IF_ERR(replace_text(&ds->holder, what));
	writer_write(ds);
	return 0;
}

int zr_holder_mount(zr_dataset *ds, const char *mountpoint, uint64_t mount_id)
{
	if (!(ds->flags & ZR_RDWR))
		return zr_err(-EROFS, "%s: not open for writing", ds->path);
	if (mountpoint && (mountpoint[0] != '/' || strchr(mountpoint, '\n') ||
			   strlen(mountpoint) >= PATH_MAX))
		return zr_err(-EINVAL, "a mount point is an absolute path of one line");
	FORWARD_IF_ERR(replace_text(&ds->holder_mount, mountpoint));
	ds->holder_mount_id = mount_id;
	writer_write(ds);
	return 0;
}

/* DATASET/writer, in @buf: its first line (who), returned; its second's
 * mount, if it has one, in *@mount (pointing into @buf) and *@id. */
static const char *writer_read(int dirfd, char *buf, size_t cap, const char **mount, uint64_t *id)
{
	int fd = zr_sys.openat(dirfd, "writer", O_RDONLY | O_NONBLOCK, 0);
	ssize_t n = fd >= 0 ? read(fd, buf, cap - 1) : -1;
	int at = 0;

	if (fd >= 0)
		close(fd);
	*mount = NULL;
	if (n <= 0)
		return "it does not say who";
	buf[n] = 0;
	char *second = buf + strcspn(buf, "\n");
	if (*second) {
		*second++ = 0;
		second[strcspn(second, "\n")] = 0;
		if (sscanf(second, "mount %" SCNu64 " %n", id, &at) == 1 && at > 0 &&
		    second[at] == '/')
			*mount = second + at;
	}
	return buf;
}

/* The pid DATASET/writer of @dir names when it names this host, or 0;
 * whether the mount it serves, if it says so, is gone (*@gone). */
static long holder_here(const char *dir, bool *gone)
{
	char buf[PATH_MAX + 600], host[128] = "";
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	const char *who, *on, *mount;
	uint64_t id = 0;
	long pid = 0;

	*gone = false;
	if (fd < 0)
		return 0;
	who = writer_read(fd, buf, sizeof buf, &mount, &id);
	close(fd);
	/* "pid N (COMM) on HOST, since ...": COMM may hold anything, HOST no
	 * space or comma */
	on = strstr(who, ") on ");
	if (sscanf(who, "pid %ld (", &pid) != 1 || pid <= 0 || !on ||
	    gethostname(host, sizeof host - 1) < 0)
		return 0;
	on += 5;
	size_t n = strcspn(on, ", ");
	if (n != strlen(host) || strncmp(on, host, n) != 0)
		return 0;
	*gone = mount && mount_gone(pid, mount, id);
	return pid;
}

/* Who holds the writer lock of @dir, for a message: DATASET/writer's first
 * line, and that it is ending where the mount it serves is gone. */
static const char *writer_who(const char *dir, int dirfd, char *buf, size_t cap)
{
	uint64_t id;
	const char *mount, *who = writer_read(dirfd, buf, cap, &mount, &id);
	bool gone;

	if (who == buf && holder_here(dir, &gone) && gone) {
		size_t n = strlen(buf);
		snprintf(buf + n, cap - n, "; its mount is gone: it lets go of the dataset once "
					   "it has stored what it was given");
	}
	return who;
}

long zr_holder_pid(const char *dir)
{
	bool gone;

	return holder_here(dir, &gone);
}

long zr_holder_ending(const char *dir)
{
	bool gone;
	long pid = holder_here(dir, &gone);

	return gone ? pid : 0;
}

int zr_holder_wait(long pid, unsigned ms)
{
	int fd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
	struct pollfd exited = {.fd = fd, .events = POLLIN};
	int rc;

	if (fd < 0 && errno == ESRCH)
		return 1; /* gone */
	rc = poll(fd >= 0 ? &exited : NULL, fd >= 0, (int)ms); /* no pidfd: a pause */
	if (fd < 0)
		return 0;
	close(fd);
	return rc > 0;
}

/* A reader's check, once everything is open: whether the committed state is
 * still the one it opened (meta.json's generation, or a rebalance's manifest
 * it took). If a commit came in between, files it opened may belong to the
 * next state: it starts over. */
static bool still_current(zr_dataset *ds)
{
	zr_meta m = {0}, pm = {0};
	int pending;
	bool same;

	if (zr_meta_read(ds->dirfd, ds->path, "meta.json", &m) < 0)
		return false;
	pending = zr_manifest_pending(ds->dirfd, ds->path, m.generation, &pm);
	same = pending == 1 ? pm.generation == ds->generation
			    : pending == 0 && m.generation == ds->generation;
	zr_meta_free(&m);
	zr_meta_free(&pm);
	return same;
}

/* @rc of reading meta.json, unless it is missing from a directory that has
 * chunk/ on a filesystem shared with other machines: a commit's rename
 * replaced it while this client looked it up (GlusterFS answers ENOENT
 * until its cache of names catches up), which zr_open waits for (-ESTALE).
 * If the wait runs out, the dataset may as well be damaged: both are said.
 * On a local filesystem the rename is atomic, and a miss is a miss. */
static int meta_missing(zr_dataset *ds, int rc)
{
	struct stat st;

	if (rc != -ENOENT || !zr_fs_shared(ds->dirfd) ||
	    fstatat(ds->dirfd, "chunk", &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
		return rc;
	return zr_err(-ESTALE,
		      "%s/meta.json: not found, though chunk/ is there: replaced under this "
		      "client of a shared filesystem, which did not catch up, or a damaged dataset",
		      ds->path);
}

/* A handle being opened: allocated, with its locks, its directory open. On
 * failure *out may be set still (zr_close() it). */
static int handle_new(zr_dataset **out, const char *dir, unsigned flags)
{
	zr_dataset *ds = calloc(1, sizeof *ds);

	*out = ds;
	RETURN_IF(!ds, -ENOMEM, "out of memory");
	ds->flags = flags;
	ds->dirfd = ds->chunkdirfd = ds->readersfd = -1;
	pthread_rwlock_init(&ds->wlock, NULL);
	pthread_mutex_init(&ds->grow_lock, NULL);
	pthread_mutex_init(&ds->default_lock, NULL);
	zr_overlay_init(&ds->overlay);
	ds->path = strdup(dir);
	RETURN_IF(!ds->path, -ENOMEM, "out of memory");
	ds->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	RETURN_IF(ds->dirfd < 0, -errno, "%s: %s", dir, strerror(errno));
	return 0;
}

/* The handle takes state @m: a reader holds it before it opens any of its
 * files; its tables (@new_tables: a rebalance's being switched) and chunks
 * (those @donor has open, shared). */
static int handle_load(zr_dataset *ds, const zr_meta *m, bool new_tables, zr_dataset *donor)
{
	if (!(ds->flags & ZR_RDWR))
		FORWARD_IF_ERR(zr_readers_hold(ds, m->generation));
	ds->version = m->version;
	ds->generation = m->generation;
	ds->created = m->created;
	ds->modified = m->modified;
	ds->chunk_size = m->chunk_size;
	ds->attrs = m->attrs ? json_incref(m->attrs) : NULL;
	ds->tree_ref = m->tree;
	atomic_init(&ds->length, m->length);
	ds->disk_length = m->length;
	ds->high = m->high;
	ds->chunkdirfd = zr_sys.openat(ds->dirfd, "chunk", O_RDONLY | O_DIRECTORY, 0);
	RETURN_IF(ds->chunkdirfd < 0, errno == ENOENT ? ZR_ECORRUPT : -errno, "%s/chunk: %s",
		  ds->path, zr_open_strerror(errno));
	FORWARD_IF_ERR(open_fields(ds, m, new_tables));
	FORWARD_IF_ERR(zr_tree_load(ds, &m->tree));
	return zr_chunk_open_all(ds, m, donor);
}

/* One attempt to open: -EAGAIN when a reader found the state moved on. A
 * reader takes the chunks @donor has open. */
static int open_once(zr_dataset **out, const char *dir, unsigned flags, zr_dataset *donor)
{
	zr_dataset *ds;
	zr_meta m = {0};
	bool new_tables = false;
	int rc;

	*out = NULL;
	if ((rc = handle_new(&ds, dir, flags)) < 0)
		goto fail;
	if ((flags & ZR_RDWR) && flock(ds->dirfd, LOCK_EX | LOCK_NB) < 0) {
		char who[512];
		rc = errno == EWOULDBLOCK
			     ? zr_err(-EBUSY, "%s: another writer has the dataset open: %s", dir,
				      writer_who(dir, ds->dirfd, who, sizeof who))
			     : zr_err(-errno, "%s: cannot lock: %s", dir, strerror(errno));
		goto fail;
	}
	if ((rc = zr_readers_open(ds)) < 0)
		goto fail;
	if ((flags & ZR_RDWR) && (rc = zr_readers_claim_writer(ds)) < 0) {
		char who[512];
		if (rc == -EBUSY)
			rc = zr_err(-EBUSY, "%s: another writer has the dataset open (on another "
					    "machine sharing it?): %s",
				    dir, writer_who(dir, ds->dirfd, who, sizeof who));
		goto fail;
	}
	if (flags & ZR_RDWR)
		writer_write(ds); /* ours on every machine: say who */
	if ((rc = meta_missing(ds, zr_meta_read(ds->dirfd, dir, "meta.json", &m))) < 0 ||
	    (rc = pending_rebalance(ds, &m, &new_tables)) < 0 ||
	    (rc = handle_load(ds, &m, new_tables, donor)) < 0 ||
	    (rc = zr_journal_load(ds, flags & ZR_RDWR)) < 0)
		goto fail;
	if (flags & ZR_RDWR) {
		zr_chunks_sweep(ds);
		zr_tree_sweep(ds); /* what a commit that never landed left */
	}
	zr_meta_free(&m);
	if (!(flags & ZR_RDWR) && !still_current(ds)) {
		zr_close(ds);
		return -EAGAIN;
	}
	*out = ds;
	return 0;
fail:
	/* a reader that failed because a commit moved files from under it (a
	 * rebalance removes the old chunks) starts over */
	if (ds && !(flags & ZR_RDWR) && m.nfields && ds->generation == m.generation &&
	    !still_current(ds))
		rc = -EAGAIN;
	zr_meta_free(&m);
	if (ds)
		ds->flags &= ~(unsigned)ZR_RDWR; /* close must not trim anything */
	zr_close(ds);
	return rc;
}

int zr_snapshot(zr_dataset *w, zr_dataset *donor, zr_dataset **out)
{
	zr_dataset *ds = NULL;
	zr_meta m;
	int rc;

	*out = NULL;
	RETURN_IF(!(w->flags & ZR_RDWR), -EINVAL, "%s: zr_snapshot takes the writer's handle",
		  w->path);
	RETURN_IF(donor && (donor->flags & ZR_RDWR), -EINVAL,
		  "%s: zr_snapshot shares a read-only handle's chunks", w->path);
	RETURN_IF(atomic_load(&w->dirty), -EBUSY, "%s: changes not committed yet", w->path);
	/* the state as the writer wrote it into meta.json at its commit, and
	 * the overlay it journalled then (all of it: a reader of the state
	 * would load the same from journal.<generation>) */
	zr_meta_from_ds(w, &m);
	if (!m.unfull || !m.fields)
		rc = zr_err(-ENOMEM, "out of memory");
	else if ((rc = handle_new(&ds, w->path, ZR_RDONLY | (w->flags & ZR_CHECK))) == 0 &&
		 (rc = zr_readers_open(ds)) == 0 && (rc = handle_load(ds, &m, false, donor)) == 0)
		rc = zr_overlay_copy(ds, w);
	zr_meta_free(&m);
	if (rc < 0) {
		zr_close(ds);
		return rc;
	}
	*out = ds;
	return 0;
}

#define OPEN_TRIES 1000
#define STALE_WAIT_MS 5000

static int open_retrying(zr_dataset **out, const char *dir, unsigned flags, zr_dataset *donor)
{
	int rc = -EAGAIN, waited = 0;

	/* a reader retries while commits land under it; each try is short, and
	 * a writer commits at most a few hundred times a second. A state
	 * committed on another machine whose files do not all show here yet
	 * (-ESTALE) is waited for, a while: a client's cache of sizes lasts
	 * about a second. zr_reopen returns it at once (its caller, following
	 * commits, looks again later). */
	for (int tries = 0; tries < OPEN_TRIES;) {
		rc = open_once(out, dir, flags, donor);
		if (rc == -ESTALE && !donor && waited < STALE_WAIT_MS) {
			int ms = waited < 10 ? 1 : waited < 100 ? 10 : 50;
			nanosleep(&(struct timespec){0, ms * 1000000L}, NULL);
			waited += ms;
		} else if (rc == -EAGAIN) {
			tries++; /* only a commit landing counts as a try */
		} else {
			break;
		}
	}
	RETURN_IF(rc == -EAGAIN, -EAGAIN,
		  "%s: a commit landed during each of %d attempts to open the dataset", dir,
		  OPEN_TRIES);
	return rc;
}

int zr_open(zr_dataset **out, const char *dir, unsigned flags)
{
	*out = NULL;
	RETURN_IF(flags & ~(unsigned)(ZR_RDWR | ZR_CHECK | ZR_WAIT), -EINVAL,
		  "zr_open: unknown flags 0x%x", flags);
	for (unsigned waited = 0;; waited++) {
		int rc = open_retrying(out, dir, flags & ~(unsigned)ZR_WAIT, NULL);
		long pid;
		if (rc != -EBUSY || !(flags & ZR_WAIT) || waited == ZR_WAIT_S ||
		    !(pid = zr_holder_ending(dir)))
			return rc;
		zr_holder_wait(pid, 1000); /* then the lock is tried again */
	}
}

int zr_reopen(zr_dataset *prev, zr_dataset **out)
{
	*out = NULL;
	RETURN_IF(prev->flags & ZR_RDWR, -EINVAL, "%s: zr_reopen takes a read-only handle",
		  prev->path);
	return open_retrying(out, prev->path, ZR_RDONLY | (prev->flags & ZR_CHECK), prev);
}

/* Switch the handle to the state @m after a rebalance. Old mappings are
 * retired, not unmapped, so pointers from earlier gathers stay valid. The
 * new tables hold every entry, the overlay's too: it is done with, and
 * readers of older states keep the old table files they opened. */
int zr_reload(zr_dataset *ds, const zr_meta *m)
{
	for (unsigned f = 0; f < ds->nfields; f++)
		zr_table_retire(ds, &ds->fields[f]);
	zr_chunk_retire_all(ds);
	free(ds->fields);
	free(ds->specs);
	ds->fields = NULL;
	ds->specs = NULL;
	ds->version = m->version;
	ds->generation = m->generation;
	ds->modified = m->modified;
	ds->chunk_size = m->chunk_size;
	zr_overlay_clear(ds);
	ds->high = ds->disk_length;
	FORWARD_IF_ERR(open_fields(ds, m, false));
	FORWARD_IF_ERR(zr_chunk_open_all(ds, m, NULL));
	zr_chunks_sweep(ds);
	return zr_journal_settle(ds);
}

/* ---- close ---- */

/* Put the files back to the committed state, trimmed. */
static void revert_uncommitted(zr_dataset *ds)
{
	uint32_t num = atomic_load(&ds->chunk_num);

	for (uint32_t i = 0; i < num; i++) {
		zr_chunk *c = atomic_load(&ds->chunks)[i];
		char name[32];
		if (c->created) {
			zr_chunk_name(name, sizeof name, c->id);
			zr_sys.unlinkat(ds->chunkdirfd, name, 0);
		} else if (c->committed_unfull && c->write_pos != c->committed_pos &&
			   zr_chunk_use(ds, c) == 0) {
			zr_chunk_trim(ds, c, c->committed_pos);
			zr_chunk_unuse(c);
		}
	}
	/* never below the file's size at open, nor the length of a state a
	 * reader may hold: a reader may map that much of the table */
	for (unsigned f = 0; f < ds->nfields; f++) {
		zr_fstate *t = &ds->fields[f];
		uint64_t keep = ds->high > t->open_cap ? ds->high : t->open_cap;
		if (t->fd >= 0 && t->cap > keep)
			zr_table_trim(ds, t, keep);
	}
}

void zr_close(zr_dataset *ds)
{
	if (!ds)
		return;
	zr_writer_close(ds->default_writer);
	for (int i = 0; i < ZR_WRITERS_MAX; i++)
		zr_writer_close(ds->writers[i]);
	if (ds->flags & ZR_RDWR)
		revert_uncommitted(ds);
	for (unsigned f = 0; ds->fields && f < ds->nfields; f++)
		zr_table_close(&ds->fields[f]);
	zr_chunk_close_all(ds);
	zr_overlay_destroy(&ds->overlay);
	if (ds->chunkdirfd >= 0)
		close(ds->chunkdirfd);
	if (ds->readersfd >= 0)
		close(ds->readersfd); /* releases a reader's hold */
	if (ds->dirfd >= 0)
		close(ds->dirfd); /* releases the writer lock */
	json_decref(ds->attrs);
	json_decref(ds->tree);
	pthread_rwlock_destroy(&ds->wlock);
	pthread_mutex_destroy(&ds->grow_lock);
	pthread_mutex_destroy(&ds->default_lock);
	free(ds->fields);
	free(ds->specs);
	free(ds->path);
	free(ds->holder);
	free(ds->holder_mount);
	free(ds);
}
