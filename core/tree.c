/*
 * tree.c - the tree's directories and symbolic links (zr_tree_entry): what
 * a tree of files holds besides its files, kept beside the records in a
 * file of their own, tree.<G>, that meta.json names with its size and
 * CRC-32 (core/FORMAT.md, "Directories and symbolic links"): so that they
 * commit with the records, atomically, are never records a sampler could
 * draw, and a commit that does not change them writes none of them.
 *
 * The array is kept sorted by path, each path once: a reader checks that
 * in one pass, and a writer's zr_tree_set() sorts what it is given.
 *
 * Sections: checking, the file, reading, setting.
 */
#include "store_i.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define TREE_FILE "tree"

/* ---- checking ---- */

/* What is wrong with entry @path (@len bytes), @mode, @target (NULL: none,
 * @tlen bytes), @rdev, or NULL. */
static const char *entry_fault(const char *path, size_t len, uint32_t mode, const char *target,
			       size_t tlen, uint64_t rdev)
{
	bool dev = S_ISCHR(mode) || S_ISBLK(mode);

	bool top = len == 1 && path[0] == '.'; /* the tree itself */
	bool hard = S_ISREG(mode);             /* a second name of the file at @target */

	if (len >= PATH_MAX || (!top && !zr_name_safe(path, len)))
		return "its path is not a relative path below the tree";
	if (top && !S_ISDIR(mode))
		return "the top of the tree ('.') is a directory";
	if ((mode & ~(uint32_t)(S_IFMT | 07777)) != 0 ||
	    (!S_ISDIR(mode) && !S_ISLNK(mode) && !S_ISFIFO(mode) && !S_ISSOCK(mode) && !dev &&
	     !hard))
		return "its mode is not a directory's, a symbolic link's, a FIFO's, a socket's, a "
		       "device's or a hard link's";
	if (rdev && !dev)
		return "a device number on an entry that is not a device";
	if ((S_ISLNK(mode) || hard) != (target != NULL))
		return S_ISLNK(mode) ? "a symbolic link without a target"
		       : hard	     ? "a hard link without a target"
				     : "an entry other than a link with a target";
	if (target && (tlen == 0 || tlen >= PATH_MAX || memchr(target, 0, tlen)))
		return "its target is empty, longer than 4095 bytes or holds a NUL";
	if (hard && (mode & 07777))
		return "a hard link with permission bits (its file has them)";
	if (hard && (!zr_name_safe(target, tlen) || (tlen == len && memcmp(target, path, len) == 0)))
		return "a hard link whose target is not another relative path below the tree";
	return NULL;
}

/* Integer @key of @o into @out: 0, or -1 (missing or not an integer). */
static int get_int(json_t *o, const char *key, int64_t *out)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_integer(v))
		return -1;
	*out = (int64_t)json_integer_value(v);
	return 0;
}

static int entries_check(json_t *tree, const char *where)
{
	const char *prev = NULL;
	size_t prev_len = 0, i;
	json_t *e;

	RETURN_IF(!json_is_array(tree) || json_array_size(tree) > ZR_TREE_MAX, ZR_ECORRUPT,
		  "%s: 'tree' is not an array of at most %d entries", where, ZR_TREE_MAX);
	json_array_foreach(tree, i, e) {
		json_t *path = json_object_get(e, "path"), *target = json_object_get(e, "target");
		int64_t mode, t, rdev = 0;
		const char *fault = NULL;
		if (!json_is_object(e) || !json_is_string(path) || get_int(e, "mode", &mode) < 0 ||
		    mode < 0 || mode > UINT32_MAX || get_int(e, "mtime", &t) < 0 ||
		    (json_object_get(e, "atime") && get_int(e, "atime", &t) < 0) ||
		    (json_object_get(e, "ctime") && get_int(e, "ctime", &t) < 0) ||
		    (json_object_get(e, "size") && (get_int(e, "size", &t) < 0 || t < 0)) ||
		    (json_object_get(e, "uid") &&
		     (get_int(e, "uid", &t) < 0 || t < 0 || t >= ZR_OWNER_NONE ||
		      get_int(e, "gid", &t) < 0 || t < 0 || t >= ZR_OWNER_NONE)) ||
		    (target && !json_is_string(target)) ||
		    (json_object_get(e, "rdev") && (get_int(e, "rdev", &rdev) < 0 || rdev < 0)))
			fault = "not an object of a path, a mode and times";
		else
			fault = entry_fault(json_string_value(path), json_string_length(path),
					    (uint32_t)mode, json_string_value(target),
					    json_string_length(target), (uint64_t)rdev);
		RETURN_IF(fault, ZR_ECORRUPT, "%s: 'tree' entry %zu: %s", where, i, fault);
		const char *p = json_string_value(path);
		size_t len = json_string_length(path);
		int order = prev ? memcmp(prev, p, prev_len < len ? prev_len : len) : -1;
		RETURN_IF(order > 0 || (order == 0 && prev_len >= len), ZR_ECORRUPT,
			  "%s: 'tree' entry %zu: '%s' is not after '%s' (sorted, each path once)",
			  where, i, p, prev);
		prev = p;
		prev_len = len;
	}
	return 0;
}

/* ---- the file ---- */

static void file_name(char *buf, size_t cap, uint64_t generation)
{
	snprintf(buf, cap, TREE_FILE ".%" PRIu64, generation);
}

int zr_tree_load(zr_dataset *ds, const zr_tree_ref *ref)
{
	char name[48], where[PATH_MAX + 64];
	json_error_t jerr;
	struct stat st;
	json_t *tree;
	char *buf;
	int fd, rc;

	json_decref(ds->tree);
	ds->tree = NULL;
	if (!ref->generation)
		return 0;
	file_name(name, sizeof name, ref->generation);
	snprintf(where, sizeof where, "%s/%s", ds->path, name);
	/* missing: a commit since replaced it (a reader then starts over),
	 * written on another machine sharing the filesystem and not visible
	 * here yet (waited for, -ESTALE), or damage from outside */
	bool shared = zr_fs_shared(ds->dirfd);
	if ((fd = zr_sys.openat(ds->dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0)) < 0)
		return zr_err(errno != ENOENT ? -errno : shared ? -ESTALE : ZR_ECORRUPT, "%s: %s",
			      where,
			      errno == ENOENT ? "missing (meta.json names it)"
					      : zr_open_strerror(errno));
	if (!(buf = malloc(ref->bytes))) {
		close(fd);
		return zr_err(-ENOMEM, "out of memory");
	}
	rc = zr_read_full(fd, buf, ref->bytes, 0);
	if (rc == 0 && (fstat(fd, &st) < 0 || (uint64_t)st.st_size != ref->bytes))
		rc = -ENODATA;
	close(fd);
	if (rc == 0 && (uint32_t)crc32(0, (const Bytef *)buf, (uInt)ref->bytes) != ref->crc)
		rc = -EBADMSG;
	if (rc < 0) {
		free(buf);
		return zr_err(rc != -ENODATA && rc != -EBADMSG ? rc : shared ? -ESTALE : ZR_ECORRUPT,
			      "%s: %s", where,
			      rc == -ENODATA	? "not the size meta.json gives"
			      : rc == -EBADMSG ? "damaged (not the CRC-32 meta.json gives)"
					       : zr_strerror(rc));
	}
	tree = json_loadb(buf, ref->bytes, JSON_REJECT_DUPLICATES, &jerr);
	free(buf);
	RETURN_IF(!tree, ZR_ECORRUPT, "%s: not valid JSON (%s)", where, jerr.text);
	if ((rc = entries_check(tree, where)) == 0 && json_array_size(tree) != ref->entries)
		rc = zr_err(ZR_ECORRUPT, "%s: %zu entries, meta.json says %" PRIu64, where,
			    json_array_size(tree), ref->entries);
	if (rc < 0) {
		json_decref(tree);
		return rc;
	}
	ds->tree = tree;
	return 0;
}

int zr_tree_write(zr_dataset *ds, uint64_t generation, zr_tree_ref *ref)
{
	char name[48];
	char *text;
	size_t n;
	int rc;

	*ref = (zr_tree_ref){0};
	if (!ds->tree || !json_array_size(ds->tree))
		return 0; /* none: no file */
	file_name(name, sizeof name, generation);
	RETURN_IF(!(text = json_dumps(ds->tree, JSON_COMPACT)), -ENOMEM, "out of memory");
	n = strlen(text);
	rc = zr_write_durable(ds->dirfd, ds->path, name, text, n);
	*ref = (zr_tree_ref){generation, n, json_array_size(ds->tree),
			     (uint32_t)crc32(0, (const Bytef *)text, (uInt)n)};
	free(text);
	/* its name durable before meta.json's rename names it */
	if (rc == 0 && zr_sys.fsync(ds->dirfd) < 0) {
		rc = zr_err(-errno, "%s: fsync of the directory failed: %s", ds->path,
			    strerror(errno));
		zr_sys.unlinkat(ds->dirfd, name, 0);
	}
	return rc;
}

/* Whether @name is a tree file's: "tree." and digits. */
static bool tree_file(const char *name)
{
	size_t k = strlen(TREE_FILE);

	return strncmp(name, TREE_FILE ".", k + 1) == 0 && name[k + 1] &&
	       strspn(name + k + 1, "0123456789") == strlen(name + k + 1);
}

void zr_tree_sweep(zr_dataset *ds)
{
	int fd = zr_sys.openat(ds->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	char keep[48] = "";
	struct dirent *e;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return; /* the next writer sweeps */
	}
	if (ds->tree_ref.generation)
		file_name(keep, sizeof keep, ds->tree_ref.generation);
	while ((e = readdir(d)) != NULL)
		if (tree_file(e->d_name) && strcmp(e->d_name, keep) != 0)
			zr_sys.unlinkat(ds->dirfd, e->d_name, 0);
	closedir(d);
}

/* ---- reading ---- */

int zr_tree_get(const zr_dataset *ds, zr_tree_entry **out, size_t *n)
{
	size_t count = ds->tree ? json_array_size(ds->tree) : 0, bytes = 0, i;
	json_t *e;
	char *at;

	*out = NULL;
	*n = 0;
	if (count == 0)
		return 0;
	json_array_foreach(ds->tree, i, e) {
		bytes += json_string_length(json_object_get(e, "path")) + 1;
		if (json_object_get(e, "target"))
			bytes += json_string_length(json_object_get(e, "target")) + 1;
	}
	RETURN_IF(!(*out = malloc(count * sizeof **out + bytes)), -ENOMEM, "out of memory");
	at = (char *)(*out + count);
	json_array_foreach(ds->tree, i, e) {
		json_t *target = json_object_get(e, "target");
		zr_tree_entry *x = &(*out)[i];
		int64_t mode = 0;
		get_int(e, "mode", &mode);
		x->mode = (uint32_t)mode;
		get_int(e, "mtime", &x->mtime);
		if (get_int(e, "atime", &x->atime) < 0)
			x->atime = ZR_MTIME_NONE;
		int64_t size = 0;
		get_int(e, "size", &size);
		x->size = (uint64_t)size;
		int64_t uid = -1, gid = -1;
		x->owned = get_int(e, "uid", &uid) == 0 && get_int(e, "gid", &gid) == 0;
		x->uid = x->owned ? (uint32_t)uid : 0;
		x->gid = x->owned ? (uint32_t)gid : 0;
		if (get_int(e, "ctime", &x->ctime) < 0)
			x->ctime = 0;
		int64_t rdev = 0;
		get_int(e, "rdev", &rdev);
		x->rdev = (uint64_t)rdev;
		x->path = at;
		at = stpcpy(at, json_string_value(json_object_get(e, "path"))) + 1;
		x->target = NULL;
		if (target) {
			x->target = at;
			at = stpcpy(at, json_string_value(target)) + 1;
		}
	}
	*n = count;
	return 0;
}

/* ---- setting ---- */

static int by_path(const void *a, const void *b)
{
	return strcmp(((const zr_tree_entry *)a)->path, ((const zr_tree_entry *)b)->path);
}

/* Entry @x as meta.json keeps it, or NULL (out of memory, or a path or
 * target that is not UTF-8: JSON holds text). */
static json_t *entry_json(const zr_tree_entry *x)
{
	json_t *o = json_object(), *path = json_string(x->path);

	if (!o || !path || json_object_set_new(o, "path", path) < 0 ||
	    json_object_set_new(o, "mode", json_integer(x->mode)) < 0 ||
	    json_object_set_new(o, "mtime", json_integer(x->mtime)) < 0 ||
	    (x->atime != ZR_MTIME_NONE && x->atime != x->mtime &&
	     json_object_set_new(o, "atime", json_integer(x->atime)) < 0) ||
	    (x->size && json_object_set_new(o, "size", json_integer((json_int_t)x->size)) < 0) ||
	    (x->ctime && json_object_set_new(o, "ctime", json_integer(x->ctime)) < 0) ||
	    (x->rdev && json_object_set_new(o, "rdev", json_integer((json_int_t)x->rdev)) < 0) ||
	    (x->owned && (json_object_set_new(o, "uid", json_integer(x->uid)) < 0 ||
			  json_object_set_new(o, "gid", json_integer(x->gid)) < 0)) ||
	    (x->target && json_object_set_new(o, "target", json_string(x->target)) < 0)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int zr_tree_set(zr_dataset *ds, const zr_tree_entry *entries, size_t n)
{
	zr_tree_entry *sorted = NULL;
	json_t *tree;
	size_t bytes;
	int rc = 0;

	RETURN_IF(!(ds->flags & ZR_RDWR), -EROFS, "%s: opened read-only", ds->path);
	RETURN_IF(n > ZR_TREE_MAX, -EFBIG,
		  "%s: %zu directories and symbolic links; a dataset keeps at most %d", ds->path,
		  n, ZR_TREE_MAX);
	for (size_t i = 0; i < n; i++) {
		const zr_tree_entry *x = &entries[i];
		const char *fault = entry_fault(x->path, strlen(x->path), x->mode, x->target,
						x->target ? strlen(x->target) : 0, x->rdev);
		if (!fault && x->rdev > INT64_MAX)
			fault = "its device number is past 2^63";
		if (!fault && x->owned && (x->uid == ZR_OWNER_NONE || x->gid == ZR_OWNER_NONE))
			fault = "its owner or group is (uid_t)-1, which no file can have";
		RETURN_IF(fault, -EINVAL, "%s: '%s': %s", ds->path, x->path, fault);
	}
	RETURN_IF(n && !(sorted = malloc(n * sizeof *sorted)), -ENOMEM, "out of memory");
	if (n) {
		memcpy(sorted, entries, n * sizeof *sorted);
		qsort(sorted, n, sizeof *sorted, by_path);
	}
	tree = json_array();
	for (size_t i = 0; tree && rc == 0 && i < n; i++) {
		json_t *o;
		if (i && strcmp(sorted[i - 1].path, sorted[i].path) == 0)
			rc = zr_err(-EINVAL, "%s: '%s' is given twice", ds->path, sorted[i].path);
		else if (!(o = entry_json(&sorted[i])) || json_array_append_new(tree, o) < 0)
			rc = zr_err(-EILSEQ, "%s: '%s': not UTF-8 text (or out of memory)",
				    ds->path, sorted[i].path);
	}
	free(sorted);
	if (!tree)
		return zr_err(-ENOMEM, "out of memory");
	bytes = rc == 0 ? json_dumpb(tree, NULL, 0, JSON_COMPACT) : 0;
	if (rc == 0 && bytes > ZR_TREE_BYTES_MAX)
		rc = zr_err(-EFBIG, "%s: the directories and symbolic links take %zu bytes; a "
				    "dataset keeps at most %u",
			    ds->path, bytes, ZR_TREE_BYTES_MAX);
	if (rc < 0) {
		json_decref(tree);
		return rc;
	}
	pthread_rwlock_wrlock(&ds->wlock);
	if (ds->tree ? !json_equal(tree, ds->tree) : n > 0) {
		json_decref(ds->tree);
		ds->tree = n ? json_incref(tree) : NULL;
		ds->tree_dirty = true;
		atomic_store(&ds->dirty, true);
	}
	pthread_rwlock_unlock(&ds->wlock);
	json_decref(tree);
	return 0;
}
