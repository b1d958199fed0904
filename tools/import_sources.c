/*
 * import_sources.c - the planners of zr import: what each record of a
 * source is (which file, which bytes), checked before anything is written.
 *
 * Record order is documented and reproducible: a directory's files in
 * byte-wise order of their paths relative to SRC; the rows of each .npy
 * file in order, files in the order given; a WebDataset shard's samples in
 * the order of the shards given, then of their members; a flat file from
 * its start (import_arrays.c).
 *
 * The planners of arrays (npy, flat) are import_arrays.c's.
 *
 * Sections: dir, tar.
 */
#include "import_i.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* ---- dir ---- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* What a walk skipped, for the warning that says so. */
struct skipped {
	uint64_t links, dangling, dirlinks, special, binary;
	char first[PATH_MAX]; /* the first one, to name */
};

static void skip(struct skipped *k, uint64_t *what, const char *path)
{
	if (k->links + k->dangling + k->dirlinks + k->special + k->binary == 0)
		snprintf(k->first, sizeof k->first, "%s", path);
	(*what)++;
}

/* A walk of SRC: its options, what it finds, what it skips. */
struct walk {
	size_t top;             /* bytes of "SRC/": a path under SRC starts there */
	bool follow, hidden;
	struct strs *files;
	struct tree_list *tree; /* directories and links kept, or NULL: none */
	struct skipped k;
	char *err;
	size_t errlen;
};

/* Keep symbolic link, FIFO or socket @path, of lstat(2) @st, as itself: 1,
 * 0 (skipped), or -1. */
static int keep_link(struct walk *w, const char *path, const struct stat *st)
{
	char target[PATH_MAX];
	bool link = S_ISLNK(st->st_mode);
	ssize_t n = link ? readlink(path, target, sizeof target - 1) : 1; /* a name, a mode */

	if (n < 0) {
		snprintf(w->err, w->errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	target[n] = 0;
	switch (n == 0 ? -3 : tree_list_add(w->tree, path + w->top, st, link ? target : NULL, true)) {
	case 0:
		return 1;
	case -2:
		skip(&w->k, &w->k.binary, path);
		return 0;
	default:
		snprintf(w->err, w->errlen, "%s: %s", path, n ? "out of memory" : "an empty link");
		return -1;
	}
}

/* Every regular file under @dir, as paths, and with w->tree every
 * directory, symbolic link, FIFO and socket, which a link's target never
 * is: a link is kept as a link (what it points to is not read), unless
 * w->follow and it points to a file: then it counts as the file. Without
 * w->tree links are skipped, or with w->follow followed to files (dangling
 * ones, loops and links to directories skipped). Sockets, devices and FIFOs
 * are not records (a FIFO is never opened). Without w->hidden names
 * starting with a dot are passed over, as asked, silently. What else is
 * skipped is counted in w->k; an entry that cannot be looked at fails the
 * walk. 1 when something under @dir is kept, 0 when nothing is, -1. */
static int walk(struct walk *w, const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int rc = 0, kept = 0;

	if (!d) {
		snprintf(w->err, w->errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	while (rc >= 0 && (de = readdir(d))) {
		char *path;
		struct stat st, to; /* the entry's lstat(2); a link's target's */
		bool is_dir = false;
		rc = 0;
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (asprintf(&path, "%s/%s", dir, de->d_name) < 0) {
			rc = -1;
			break;
		}
		if (!w->hidden && de->d_name[0] == '.') {
			free(path);
			continue;
		}
		/* the entry's type when the filesystem tells it (saves a stat per
		 * file: the plan stats every file for its size anyway) */
		if (de->d_type == DT_REG) {
			rc = strs_add(w->files, path) < 0 ? -1 : 1;
			kept |= rc > 0;
			continue;
		}
		if (lstat(path, &st) < 0) {
			snprintf(w->err, w->errlen, "%s: %s", path, strerror(errno));
			rc = -1;
		} else if (S_ISDIR(st.st_mode)) {
			/* kept as a directory of the tree, then walked */
			size_t at = w->tree ? w->tree->n : SIZE_MAX;
			const char *rel = path + w->top;
			int added = w->tree ? tree_list_add(w->tree, rel, &st, NULL, true) : 0;
			is_dir = true;
			if (added == -2) {
				skip(&w->k, &w->k.binary, path);
				at = SIZE_MAX;
			}
			if (added == -1)
				rc = -1;
			else if ((rc = walk(w, path)) > 0 && at != SIZE_MAX)
				w->tree->full[at] = true;
		} else if (S_ISREG(st.st_mode)) {
			rc = strs_add(w->files, path) < 0 ? -1 : 1;
			kept |= rc > 0;
			continue;
		} else if (w->tree && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) ||
				       S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))) {
			/* a name, a mode (a device's number), as cp -a makes it */
			rc = keep_link(w, path, &st);
		} else if (!S_ISLNK(st.st_mode)) {
			skip(&w->k, &w->k.special, path);
		} else if (w->follow && stat(path, &to) == 0 && S_ISREG(to.st_mode)) {
			rc = strs_add(w->files, path) < 0 ? -1 : 1;
			kept |= rc > 0;
			continue;
		} else if (w->tree) {
			rc = keep_link(w, path, &st); /* a link: as it is */
		} else if (!w->follow) {
			skip(&w->k, &w->k.links, path);
		} else if (stat(path, &to) < 0) {
			skip(&w->k, &w->k.dangling, path); /* dangling, a loop, or unreadable */
		} else {
			skip(&w->k, S_ISDIR(to.st_mode) ? &w->k.dirlinks : &w->k.special, path);
		}
		kept |= rc > 0 || (is_dir && w->tree);
		free(path);
	}
	closedir(d);
	return rc < 0 ? -1 : kept;
}

/* ---- the tree's directories and links ---- */

/* 0, -1 (out of memory), or -2: @path or @target is not UTF-8 text. */
int tree_list_add(struct tree_list *t, const char *path, const struct stat *st,
		  const char *target, bool owned)
{
	zr_tree_entry *e;
	json_t *text[2] = {json_string(path), target ? json_string(target) : NULL};
	bool utf8 = text[0] && (!target || text[1]);

	json_decref(text[0]);
	json_decref(text[1]);
	if (!utf8)
		return -2; /* meta.json keeps text */
	if (t->n == t->cap) { /* two arrays of one size */
		size_t cap = t->cap, fcap = t->cap;
		if (grow(&t->v, &cap, t->n, sizeof *t->v, 64) < 0 ||
		    grow(&t->full, &fcap, t->n, sizeof *t->full, 64) < 0)
			return -1;
		t->cap = cap;
	}
	e = &t->v[t->n];
	*e = (zr_tree_entry){.mode = (uint32_t)(st->st_mode & (S_IFMT | 07777)),
			     .mtime = zr_time_ns(st->st_mtim), .atime = zr_time_ns(st->st_atim),
			     .size = S_ISDIR(st->st_mode) ? (uint64_t)st->st_size : 0,
			     .owned = owned, .uid = (uint32_t)st->st_uid,
			     .gid = (uint32_t)st->st_gid,
			     .rdev = S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode)
					     ? (uint64_t)st->st_rdev
					     : 0};
	if (!(e->path = strdup(path)) || (target && !(e->target = strdup(target)))) {
		free((char *)e->path);
		return -1;
	}
	t->full[t->n++] = false;
	return 0;
}

int tree_list_fit(struct tree_list *t, char *err, size_t errlen)
{
	size_t kept = 0, gone = 0;

	if (t->n <= ZR_TREE_MAX)
		return 0;
	for (size_t i = 0; i < t->n; i++) {
		if (t->full[i] && S_ISDIR(t->v[i].mode)) {
			free((char *)t->v[i].path);
			gone++;
			continue;
		}
		t->full[kept] = t->full[i];
		t->v[kept++] = t->v[i];
	}
	t->n = kept;
	if (kept > ZR_TREE_MAX) {
		snprintf(err, errlen, "%zu empty directories and symbolic links; a dataset keeps at "
			 "most %d", kept, ZR_TREE_MAX);
		return -1;
	}
	zr_warn("import: %zu directories and symbolic links, more than a dataset keeps (%d): the "
		"modes and times of the %zu directories that hold something are not kept (they "
		"come from their files' names, 0755)",
		kept + gone, ZR_TREE_MAX, gone);
	return 0;
}

void tree_list_free(struct tree_list *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free((char *)t->v[i].path);
		free((char *)t->v[i].target);
	}
	free(t->v);
	free(t->full);
	*t = (struct tree_list){0};
}

/* One line for all that a walk skipped, naming the first. */
static void warn_skipped(const struct skipped *k)
{
	char what[256] = "";
	size_t n = 0;
	const struct {
		uint64_t count;
		const char *one, *many;
	} kinds[] = {
		{k->links, "symbolic link", "symbolic links"},
		{k->dangling, "dangling or looping symbolic link", "dangling or looping symbolic links"},
		{k->dirlinks, "symbolic link to a directory", "symbolic links to directories"},
		{k->special, "FIFO, socket or device", "FIFOs, sockets or devices"},
		{k->binary, "directory or link whose name or target is not UTF-8 (its files are kept)",
		 "directories or links whose names or targets are not UTF-8 (their files are kept)"},
	};

	for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
		if (kinds[i].count && n < sizeof what)
			n += (size_t)snprintf(what + n, sizeof what - n, "%s%llu %s", n ? ", " : "",
					      (unsigned long long)kinds[i].count,
					      kinds[i].count == 1 ? kinds[i].one : kinds[i].many);
	if (k->links && n < sizeof what)
		n += (size_t)snprintf(what + n, sizeof what - n,
				      " (--follow-links follows links to files)");
	if (n)
		zr_warn("import: skipped %s; the first: %s", what, k->first);
}

static const char *extension(const char *path)
{
	const char *base = strrchr(path, '/'), *dot;

	base = base ? base + 1 : path;
	dot = strrchr(base, '.');
	return dot && dot != base ? dot + 1 : NULL;
}

/* The class directory of @rel (a path under SRC): its immediate parent,
 * or with @top the first directory under SRC; NULL for a file directly in
 * SRC. Its name, not NUL-terminated, is *len bytes. The library's rule, so
 * that a mount writing in tree/ labels files as the import did. */
static const char *class_of(const char *rel, bool top, size_t *len)
{
	return zr_name_class_dir(rel, strlen(rel), top, len);
}

/* The class names of @files (under SRC, @skip bytes of prefix), sorted
 * and each once, into @classes. 0 or -1 (the reason in @err). */
static int find_classes(struct strs *files, size_t skip, bool top, struct strs *classes,
			char *err, size_t errlen)
{
	const char *opt = top ? "--label-from-top" : "--label-from-parent";
	size_t kept = 0, out = 0;

	for (size_t i = 0; i < files->n; i++) {
		size_t len;
		const char *c = class_of(files->v[i] + skip, top, &len);
		if (!c) { /* at the top of SRC: in no class (ImageFolder skips it too) */
			if (out++ == 0)
				zr_warn("import: %s is in no class directory (%s wants SRC/.../CLASS/FILE): "
					"skipped", files->v[i], opt);
			free(files->v[i]);
			continue;
		}
		if (strs_add(classes, strndup(c, len)) < 0)
			return -1;
		files->v[kept++] = files->v[i];
	}
	files->n = kept;
	if (out > 1)
		zr_warn("import: skipped %zu files in no class directory in all", out);
	if (kept == 0 && out) {
		snprintf(err, errlen, "no file is in a class directory (%s wants SRC/.../CLASS/FILE)",
			 opt);
		return -1;
	}
	qsort(classes->v, classes->n, sizeof *classes->v, cmp_str);
	size_t n = 0;
	for (size_t i = 0; i < classes->n; i++) {
		if (n && strcmp(classes->v[n - 1], classes->v[i]) == 0)
			free(classes->v[i]);
		else
			classes->v[n++] = classes->v[i];
	}
	classes->n = n;
	return 0;
}

/* The files' extensions and how many have each (NULL: none). */
struct exts {
	struct ext_count {
		const char *ext;
		uint64_t n;
	} *v;
	size_t n, cap;
	uint64_t files;
};

#define EXTS_MAX 256 /* distinct extensions counted; the rest are "others" */

static int count_ext(struct exts *x, const char *e)
{
	size_t i;

	x->files++;
	for (i = 0; i < x->n; i++)
		if ((!e && !x->v[i].ext) || (e && x->v[i].ext && strcmp(e, x->v[i].ext) == 0))
			break;
	if (i == x->n) {
		if (x->n == EXTS_MAX)
			return 0;
		if (x->n == x->cap) {
			size_t cap = x->cap ? 2 * x->cap : 8;
			struct ext_count *v = realloc(x->v, cap * sizeof *v);
			if (!v)
				return -1;
			x->v = v;
			x->cap = cap;
		}
		x->v[x->n++] = (struct ext_count){e, 0};
	}
	x->v[i].n++;
	return 0;
}

/* The field's extension: --ext if given, else the files' when they share
 * one, else the most common (files without one are a kind of their own:
 * when they are most, the field has none), with a warning naming the
 * others. A record file is named ID.EXT under the mount, EXT its name's own
 * where it has one (zr_names_ext), else the field's. */
static void choose_ext(struct import *im, const struct exts *x)
{
	const struct ext_count *best = NULL;
	char others[512] = "", item[64];
	size_t at = 0, left = 0;

	if (im->o.ext) { /* checked with the options; "" is none */
		snprintf(im->ext, sizeof im->ext, "%s", im->o.ext);
		im->f[0].ext = im->ext[0] ? im->ext : NULL;
		return;
	}
	for (size_t i = 0; i < x->n; i++)
		if ((!x->v[i].ext ||
		     (strlen(x->v[i].ext) < sizeof im->ext && zr_name_check(x->v[i].ext) == 0)) &&
		    (!best || x->v[i].n > best->n ||
		     (x->v[i].n == best->n && x->v[i].ext &&
		      (!best->ext || strcmp(x->v[i].ext, best->ext) < 0))))
			best = &x->v[i];
	if (!best)
		return;
	snprintf(im->ext, sizeof im->ext, "%s", best->ext ? best->ext : "");
	im->f[0].ext = best->ext ? im->ext : NULL;
	if (best->n == x->files)
		return;
	for (size_t i = 0; i < x->n; i++) {
		if (&x->v[i] == best)
			continue;
		int len = snprintf(item, sizeof item, "%s%s%.40s (%llu)", at ? ", " : "",
				   x->v[i].ext ? "." : "", x->v[i].ext ? x->v[i].ext : "no extension",
				   (unsigned long long)x->v[i].n);
		if (left == 0 && at + (size_t)len < sizeof others - 32) { /* whole items only */
			memcpy(others + at, item, (size_t)len + 1);
			at += (size_t)len;
		} else {
			left++;
		}
	}
	if (left)
		snprintf(others + at, sizeof others - at, ", and %zu %s", left,
			 x->n == EXTS_MAX ? "more at least" : "more");
	else if (x->n == EXTS_MAX)
		snprintf(others + at, sizeof others - at, ", and more");
	if (best->ext)
		zr_warn("import: the files' extensions differ: the field takes .%s (%llu of %llu files); "
			"the others keep theirs by id: %s (--ext EXT chooses the field's, --ext '' none)",
			best->ext, (unsigned long long)best->n, (unsigned long long)x->files, others);
	else
		zr_warn("import: the files' extensions differ: most have none (%llu of %llu files), so "
			"the field takes none; the others keep theirs by id: %s (--ext EXT chooses the "
			"field's)",
			(unsigned long long)best->n, (unsigned long long)x->files, others);
}

/* Files seen with more than one link (hard links), by inode: the path
 * each was first seen at. Open addressing, doubled at half full. */
struct seen {
	struct seen_slot {
		dev_t dev;
		ino_t ino;
		const char *path; /* NULL: a free slot */
	} *v;
	size_t n, cap;
};

static size_t seen_hash(dev_t dev, ino_t ino)
{
	uint64_t x = (uint64_t)ino * 0x9e3779b97f4a7c15ULL ^ (uint64_t)dev;

	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ULL;
	return (size_t)(x ^ (x >> 29));
}

/* The slot of (@dev, @ino) in @s, the one it would take if new; NULL if
 * out of memory. */
static struct seen_slot *seen_at(struct seen *s, dev_t dev, ino_t ino)
{
	if (2 * (s->n + 1) > s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 1024;
		struct seen_slot *v = calloc(cap, sizeof *v);
		if (!v)
			return NULL;
		for (size_t i = 0; i < s->cap; i++) {
			if (!s->v[i].path)
				continue;
			size_t h = seen_hash(s->v[i].dev, s->v[i].ino);
			while (v[h & (cap - 1)].path)
				h++;
			v[h & (cap - 1)] = s->v[i];
		}
		free(s->v);
		s->v = v;
		s->cap = cap;
	}
	for (size_t h = seen_hash(dev, ino);; h++) {
		struct seen_slot *x = &s->v[h & (s->cap - 1)];
		if (!x->path || (x->dev == dev && x->ino == ino))
			return x;
	}
}

/* dir: every regular file under SRC, in byte-wise order of their paths;
 * the field takes their extension (see choose_ext). A file seen again by
 * another name (a hard link) is kept as a hard link of the tree to the
 * first name, not as a record of its own (with names kept; not with a
 * label option, as each name is a sample of its directory's class). */
int plan_dir(struct import *im)
{
	struct plan *p = &im->p;
	struct strs *files = &im->files, *classes = &im->classes;
	const char *src = im->pos[0];
	size_t srclen = strlen(src);
	bool labels = im->o.label_field != NULL;
	struct exts exts = {0};
	uint64_t hidden = 0; /* files under a dot name that take a class */
	const char *first_hidden = NULL;
	struct seen seen = {0};
	size_t kept = 0, copies = 0; /* hard links kept as files: the tree full */
	int rc = -1;

	struct walk w = {.top = srclen + 1, .follow = im->o.follow_links, .hidden = im->o.hidden,
			 .files = files, .tree = im->o.names ? &im->tree : NULL, .err = p->err,
			 .errlen = sizeof p->err};

	struct stat top;

	/* SRC itself is the tree's top: "." */
	if (w.tree &&
	    (stat(src, &top) < 0 ||
	     (S_ISDIR(top.st_mode) && tree_list_add(w.tree, ".", &top, NULL, true) == -1))) {
		snprintf(p->err, sizeof p->err, "%s: %s", src, strerror(errno));
		return -1;
	}
	if (walk(&w, src) < 0 || tree_list_fit(&im->tree, p->err, sizeof p->err) < 0)
		return -1;
	warn_skipped(&w.k);
	p->nofollow = !im->o.follow_links;
	qsort(files->v, files->n, sizeof *files->v, cmp_str);
	if (labels && find_classes(files, srclen + 1, im->o.label_top, classes, p->err,
				   sizeof p->err) < 0)
		return -1;
	if (!(im->mtimes = malloc((files->n ? files->n : 1) * sizeof *im->mtimes)) ||
	    !(im->modes = malloc((files->n ? files->n : 1) * sizeof *im->modes)) ||
	    !(im->atimes = malloc((files->n ? files->n : 1) * sizeof *im->atimes)) ||
	    !(im->owners = malloc((files->n ? files->n : 1) * 2 * sizeof *im->owners)))
		return -1;
	bool hard = w.tree && !labels && !im->o.follow_links;
	size_t i = 0;
	for (; i < files->n; i++, kept++) {
		const char *rel = files->v[i] + srclen + 1;
		const char *e = extension(rel);
		struct stat st;
		int64_t label = 0;
		if (labels) {
			size_t len = 0;
			char name[PATH_MAX];
			const char *c = class_of(rel, im->o.label_top, &len), *key = name;
			snprintf(name, sizeof name, "%.*s", (int)len, c ? c : "");
			char **hit = bsearch(&key, classes->v, classes->n, sizeof *classes->v, cmp_str);
			label = hit ? (int64_t)(hit - classes->v) : 0;
			if (rel[0] == '.' || strstr(rel, "/.")) {
				first_hidden = first_hidden ? first_hidden : files->v[i];
				hidden++;
			}
		}
		if (stat(files->v[i], &st) < 0) {
			snprintf(p->err, sizeof p->err, "%s: %s", files->v[i], strerror(errno));
			goto out;
		}
		if ((uint64_t)st.st_size > ZR_RECORD_MAX) {
			snprintf(p->err, sizeof p->err, "%s: %lld bytes, more than a record holds",
				 files->v[i], (long long)st.st_size);
			goto out;
		}
		struct seen_slot *x = hard && st.st_nlink > 1 ? seen_at(&seen, st.st_dev, st.st_ino)
							       : NULL;
		if (hard && st.st_nlink > 1 && !x)
			goto out; /* out of memory */
		copies += x && x->path && im->tree.n >= ZR_TREE_MAX;
		if (x && x->path && im->tree.n < ZR_TREE_MAX) {
			/* another name of a file kept: a hard link to its first */
			struct stat as = {.st_mode = S_IFREG, .st_mtim = st.st_mtim,
					  .st_atim = st.st_atim};
			int added = tree_list_add(&im->tree, rel, &as, x->path + srclen + 1, false);
			if (added == -1)
				goto out;
			if (added == 0) {
				free(files->v[i]);
				kept--;
				continue;
			}
		} else if (x && !x->path) {
			*x = (struct seen_slot){st.st_dev, st.st_ino, files->v[i]};
			seen.n++;
		}
		files->v[kept] = files->v[i];
		im->mtimes[kept] = zr_time_ns(st.st_mtim);
		im->mtime_width = 1;
		im->atimes[kept] = zr_time_ns(st.st_atim);
		im->modes[kept] = (uint32_t)(S_IFREG | (st.st_mode & 07777));
		im->owners[2 * kept] = (uint32_t)st.st_uid;
		im->owners[2 * kept + 1] = (uint32_t)st.st_gid;
		if (count_ext(&exts, e) < 0)
			goto out;
		if (plan_add(p, files->v[kept], 0, (uint64_t)st.st_size, &label) < 0)
			goto out;
	}
	files->n = kept;
	/* an image folder's .DS_Store or ._x.png would be a sample of its class */
	if (hidden)
		zr_warn("import: %llu %s under a name starting with a dot %s a class (--no-hidden "
			"skips such names); the first: %s",
			(unsigned long long)hidden, hidden == 1 ? "file" : "files",
			hidden == 1 ? "takes" : "take", first_hidden);
	if (copies)
		zr_warn("import: %zu hard link%s kept as files of their own: the tree keeps at "
			"most %d directories and links", copies, copies == 1 ? "" : "s", ZR_TREE_MAX);
	choose_ext(im, &exts);
	rc = 0;
out:
	if (rc < 0 && kept < i) { /* the paths not looked at yet after those kept */
		memmove(files->v + kept, files->v + i, (files->n - i) * sizeof *files->v);
		files->n = kept + (files->n - i);
	}
	free(exts.v);
	free(seen.v);
	return rc;
}

/* ---- tar (WebDataset shards; the scanner is tar.c) ---- */

/* Whether @shard is read through zlib: compressed, or standard input. */
static bool tar_streamed(const char *shard)
{
	size_t n = strlen(shard);

	return strcmp(shard, "-") == 0 || (n > 3 && strcmp(shard + n - 3, ".gz") == 0) ||
	       (n > 4 && strcmp(shard + n - 4, ".tgz") == 0);
}

/* The tar bytes of a streamed shard (SHARD.tar.gz, SHARD.tgz, or - for
 * standard input, compressed or not) in an unlinked temporary file in
 * $TMPDIR (default /var/tmp): its descriptor, which the writers reach as
 * /proc/self/fd/N, or -1 (the reason in @err). */
static int tar_unpack(const char *shard, char *err, size_t errlen)
{
	const char *dir = getenv("TMPDIR") && getenv("TMPDIR")[0] ? getenv("TMPDIR") : "/var/tmp";
	int in = strcmp(shard, "-") == 0 ? dup(STDIN_FILENO) : open(shard, O_RDONLY | O_CLOEXEC);
	int out = in < 0 ? -1 : open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	gzFile gz = out < 0 ? NULL : gzdopen(in, "rb");
	static char buf[1 << 16];
	uint64_t at = 0;
	int n = 0;

	if (in < 0 || out < 0 || !gz) {
		snprintf(err, errlen, "%s: %s", in < 0 ? shard : dir, strerror(errno));
		goto fail;
	}
	in = -1; /* gzclose closes it */
	while ((n = gzread(gz, buf, sizeof buf)) > 0) {
		for (int done = 0; done < n;) {
			ssize_t w = pwrite(out, buf + done, (size_t)(n - done), (off_t)at);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				snprintf(err, errlen, "%s: unpacking %s: %s", dir, shard,
					 w < 0 ? strerror(errno) : "nothing written");
				goto fail;
			}
			done += (int)w;
			at += (uint64_t)w;
		}
	}
	if (n < 0) {
		int e;
		const char *why = gzerror(gz, &e);
		snprintf(err, errlen, "%s: %s", shard, e == Z_ERRNO ? strerror(errno) : why);
		goto fail;
	}
	gzclose(gz);
	return out;
fail:
	if (gz)
		gzclose(gz);
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return -1;
}

static int tar_scan_path(struct import *im, const char *shard, char *err, size_t errlen)
{
	bool streamed = tar_streamed(shard);
	int fd = streamed ? tar_unpack(shard, err, errlen) : open(shard, O_RDONLY | O_CLOEXEC), rc;
	char *name = NULL;

	if (fd < 0) {
		if (!streamed)
			snprintf(err, errlen, "%s: %s", shard, strerror(errno));
		return -1;
	}
	if (streamed) { /* the writers open it by this name; it stays open until the end */
		if (asprintf(&name, "/proc/self/fd/%d", fd) < 0 || strs_add(&im->unpacked, name) < 0) {
			close(fd);
			return -1;
		}
		im->unpacked_fd[im->nunpacked++] = fd;
	}
	rc = zr_tar_scan(&im->t, fd, streamed ? name : shard, shard, err, errlen);
	if (!streamed)
		close(fd);
	return rc;
}

/* A .cls member's class: decimal text, blanks around it allowed. */
static bool parse_class(const char *s, size_t n, int64_t *out)
{
	char text[32], *end;

	while (n && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\r' || s[n - 1] == '\t'))
		n--;
	if (n == 0 || n >= sizeof text)
		return false;
	memcpy(text, s, n);
	text[n] = 0;
	errno = 0;
	*out = strtoll(text, &end, 10);
	return errno == 0 && *end == 0 && end != text;
}

/* The index of field "cls" of @t when every member of it is a class, with
 * each member's class in (*cls_of)[member]; -1 when there is none or one is
 * not (said, and then kept as bytes); -2 out of memory. */
static int tar_classes(const struct zr_tar *t, int64_t **cls_of)
{
	const char *open_path = NULL;
	int cls = -1, fd = -1;

	for (size_t i = 0; i < t->fields.n; i++)
		if (strcmp(t->fields.v[i], "cls") == 0)
			cls = (int)i;
	*cls_of = NULL;
	if (cls < 0)
		return -1;
	if (!(*cls_of = calloc(t->n ? t->n : 1, sizeof **cls_of)))
		return -2;
	for (size_t m = 0; m < t->n && cls >= 0; m++) {
		const struct zr_tar_member *mb = &t->m[m];
		char text[32];
		if ((int)mb->field != cls)
			continue;
		if (mb->shard != open_path) { /* members of one shard share its name */
			if (fd >= 0)
				close(fd);
			fd = open(mb->shard, O_RDONLY | O_CLOEXEC);
			open_path = mb->shard;
		}
		if (fd < 0 || mb->len >= sizeof text || mb->nsegs ||
		    pread(fd, text, mb->len, (off_t)mb->off) != (ssize_t)mb->len ||
		    !parse_class(text, mb->len, &(*cls_of)[m])) {
			zr_warn("import: sample %u has a .cls member that is not a decimal class: "
				"the field cls keeps bytes", mb->key);
			cls = -1;
		}
	}
	if (fd >= 0)
		close(fd);
	if (cls < 0) {
		free(*cls_of);
		*cls_of = NULL;
	}
	return cls;
}

/* Entries' places by their paths, then by order of arrival. */
static int by_path(const void *a, const void *b, void *entries)
{
	const zr_tree_entry *e = entries;
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	int c = strcmp(e[i].path, e[j].path);

	return c ? c : (i > j) - (i < j);
}

/* The directories and links of the shards' members into @tree: those of a
 * path that makes none (.., absolute, not UTF-8) said in one warning, of a
 * path given twice the last. 0, or -1. */
static int tar_tree(const struct zr_tar *t, struct tree_list *tree, char *err, size_t errlen)
{
	uint64_t bad = 0;
	const char *first = NULL;
	size_t n = 0;

	for (size_t i = 0; i < t->ne; i++) {
		const struct zr_tar_entry *e = &t->e[i];
		struct stat st = {.st_mode = e->mode, .st_rdev = (dev_t)e->rdev,
				  .st_mtim = zr_ns_time(e->mtime)};
		bool top = strcmp(e->path, ".") == 0;
		st.st_atim = st.st_mtim;
		int rc = (top ? S_ISDIR(e->mode) : zr_name_safe(e->path, strlen(e->path)))
				 ? tree_list_add(tree, e->path, &st, e->target, false)
				 : -2;
		if (rc == -1) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		if (rc == -2 && bad++ == 0)
			first = e->path;
	}
	if (bad)
		zr_warn("import: skipped %llu director%s or link%s whose name%s no path below the "
			"tree (.., absolute, or not UTF-8); the first: %s",
			(unsigned long long)bad, bad == 1 ? "y" : "ies", bad == 1 ? "" : "s",
			bad == 1 ? " makes" : "s make", first);
	/* of one path, the last member, as tar x leaves it */
	size_t *at = malloc((tree->n ? tree->n : 1) * sizeof *at);
	zr_tree_entry *v = malloc((tree->n ? tree->n : 1) * sizeof *v);
	if (!at || !v) {
		free(at);
		free(v);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < tree->n; i++)
		at[i] = i;
	qsort_r(at, tree->n, sizeof *at, by_path, tree->v);
	for (size_t i = 0; i < tree->n; i++) {
		const zr_tree_entry *e = &tree->v[at[i]];
		if (i + 1 < tree->n && strcmp(e->path, tree->v[at[i + 1]].path) == 0) {
			free((char *)e->path);
			free((char *)e->target);
			continue;
		}
		tree->full[n] = false;
		v[n++] = *e;
	}
	free(tree->v);
	free(at);
	tree->v = v;
	tree->n = n;
	tree->cap = n ? n : 1;
	return tree_list_fit(tree, err, errlen);
}

int plan_tar(struct import *im)
{
	struct zr_tar *t = &im->t;
	struct plan *p = &im->p;
	struct src vals[ZR_FIELDS_MAX];
	int64_t *cls_of = NULL;
	int rc = 0;

	for (int i = 0; i < im->npos - 1 && rc == 0; i++)
		rc = tar_scan_path(im, im->pos[i], p->err, sizeof p->err);
	if (rc == 0 && t->skipped)
		zr_warn("import: skipped %llu member%s not named KEY.EXT (not part of a sample); "
			"the first: %s", (unsigned long long)t->skipped, t->skipped == 1 ? "" : "s",
			t->first_skipped);
	if (rc == 0 && t->unfiled)
		zr_warn("import: skipped %llu hard link%s (not %s); the first: %s",
			(unsigned long long)t->unfiled, t->unfiled == 1 ? "" : "s",
			t->unfiled == 1 ? "a file" : "files", t->first_unfiled);
	const char *split;
	uint64_t again = rc == 0 ? zr_tar_split_keys(t, &split) : 0;
	if (again)
		zr_warn("import: the members of %llu key%s are not together (the first: %s): each "
			"run of them is a record of its own, named by the key (WebDataset keeps a "
			"sample's members together: tar --sort=name)",
			(unsigned long long)again, again == 1 ? "" : "s", split);
	if (rc == 0 && t->fields.n == 0) {
		snprintf(p->err, sizeof p->err, "%s: no members", im->pos[0]);
		rc = -1;
	}
	if (rc == 0 && im->o.names)
		rc = tar_tree(t, &im->tree, p->err, sizeof p->err);
	/* .cls members hold a sample's class as decimal text (WebDataset):
	 * when every one does, they make an i64 field "cls" (so that cls.npy
	 * and batch .npy files give the classes), the last field */
	int cls = rc == 0 ? tar_classes(t, &cls_of) : -1;
	if (cls == -2) {
		snprintf(p->err, sizeof p->err, "out of memory");
		return -1;
	}
	if (cls >= 0 && !(p->labels = malloc(sizeof *p->labels))) {
		free(cls_of);
		return -1;
	}
	p->width = (unsigned)t->fields.n - (cls >= 0);
	/* each member's time, at its field's place among the dataset's fields:
	 * the members', the class, the names and the times themselves */
	unsigned width = p->width + (cls >= 0) + 2;
	if (rc == 0 && !(im->mtimes = malloc((t->keys ? t->keys : 1) * width * sizeof *im->mtimes)))
		rc = -1;
	for (size_t i = 0; rc == 0 && i < (size_t)t->keys * width; i++)
		im->mtimes[i] = ZR_MTIME_NONE;
	for (size_t m = 0; rc == 0 && m < t->n; m++) {
		int f = (int)t->m[m].field;
		unsigned at = f == cls ? p->width : (unsigned)(f - (cls >= 0 && f > cls));
		im->mtimes[(size_t)t->m[m].key * width + at] = t->m[m].mtime;
	}
	im->mtime_width = width;
	for (size_t m = 0, k = 0; rc == 0 && k < t->keys; k++) {
		const int64_t *label = NULL;
		memset(vals, 0, sizeof vals);
		for (; m < t->n && t->m[m].key == k; m++) {
			int f = (int)t->m[m].field;
			if (f == cls)
				label = &cls_of[m];
			else
				vals[f - (cls >= 0 && f > cls)] =
					(struct src){t->m[m].shard, t->m[m].off, t->m[m].len,
						     t->segs + t->m[m].seg_at, t->m[m].nsegs};
		}
		rc = plan_add_record(p, vals, label);
	}
	im->nf = 0;
	for (unsigned i = 0; rc == 0 && i < t->fields.n; i++) {
		if ((int)i == cls)
			continue;
		zr_field_spec *f = &im->f[im->nf++];
		*f = (zr_field_spec){.name = t->fields.v[i], .dtype = ZR_BYTES,
				     .compress = im->o.compress, .ext = t->fields.v[i]};
		if (strlen(f->ext) > ZR_EXT_MAX)
			f->ext = NULL; /* a name, but too long for a file extension */
	}
	if (cls >= 0)
		im->f[im->nf++] = (zr_field_spec){.name = "cls", .dtype = ZR_I64, .fixed = 1};
	free(cls_of);
	return rc;
}
