/*
 * commit.c - making changes durable: the commit protocol and the journal.
 *
 * A commit, with every appender excluded by the write lock:
 *   1. fdatasync the chunks written since the last commit (and fsync chunk/
 *      if files were created), then the offset tables;
 *   2. if the overlay is not empty (entries of records some committed state
 *      has changed, since the tables were last brought up to date), write
 *      all of it to journal.<G>, G the generation being committed, and fsync
 *      it; log the entries this commit changed (changes.c);
 *   3. write meta.json.tmp, fsync, rename over meta.json, fsync the directory:
 *      the commit point;
 *   4. settle: if no reader holds a state older than G, apply the overlay to
 *      the tables, fdatasync them, and remove every journal; otherwise keep
 *      the overlay (the next commit's journal holds it all again) and remove
 *      only the journals of generations no reader holds. A writer that
 *      keeps a reader of its last state (a mount's view) is never without
 *      one at its commits: it settles between them (zr_settle), once the
 *      readers of older states are gone and the overlay is large enough
 *      for its journal to cost; else every commit writes a journal of
 *      every change since the last settle.
 * A crash before 3 leaves the old meta.json: the new bytes lie beyond what it
 * references and journal.<G> is never read. A crash after 3 leaves
 * journal.<G> beside meta.json of generation G: opening the dataset loads it
 * (a reader overlays it, a writer settles it as in 4; idempotent). So every
 * instant has one complete committed state, and a reader's state stays as it
 * was for as long as it holds it.
 *
 * Journal file: "ZRJOURN1", generation u64, count u64, count records of
 * {field u32, 0 u32, id u64, entry 16 bytes}, then CRC-32 of all before it.
 * A dataset written by an earlier version may have one named `journal`.
 */
#include "store_i.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#define JOURNAL "journal"          /* an earlier version's single journal */
/* zr_settle's least overlay: a journal of it is 32 KiB, written at every
 * commit until then */
#define SETTLE_ENTRIES 1024
#define JOURNAL_MAGIC "ZRJOURN1"
#define JOURNAL_HDR 24
#define JOURNAL_REC 32

void zr_meta_from_ds(zr_dataset *ds, zr_meta *m)
{
	uint32_t num = atomic_load(&ds->chunk_num);

	memset(m, 0, sizeof *m);
	m->version = ds->version;
	m->generation = ds->generation;
	m->length = atomic_load(&ds->length);
	m->high = ds->high > m->length ? ds->high : m->length;
	m->created = ds->created;
	m->modified = ds->modified;
	m->chunk_size = ds->chunk_size;
	m->chunk_first = ds->chunk_first;
	m->chunk_num = num;
	m->unfull = calloc(num + 1, sizeof *m->unfull);
	for (uint32_t i = 0; m->unfull && i < num; i++) {
		zr_chunk *c = atomic_load(&ds->chunks)[i];
		if (c->writable && c->records < ds->chunk_size)
			m->unfull[m->unfull_count++] = (zr_unfull){c->id, c->write_pos, c->records};
	}
	m->nfields = ds->nfields;
	m->fields = calloc(ds->nfields, sizeof *m->fields);
	for (unsigned i = 0; m->fields && i < ds->nfields; i++)
		m->fields[i] = ds->fields[i].def;
	m->attrs = ds->attrs ? json_incref(ds->attrs) : NULL;
	m->tree = ds->tree_ref;
}

/* ---- journal ---- */

static void journal_name(char *buf, size_t cap, uint64_t generation)
{
	snprintf(buf, cap, JOURNAL ".%llu", (unsigned long long)generation);
}

static int journal_write(zr_dataset *ds, uint64_t generation)
{
	char name[48];
	zr_overlay *o = &ds->overlay;
	uint64_t count = 0, len = atomic_load(&ds->length);
	size_t size;
	uint8_t *buf, *p;
	uint32_t crc;
	int rc;

	for (uint64_t i = 0; i < o->cap; i++)
		count += o->slots[i].key && (o->slots[i].key - 1) / ds->nfields < len;
	size = JOURNAL_HDR + count * JOURNAL_REC + 4;
	buf = calloc(1, size);
	RETURN_IF(!buf, -ENOMEM, "out of memory");
	memcpy(buf, JOURNAL_MAGIC, 8);
	zr_put_le64(buf + 8, generation);
	zr_put_le64(buf + 16, count);
	p = buf + JOURNAL_HDR;
	for (uint64_t i = 0; i < o->cap; i++) {
		uint64_t key = o->slots[i].key;
		if (!key || (key - 1) / ds->nfields >= len)
			continue; /* beyond the committed length: nothing reads it */
		zr_put_le64(p, (key - 1) % ds->nfields);
		zr_put_le64(p + 8, (key - 1) / ds->nfields);
		zr_entry_encode(p + 16, ds->version, &o->slots[i].e);
		p += JOURNAL_REC;
	}
	crc = (uint32_t)crc32(0, buf, (uInt)(size - 4));
	for (int i = 0; i < 4; i++)
		buf[size - 4 + i] = (uint8_t)(crc >> (8 * i));
	journal_name(name, sizeof name, generation);
	rc = zr_write_durable(ds->dirfd, ds->path, name, buf, size);
	free(buf);
	return rc;
}

/* Store every overlay entry of generation @upto or before into its table
 * and make it durable. */
static int journal_apply(zr_dataset *ds, uint64_t upto)
{
	zr_overlay *o = &ds->overlay;
	uint64_t len = atomic_load(&ds->length);

	for (uint64_t i = 0; i < o->cap; i++) {
		uint64_t key = o->slots[i].key, id = (key - 1) / ds->nfields;
		if (key && id < len && o->slots[i].gen <= upto)
			zr_entry_store(zr_table_slot(&ds->fields[(key - 1) % ds->nfields], id),
				       ds->version, &o->slots[i].e);
	}
	for (unsigned f = 0; f < ds->nfields; f++)
		if (zr_sys.fdatasync(ds->fields[f].fd) < 0)
			return zr_err(-errno, "%s/%s.offset: fdatasync failed: %s", ds->path,
				      ds->fields[f].def.name, strerror(errno));
	return 0;
}

/* The generation a journal file is named for (an earlier version's
 * `journal`: the one in its header); false if @name is no journal. */
static bool journal_of(zr_dataset *ds, const char *name, uint64_t *generation)
{
	uint8_t hdr[16];
	char *end;
	int fd;

	if (strncmp(name, JOURNAL ".", sizeof JOURNAL) == 0 && name[sizeof JOURNAL] >= '0' &&
	    name[sizeof JOURNAL] <= '9') {
		*generation = strtoull(name + sizeof JOURNAL, &end, 10);
		return *end == 0;
	}
	if (strcmp(name, JOURNAL) != 0)
		return false;
	fd = zr_sys.openat(ds->dirfd, name, O_RDONLY, 0);
	*generation = UINT64_MAX; /* unreadable: nobody can use it */
	if (fd >= 0 && zr_read_full(fd, hdr, sizeof hdr, 0) == 0 &&
	    memcmp(hdr, JOURNAL_MAGIC, 8) == 0)
		*generation = zr_le64(hdr + 8);
	if (fd >= 0)
		close(fd);
	return true;
}

/* Remove the journals no reader can need: those of generations below the
 * handle's that no reader holds (one that holds it has loaded it, or will
 * find meta.json moved on and start over), the current one if @current,
 * and any of a generation never committed. */
static void journals_sweep(zr_dataset *ds, bool current)
{
	int fd = openat(ds->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	uint64_t g;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d)))
		if (journal_of(ds, de->d_name, &g) &&
		    (g > ds->generation || (g == ds->generation && current) ||
		     (g < ds->generation && !zr_readers_at(ds, g))))
			zr_sys.unlinkat(ds->dirfd, de->d_name, 0);
	closedir(d);
}

int zr_journal_settle(zr_dataset *ds)
{
	int rc = 0;

	if (zr_readers_before(ds, ds->generation)) {
		journals_sweep(ds, false);
		return 0;
	}
	if (atomic_load(&ds->overlay.count) > 0) {
		/* on failure the journal stays, and the next open settles it */
		if ((rc = journal_apply(ds, UINT64_MAX)) < 0)
			return rc;
		zr_overlay_clear(ds);
	}
	ds->high = ds->disk_length; /* no reader holds a longer state */
	journals_sweep(ds, true);
	if (ds->chunks_stale)
		zr_chunks_sweep(ds); /* the readers of a rebalanced state are gone */
	return 0;
}

/* Open the journal of the handle's generation: journal.<generation>, or an
 * earlier version's `journal`; -1 if there is none. */
static int journal_open(zr_dataset *ds, char *name, size_t cap)
{
	int fd;

	journal_name(name, cap, ds->generation);
	fd = zr_sys.openat(ds->dirfd, name, O_RDONLY, 0);
	if (fd < 0 && errno == ENOENT) {
		snprintf(name, cap, JOURNAL);
		fd = zr_sys.openat(ds->dirfd, name, O_RDONLY, 0);
	}
	return fd;
}

int zr_journal_load(zr_dataset *ds, bool apply)
{
	uint64_t count, len = atomic_load(&ds->length);
	char name[48];
	struct stat st;
	uint8_t *buf = NULL;
	uint32_t crc;
	int fd, rc = 0;

	fd = journal_open(ds, name, sizeof name);
	if (fd < 0)
		return errno != ENOENT ? zr_err(-errno, "%s/%s: %s", ds->path, name,
						zr_open_strerror(errno))
		       : apply	       ? zr_journal_settle(ds)
				       : 0;
	if (fstat(fd, &st) < 0 || st.st_size < JOURNAL_HDR + 4 ||
	    (uint64_t)st.st_size > (uint64_t)JOURNAL_HDR + 4 + (len + 1) * ds->nfields * JOURNAL_REC)
		goto stale; /* torn or foreign: cannot belong to this generation */
	buf = malloc((size_t)st.st_size);
	if (!buf) {
		rc = zr_err(-ENOMEM, "out of memory");
		goto out;
	}
	if (zr_read_full(fd, buf, (size_t)st.st_size, 0) < 0)
		goto stale;
	crc = (uint32_t)crc32(0, buf, (uInt)(st.st_size - 4));
	count = zr_le64(buf + 16);
	if (memcmp(buf, JOURNAL_MAGIC, 8) != 0 || zr_le64(buf + 8) != ds->generation ||
	    count != (uint64_t)(st.st_size - JOURNAL_HDR - 4) / JOURNAL_REC ||
	    crc != ((uint32_t)buf[st.st_size - 4] | (uint32_t)buf[st.st_size - 3] << 8 |
		    (uint32_t)buf[st.st_size - 2] << 16 | (uint32_t)buf[st.st_size - 1] << 24))
		goto stale; /* from a commit that did not reach meta.json */
	for (uint64_t i = 0; i < count && rc == 0; i++) {
		const uint8_t *p = buf + JOURNAL_HDR + i * JOURNAL_REC;
		uint64_t field = zr_le64(p), id = zr_le64(p + 8);
		zr_entry e;
		if (field >= ds->nfields || id >= len) {
			rc = zr_err(ZR_ECORRUPT, "%s/%s: record %llu names field %llu, id %llu",
				    ds->path, name, (unsigned long long)i, (unsigned long long)field,
				    (unsigned long long)id);
			break;
		}
		zr_entry_decode(p + 16, ds->version, &e);
		rc = zr_overlay_set(ds, (unsigned)field, id, &e, ds->generation);
	}
	goto out;
stale:
	zr_overlay_clear(ds); /* nothing of it counts */
out:
	free(buf);
	close(fd);
	if (rc == 0 && apply)
		rc = zr_journal_settle(ds);
	return rc;
}

/* ---- commit ---- */

/* Tell @cb each (field, id) whose entry the commit of @generation changed:
 * the overlay's slots of that generation (the change log's records), but
 * those of records it removed (the length says). */
static void tell_changes(zr_dataset *ds, uint64_t generation, zr_change_cb cb, void *ctx)
{
	zr_overlay *o = &ds->overlay;
	uint64_t n = atomic_load(&ds->length);

	pthread_rwlock_rdlock(&o->lock);
	for (uint64_t i = 0; i < o->cap; i++) {
		uint64_t key = o->slots[i].key;
		if (key && o->slots[i].gen == generation && (key - 1) / ds->nfields < n)
			cb(ctx, (unsigned)((key - 1) % ds->nfields), (key - 1) / ds->nfields);
	}
	pthread_rwlock_unlock(&o->lock);
}

int zr_commit_locked(zr_dataset *ds, zr_change_cb changed, void *ctx)
{
	uint32_t num = atomic_load(&ds->chunk_num);
	bool journal = atomic_load(&ds->overlay.count) > 0, created = false;
	int64_t now = (int64_t)time(NULL);
	zr_meta m;
	int rc;

	if (!atomic_load(&ds->dirty))
		return 0;
	for (uint32_t i = 0; i < num; i++) {
		zr_chunk *c = atomic_load(&ds->chunks)[i];
		if (c->dirty) {
			/* pinned: the pool may have closed it, and may not meanwhile */
			FORWARD_IF_ERR(zr_chunk_use(ds, c));
			rc = zr_sys.fdatasync(c->fd) < 0
				     ? zr_err(-errno, "%s/chunk/%u.zr: fdatasync failed: %s",
					      ds->path, c->id, strerror(errno))
				     : zr_chunk_check_whole(ds, c); /* cut since the append */
			zr_chunk_unuse(c);
			FORWARD_IF_ERR(rc);
		}
		created |= c->created;
	}
	if (created && zr_sys.fsync(ds->chunkdirfd) < 0)
		return zr_err(-errno, "%s/chunk: fsync failed: %s", ds->path, strerror(errno));
	/* a table nothing wrote since its last flush has nothing to flush (a
	 * commit of changes to committed records writes only the journal) */
	for (unsigned f = 0; f < ds->nfields; f++)
		if (atomic_exchange(&ds->fields[f].unsynced, false) &&
		    zr_sys.fdatasync(ds->fields[f].fd) < 0) {
			atomic_store(&ds->fields[f].unsynced, true);
			return zr_err(-errno, "%s/%s.offset: fdatasync failed: %s", ds->path,
				      ds->fields[f].def.name, strerror(errno));
		}
	if (journal) {
		FORWARD_IF_ERR(journal_write(ds, ds->generation + 1));
		FORWARD_IF_ERR(zr_changes_append(ds, ds->generation + 1));
	}

	/* the tree's directories and links, when set since: a file of this
	 * generation, durable before the commit point names it */
	zr_tree_ref tree = ds->tree_ref;
	if (ds->tree_dirty)
		FORWARD_IF_ERR(zr_tree_write(ds, ds->generation + 1, &tree));

	zr_meta_from_ds(ds, &m);
	if (!m.unfull || !m.fields) {
		zr_meta_free(&m);
		return zr_err(-ENOMEM, "out of memory");
	}
	m.generation = ds->generation + 1;
	m.modified = now;
	m.tree = tree;
	rc = zr_meta_write(ds->dirfd, ds->path, &m);
	zr_meta_free(&m);
	FORWARD_IF_ERR(rc);
	if (ds->tree_dirty) { /* the file of the state before goes */
		ds->tree_dirty = false;
		ds->tree_ref = tree;
		zr_tree_sweep(ds);
	}

	/* committed: the rest only makes the tables match the journal */
	ds->generation++;
	ds->modified = now;
	ds->disk_length = atomic_load(&ds->length);
	if (ds->high < ds->disk_length)
		ds->high = ds->disk_length;
	for (uint32_t i = 0; i < num; i++) {
		zr_chunk *c = atomic_load(&ds->chunks)[i];
		c->committed_pos = c->write_pos;
		c->committed_records = c->records;
		c->committed_unfull = c->writable && c->records < ds->chunk_size;
		c->dirty = c->created = false;
	}
	atomic_store(&ds->dirty, false);
	if (changed && journal) /* before settling may empty the overlay */
		tell_changes(ds, ds->generation, changed, ctx);
	(void)zr_journal_settle(ds); /* committed whatever it finds; failure: the next open */
	return 0;
}

int zr_commit_changes(zr_dataset *ds, zr_change_cb changed, void *ctx)
{
	int rc;

	RETURN_IF(!(ds->flags & ZR_RDWR), -EROFS, "%s: opened read-only", ds->path);
	pthread_rwlock_wrlock(&ds->wlock);
	rc = zr_commit_locked(ds, changed, ctx);
	pthread_rwlock_unlock(&ds->wlock);
	return rc;
}

int zr_commit(zr_dataset *ds)
{
	return zr_commit_changes(ds, NULL, NULL);
}

/* Store the overlay's entries of generation @upto or before (committed,
 * and older than every state a reader holds: each has them in its own
 * overlay) into the tables, durably, and keep the others. */
static int settle_upto(zr_dataset *ds, uint64_t upto)
{
	zr_overlay *o = &ds->overlay;
	uint64_t old = 0;

	for (uint64_t i = 0; i < o->cap; i++)
		old += o->slots[i].key && o->slots[i].gen <= upto;
	if (old < atomic_load(&o->count) / 2)
		return 0; /* mostly newer: later */
	FORWARD_IF_ERR(journal_apply(ds, upto));
	FORWARD_IF_ERR(zr_overlay_keep_after(ds, upto));
	journals_sweep(ds, false);
	return 1;
}

int zr_settle(zr_dataset *ds)
{
	uint64_t oldest;
	int rc = 0;

	RETURN_IF(!(ds->flags & ZR_RDWR), -EROFS, "%s: opened read-only", ds->path);
	pthread_rwlock_wrlock(&ds->wlock);
	/* only what is committed goes into the tables, and of it only what
	 * every reader has in its own overlay */
	if (!atomic_load(&ds->dirty) && atomic_load(&ds->overlay.count) >= SETTLE_ENTRIES) {
		oldest = zr_readers_oldest(ds, ds->generation);
		if (oldest < ds->generation)
			rc = settle_upto(ds, oldest);
		else if ((rc = zr_journal_settle(ds)) == 0)
			rc = 1;
	}
	pthread_rwlock_unlock(&ds->wlock);
	return rc;
}
