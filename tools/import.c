/*
 * import.c - zr import: directory trees, .npy arrays and flat files become
 * datasets.
 *
 * Every importer first lists its records (which file, which bytes), checks
 * everything it can before writing (dtypes agree, sizes divide, names are
 * valid), creates DEST, reserves all ids at once and lets 1..4 writer
 * threads fill them, each appending to its own chunk, then commits once. On
 * any error the import stops, nothing is committed, and a DEST the import
 * created is removed again: DEST is left as it was.
 *
 * Record order is documented and reproducible: a directory's files in
 * byte-wise order of their paths relative to SRC; the rows of each .npy
 * file in order, files in the order given; a flat file from its start.
 *
 * Sections: the plan, writers and progress, one import, dir, tar, npy,
 * the planners of npy, tar and flat, the command.
 */
#include "zr_i.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

static const char help[] =
	"usage: zr import dir SRC DEST [--field NAME] [--label-from-parent FIELD]\n"
	"                     [--label-from-top FIELD] [--ext EXT] [--follow-links]\n"
	"       zr import npy FILE.npy [FILE.npy...] DEST [--field NAME]\n"
	"       zr import flat FILE DEST --record-size BYTES [--field NAME]\n"
	"       zr import tar SHARD.tar[.gz] [SHARD.tar...] DEST   (- : standard input)\n"
	"   options for all: [--compress raw|flate] [--chunk-size N] [--writers 1..4]\n"
	"\n"
	"Create the dataset DEST (which must not exist, or be empty) from:\n"
	"  dir   every regular file under SRC, one record each, in byte-wise order\n"
	"        of their paths; the field (default 'data', dtype bytes) takes the\n"
	"        files' extension (the most common one, with a warning naming the\n"
	"        others, when they differ; --ext EXT chooses, --ext '' none).\n"
	"        --label-from-parent\n"
	"        FIELD adds an i64 label per record from its class directory, the\n"
	"        file's immediate parent (SRC/train/cat/x.png: cat, as\n"
	"        torchvision's ImageFolder does); --label-from-top FIELD takes the\n"
	"        first directory under SRC instead (SRC/cat/2024/x.png: cat).\n"
	"        Classes are numbered 0.. in sorted order of their names, which\n"
	"        meta.json keeps under attrs.classes.FIELD. Symbolic links are\n"
	"        not followed (a link to /etc/shadow must not become a record):\n"
	"        they are skipped, with a warning that counts them; with\n"
	"        --follow-links one to a file is that file, and a dangling or\n"
	"        looping one is skipped. Links to directories, FIFOs, sockets and\n"
	"        devices are always skipped.\n"
	"  npy   the rows of each array, in order; dtype and row shape are kept, so\n"
	"        the mount's FIELD.npy reproduces the array.\n"
	"  flat  consecutive records of BYTES bytes (u8 of that shape); the file's\n"
	"        size must be a multiple of BYTES.\n"
	"  tar   WebDataset shards: members KEY.EXT that share a KEY (and follow each\n"
	"        other) form one record, each EXT a field of that name (dtype\n"
	"        bytes); a member a sample lacks is a missing value. Samples in the\n"
	"        order of the shards given, then of their members. .cls members\n"
	"        (a class as decimal text) make an i64 field cls when every one\n"
	"        is one (else bytes, with a warning). Members not\n"
	"        named KEY.EXT (a README) are skipped, with a warning. A shard\n"
	"        named *.gz or *.tgz is gunzipped, and - reads one from standard\n"
	"        input (compressed or not), into an unlinked file in $TMPDIR\n"
	"        (default /var/tmp) for as long as the import runs.\n"
	"\n"
	"  --compress raw|flate  how the field is stored (default raw)\n"
	"  --chunk-size N        records per chunk file (default 65536)\n"
	"  --writers N           parallel writer threads, 1..4 (default 4)\n"
	"\n"
	"A progress line (records/s, MB/s, ETA) is shown on a terminal. On any\n"
	"error nothing is committed and DEST is removed: it is left as it was.\n"
	"While it runs, DEST/import.lock says so (and a second import into DEST\n"
	"is refused); an import that was killed leaves it, and the next import\n"
	"into DEST starts over by itself.\n";

/* ---- the plan: where each record's bytes come from ---- */

/* One value: @len bytes at @off of @path; path NULL = missing. */
struct src {
	const char *path;
	uint64_t off, len;
};

/* Records of @width file values each (srcs[i * width + f]), and with
 * labels an i64 label field after them. */
struct plan {
	struct src *srcs;
	int64_t *labels;  /* --label-from-parent, a tar's .cls members, or NULL */
	bool *unlabelled; /* with labels: records whose label is missing (a tar's) */
	bool nofollow;    /* dir: a file that became a link since it was listed is refused */
	unsigned width;
	uint64_t n, cap, bytes;
	char err[PATH_MAX + 256];
	pthread_mutex_t err_lock;
	atomic_bool failed;
	atomic_ullong done, done_bytes;
};

/* Add a record of p->width values (and if the plan has labels, *@label,
 * or a missing label for NULL). */
static int plan_add_record(struct plan *p, const struct src *vals, const int64_t *label)
{
	if (p->n == p->cap) {
		uint64_t cap = p->cap ? p->cap * 2 : 1024;
		struct src *s = realloc(p->srcs, cap * p->width * sizeof *s);
		int64_t *l = p->labels ? realloc(p->labels, cap * sizeof *l) : NULL;
		bool *u = p->labels ? realloc(p->unlabelled, cap * sizeof *u) : NULL;
		if (s)
			p->srcs = s;
		if (l)
			p->labels = l;
		if (u)
			p->unlabelled = u;
		if (!s || (p->labels && (!l || !u)))
			return -ENOMEM;
		p->cap = cap;
	}
	memcpy(&p->srcs[p->n * p->width], vals, p->width * sizeof *vals);
	if (p->labels) {
		p->labels[p->n] = label ? *label : 0;
		p->unlabelled[p->n] = !label;
	}
	for (unsigned f = 0; f < p->width; f++)
		p->bytes += vals[f].len;
	p->n++;
	return 0;
}

static int plan_add(struct plan *p, const char *path, uint64_t off, uint64_t len,
		    const int64_t *label)
{
	struct src v = {path, off, len};

	return plan_add_record(p, &v, label);
}

static void plan_fail(struct plan *p, const char *fmt, const char *what, const char *why)
{
	pthread_mutex_lock(&p->err_lock);
	if (!atomic_load(&p->failed)) {
		snprintf(p->err, sizeof p->err, fmt, what, why);
		atomic_store(&p->failed, true);
	}
	pthread_mutex_unlock(&p->err_lock);
}

/* ---- writers and progress ---- */

struct wctx {
	struct plan *p;
	zr_dataset *ds;
	uint64_t first;        /* id of record 0 */
	atomic_ullong next;    /* next block of records to take */
};

#define BLOCK 64

static void *writer(void *arg)
{
	struct wctx *c = arg;
	struct plan *p = c->p;
	zr_writer *w = NULL;
	uint8_t *bufs[ZR_FIELDS_MAX] = {0};
	size_t caps[ZR_FIELDS_MAX] = {0};
	zr_value v[ZR_FIELDS_MAX];
	uint64_t b;
	int rc = zr_writer_open(c->ds, &w);

	if (rc < 0) {
		plan_fail(p, "%s: %s", zr_path(c->ds), zr_errmsg(c->ds));
		return NULL;
	}
	while (!atomic_load(&p->failed) && (b = atomic_fetch_add(&c->next, BLOCK)) < p->n) {
		for (uint64_t i = b; i < b + BLOCK && i < p->n && !atomic_load(&p->failed); i++) {
			uint64_t bytes = 0;
			int64_t label = p->labels ? p->labels[i] : 0;
			for (unsigned f = 0; f < p->width && !atomic_load(&p->failed); f++) {
				const struct src *s = &p->srcs[i * p->width + f];
				v[f] = (zr_value){NULL, 0};
				if (!s->path)
					continue; /* missing */
				if (s->len > caps[f] || !bufs[f]) {
					uint8_t *nb = realloc(bufs[f], s->len ? s->len : 1);
					if (!nb) {
						plan_fail(p, "%s: %s", s->path, "out of memory");
						break;
					}
					bufs[f] = nb;
					caps[f] = s->len ? s->len : 1;
				}
				/* not blocking on what became a FIFO since it was listed */
				int fd = open(s->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK |
							       (p->nofollow ? O_NOFOLLOW : 0));
				uint64_t got = 0;
				struct stat st;
				if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
					close(fd);
					fd = -1;
					errno = ENXIO;
				}
				while (fd >= 0 && got < s->len) {
					ssize_t r = pread(fd, bufs[f] + got, s->len - got,
							  (off_t)(s->off + got));
					if (r < 0 && errno == EINTR)
						continue;
					if (r <= 0)
						break;
					got += (uint64_t)r;
				}
				int e = errno;
				if (fd >= 0)
					close(fd);
				if (got != s->len) {
					plan_fail(p, "%s: %s", s->path,
						  fd < 0 && e == ELOOP && p->nofollow
							  ? "now a symbolic link (not followed)"
						  : fd < 0 && e == ENXIO
							  ? "no longer a regular file"
						  : fd < 0 || e ? strerror(e)
							      : "shorter than when it was listed");
					break;
				}
				v[f] = (zr_value){bufs[f], s->len};
				bytes += s->len;
			}
			if (atomic_load(&p->failed))
				break;
			if (p->labels)
				v[p->width] = p->unlabelled[i] ? (zr_value){NULL, 0}
							       : (zr_value){&label, sizeof label};
			if ((rc = zr_writer_put(w, c->first + i, v)) < 0) {
				const struct src *s = &p->srcs[i * p->width];
				plan_fail(p, "%s: %s", s->path ? s->path : zr_path(c->ds),
					  zr_errmsg(c->ds));
				break;
			}
			atomic_fetch_add(&p->done, 1);
			atomic_fetch_add(&p->done_bytes, bytes);
		}
	}
	zr_writer_close(w);
	for (unsigned f = 0; f < p->width; f++)
		free(bufs[f]);
	return NULL;
}

static void progress(const struct plan *p, double t0, bool final)
{
	double t = now_sec() - t0;
	uint64_t d = atomic_load(&p->done), db = atomic_load(&p->done_bytes);
	double rate = t > 0 ? (double)d / t : 0, eta = rate > 0 ? (double)(p->n - d) / rate : 0;

	fprintf(stderr, "\r%llu/%llu records  %.0f records/s  %.1f MB/s  ETA %.0f s   %s",
		(unsigned long long)d, (unsigned long long)p->n, rate,
		t > 0 ? (double)db / t / 1e6 : 0, eta, final ? "\n" : "");
}

struct runner {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int left;
	struct wctx *c;
};

static void *run_writer(void *arg)
{
	struct runner *r = arg;

	writer(r->c);
	pthread_mutex_lock(&r->lock);
	r->left--;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

/* Fill ids [first, first + n) with @writers threads; a progress line on a tty. */
static void write_all_records(struct plan *p, zr_dataset *ds, uint64_t first, unsigned writers)
{
	struct wctx c = {.p = p, .ds = ds, .first = first};
	struct runner r = {.left = (int)writers, .c = &c};
	pthread_t th[4];
	bool tty = isatty(2);
	double t0 = now_sec();

	atomic_init(&c.next, 0);
	pthread_mutex_init(&r.lock, NULL);
	pthread_cond_init(&r.cond, NULL);
	for (unsigned i = 0; i < writers; i++)
		pthread_create(&th[i], NULL, run_writer, &r);
	pthread_mutex_lock(&r.lock);
	while (r.left > 0) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 250000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&r.cond, &r.lock, &ts); /* wakes to redraw the line */
		if (tty)
			progress(p, t0, false);
	}
	pthread_mutex_unlock(&r.lock);
	for (unsigned i = 0; i < writers; i++)
		pthread_join(th[i], NULL);
	if (tty)
		progress(p, t0, true);
	pthread_mutex_destroy(&r.lock);
	pthread_cond_destroy(&r.cond);
}

/* ---- dir ---- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* What a walk skipped, for the warning that says so. */
struct skipped {
	uint64_t links, dangling, dirlinks, special;
	char first[PATH_MAX]; /* the first one, to name */
};

static void skip(struct skipped *k, uint64_t *what, const char *path)
{
	if (k->links + k->dangling + k->dirlinks + k->special == 0)
		snprintf(k->first, sizeof k->first, "%s", path);
	(*what)++;
}

/* Every regular file under @dir, as paths. A symbolic link is not
 * followed unless @follow: then one to a file counts as the file, and a
 * dangling one or a loop is skipped; one to a directory never is followed
 * (no loops). Sockets, devices and FIFOs are not records. What is skipped
 * is counted in @k; an entry that cannot be looked at fails the walk. */
static int walk(const char *dir, bool follow, struct strs *out, struct skipped *k, char *err,
		size_t errlen)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int rc = 0;

	if (!d) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	while (rc == 0 && (de = readdir(d))) {
		char *path;
		struct stat st;
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (asprintf(&path, "%s/%s", dir, de->d_name) < 0) {
			rc = -1;
			break;
		}
		/* the entry's type when the filesystem tells it (saves a stat per
		 * file: the plan stats every file for its size anyway) */
		if (de->d_type == DT_REG) {
			rc = strs_add(out, path) < 0 ? -1 : 0;
			continue;
		}
		if (de->d_type == DT_DIR) {
			rc = walk(path, follow, out, k, err, errlen);
		} else if (lstat(path, &st) < 0) {
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
			rc = -1;
		} else if (S_ISDIR(st.st_mode)) {
			rc = walk(path, follow, out, k, err, errlen);
		} else if (S_ISREG(st.st_mode)) {
			rc = strs_add(out, path) < 0 ? -1 : 0;
			continue;
		} else if (!S_ISLNK(st.st_mode)) {
			skip(k, &k->special, path);
		} else if (!follow) {
			skip(k, &k->links, path);
		} else if (stat(path, &st) < 0) {
			skip(k, &k->dangling, path); /* dangling, a loop, or unreadable */
		} else if (S_ISREG(st.st_mode)) {
			rc = strs_add(out, path) < 0 ? -1 : 0;
			continue;
		} else {
			skip(k, S_ISDIR(st.st_mode) ? &k->dirlinks : &k->special, path);
		}
		free(path);
	}
	closedir(d);
	return rc;
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

/* ---- one import ---- */

struct opts {
	const char *field, *label_field;
	const char *ext; /* dir: --ext, the field's extension ("": none) */
	bool label_top; /* the class is the first directory under SRC */
	bool follow_links;
	zr_compress compress;
	uint64_t chunk_size, writers, record_size;
};

/* An import: the command line, the plan, and the dataset's fields. */
struct import {
	const struct source *src;
	struct opts o;
	const char *pos[64];  /* the inputs, then DEST */
	int npos;
	struct plan p;
	zr_field_spec f[ZR_FIELDS_MAX];
	unsigned nf;
	char ext[ZR_EXT_MAX + 1];
	struct strs files, classes; /* dir: the files, the class names */
	struct zr_tar t;              /* tar: the members */
	struct strs unpacked;         /* tar: streamed shards' names, /proc/self/fd/N */
	int unpacked_fd[64];
	int nunpacked;
};

/* The class directory of @rel (a path under SRC): its immediate parent,
 * or with @top the first directory under SRC; NULL for a file directly in
 * SRC. Its name, not NUL-terminated, is *len bytes. */
static const char *class_of(const char *rel, bool top, size_t *len)
{
	const char *last = strrchr(rel, '/'), *start = rel;

	if (!last)
		return NULL;
	if (top) {
		*len = (size_t)(strchr(rel, '/') - rel);
		return rel;
	}
	for (const char *q = rel; q < last; q++)
		if (*q == '/')
			start = q + 1;
	*len = (size_t)(last - start);
	return start;
}

/* The class names of @files (under SRC, @skip bytes of prefix), sorted
 * and each once, into @classes. 0 or -1 (the reason in @err). */
static int find_classes(const struct strs *files, size_t skip, bool top, struct strs *classes,
			char *err, size_t errlen)
{
	for (size_t i = 0; i < files->n; i++) {
		size_t len;
		const char *c = class_of(files->v[i] + skip, top, &len);
		if (!c) {
			snprintf(err, errlen,
				 "%s: not in a class directory (%s wants SRC/.../CLASS/FILE)",
				 files->v[i], top ? "--label-from-top" : "--label-from-parent");
			return -1;
		}
		if (strs_add(classes, strndup(c, len)) < 0)
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
 * one, else the most common, with a warning naming the others: a record
 * file is named ID.EXT under the mount, and by/ lists a class's images
 * only with one (a stray .DS_Store must not lose every image's). */
static void choose_ext(struct import *im, const struct exts *x)
{
	const struct ext_count *best = NULL;
	char others[512] = "";
	size_t at = 0;

	if (im->o.ext) { /* checked with the options; "" is none */
		snprintf(im->ext, sizeof im->ext, "%s", im->o.ext);
		im->f[0].ext = im->ext[0] ? im->ext : NULL;
		return;
	}
	for (size_t i = 0; i < x->n; i++)
		if (x->v[i].ext && strlen(x->v[i].ext) < sizeof im->ext &&
		    zr_name_check(x->v[i].ext) == 0 &&
		    (!best || x->v[i].n > best->n ||
		     (x->v[i].n == best->n && strcmp(x->v[i].ext, best->ext) < 0)))
			best = &x->v[i];
	if (!best)
		return;
	snprintf(im->ext, sizeof im->ext, "%s", best->ext);
	im->f[0].ext = im->ext;
	if (best->n == x->files)
		return;
	for (size_t i = 0; i < x->n && at < sizeof others; i++)
		if (&x->v[i] != best)
			at += (size_t)snprintf(others + at, sizeof others - at, "%s%s%s (%llu)",
					       at ? ", " : "", x->v[i].ext ? "." : "",
					       x->v[i].ext ? x->v[i].ext : "no extension",
					       (unsigned long long)x->v[i].n);
	zr_warn("import: the files' extensions differ: the field takes .%s (%llu of %llu files) "
		"and the others are served as ID.%s too: %s%s (--ext EXT chooses, --ext '' none)",
		best->ext, (unsigned long long)best->n, (unsigned long long)x->files, best->ext,
		others, x->n == EXTS_MAX ? ", and more" : "");
}

/* dir: every regular file under SRC, in byte-wise order of their paths;
 * the field takes their extension (see choose_ext). */
static int plan_dir(struct import *im)
{
	struct plan *p = &im->p;
	struct strs *files = &im->files, *classes = &im->classes;
	const char *src = im->pos[0];
	size_t srclen = strlen(src);
	bool labels = im->o.label_field != NULL;
	struct exts exts = {0};

	struct skipped k = {0};

	if (walk(src, im->o.follow_links, files, &k, p->err, sizeof p->err) < 0)
		return -1;
	warn_skipped(&k);
	p->nofollow = !im->o.follow_links;
	qsort(files->v, files->n, sizeof *files->v, cmp_str);
	if (labels && find_classes(files, srclen + 1, im->o.label_top, classes, p->err,
				   sizeof p->err) < 0)
		return -1;
	for (size_t i = 0; i < files->n; i++) {
		const char *rel = files->v[i] + srclen + 1;
		const char *e = extension(rel);
		struct stat st;
		int64_t label = 0;
		if (labels) {
			size_t len;
			char name[PATH_MAX];
			const char *c = class_of(rel, im->o.label_top, &len), *key = name;
			snprintf(name, sizeof name, "%.*s", (int)len, c);
			char **hit = bsearch(&key, classes->v, classes->n, sizeof *classes->v, cmp_str);
			label = hit ? (int64_t)(hit - classes->v) : 0;
		}
		if (stat(files->v[i], &st) < 0) {
			snprintf(p->err, sizeof p->err, "%s: %s", files->v[i], strerror(errno));
			return -1;
		}
		if ((uint64_t)st.st_size > ZR_RECORD_MAX) {
			snprintf(p->err, sizeof p->err, "%s: %lld bytes, more than a record holds",
				 files->v[i], (long long)st.st_size);
			return -1;
		}
		if (count_ext(&exts, e) < 0)
			return -1;
		if (plan_add(p, files->v[i], 0, (uint64_t)st.st_size, &label) < 0)
			return -1;
	}
	choose_ext(im, &exts);
	free(exts.v);
	return 0;
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

/* ---- npy ---- */

struct npy {
	zr_field_spec spec;     /* dtype and row shape */
	uint64_t rows, row_bytes, data_off;
};

/* The header of a .npy file, checked against the file's size. */
static int npy_read(const char *path, struct npy *out, char *err, size_t errlen)
{
	char head[65536 + 12];
	struct stat st;
	ssize_t got;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = -1;

	if (fd < 0 || fstat(fd, &st) < 0 || (got = pread(fd, head, sizeof head, 0)) < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (zr_npy_parse(head, (size_t)got, &out->spec, &out->rows, &out->data_off) < 0) {
		snprintf(err, errlen, "%s: %s", path, zr_errmsg(NULL));
		goto out;
	}
	out->row_bytes = zr_dtype_size(out->spec.dtype);
	for (unsigned k = 0; k < out->spec.ndim; k++)
		out->row_bytes *= out->spec.shape[k];
	if ((uint64_t)st.st_size < out->data_off ||
	    ((uint64_t)st.st_size - out->data_off) / out->row_bytes < out->rows) {
		char need[64];
		if (out->rows > UINT64_MAX / out->row_bytes)
			snprintf(need, sizeof need, "more than 2^64");
		else
			snprintf(need, sizeof need, "%llu",
				 (unsigned long long)(out->rows * out->row_bytes));
		snprintf(err, errlen,
			 "%s: truncated: %llu rows of %llu bytes need %s bytes of data, it holds %llu",
			 path, (unsigned long long)out->rows, (unsigned long long)out->row_bytes,
			 need, (unsigned long long)((uint64_t)st.st_size > out->data_off
							    ? (uint64_t)st.st_size - out->data_off
							    : 0));
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

/* npy: the rows of each array, in order; dtype and row shape kept. */
static int plan_npy(struct import *im)
{
	struct npy first = {0}, n = {0};
	struct plan *p = &im->p;
	int rc = 0;

	for (int i = 0; i < im->npos - 1 && rc == 0; i++) {
		rc = npy_read(im->pos[i], &n, p->err, sizeof p->err);
		if (rc == 0 && i > 0 &&
		    (n.spec.dtype != first.spec.dtype || n.spec.ndim != first.spec.ndim ||
		     memcmp(n.spec.shape, first.spec.shape, n.spec.ndim * sizeof *n.spec.shape) != 0)) {
			snprintf(p->err, sizeof p->err, "%s: dtype or row shape differs from %s's",
				 im->pos[i], im->pos[0]);
			rc = -1;
		}
		if (i == 0)
			first = n;
		for (uint64_t r = 0; rc == 0 && r < n.rows; r++)
			rc = plan_add(p, im->pos[i], n.data_off + r * n.row_bytes, n.row_bytes, NULL);
	}
	if (rc == 0) { /* first is only set when its header was read */
		first.spec.name = im->f[0].name;
		first.spec.compress = im->f[0].compress;
		im->f[0] = first.spec;
	}
	return rc;
}

/* tar: one record per sample, one field per extension. */
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
		if (fd < 0 || mb->len >= sizeof text ||
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

static int plan_tar(struct import *im)
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
	if (rc == 0 && t->fields.n == 0) {
		snprintf(p->err, sizeof p->err, "%s: no members", im->pos[0]);
		rc = -1;
	}
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
	for (size_t m = 0, k = 0; rc == 0 && k < t->keys; k++) {
		const int64_t *label = NULL;
		memset(vals, 0, sizeof vals);
		for (; m < t->n && t->m[m].key == k; m++) {
			int f = (int)t->m[m].field;
			if (f == cls)
				label = &cls_of[m];
			else
				vals[f - (cls >= 0 && f > cls)] =
					(struct src){t->m[m].shard, t->m[m].off, t->m[m].len};
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

/* flat: consecutive records of --record-size bytes, u8 of that shape. */
static int plan_flat(struct import *im)
{
	struct plan *p = &im->p;
	uint64_t rsz = im->o.record_size;
	struct stat st;
	int rc = 0;

	int e = stat(im->pos[0], &st) < 0 ? errno : 0;

	if (e || !S_ISREG(st.st_mode)) {
		snprintf(p->err, sizeof p->err, "%s: %s", im->pos[0],
			 e ? strerror(e) : "not a regular file");
		return -1;
	}
	if ((uint64_t)st.st_size % rsz) {
		snprintf(p->err, sizeof p->err,
			 "%s: %lld bytes is not a multiple of the record size %llu (%llu left over)",
			 im->pos[0], (long long)st.st_size, (unsigned long long)rsz,
			 (unsigned long long)((uint64_t)st.st_size % rsz));
		return -1;
	}
	for (uint64_t off = 0; rc == 0 && off < (uint64_t)st.st_size; off += rsz)
		rc = plan_add(p, im->pos[0], off, rsz, NULL);
	im->f[0].dtype = ZR_U8;
	im->f[0].fixed = 1;
	im->f[0].ndim = 1;
	im->f[0].shape[0] = rsz;
	return rc;
}

/* ---- the command ---- */

static const struct source {
	const char *kind;
	int (*plan)(struct import *im);
	const char *args;     /* the positional arguments, for messages */
	bool many;            /* takes several inputs */
} sources[] = {
	{"dir", plan_dir, "SRC DEST", false},
	{"npy", plan_npy, "FILE.npy... DEST", true},
	{"flat", plan_flat, "FILE DEST --record-size BYTES", false},
	{"tar", plan_tar, "SHARD.tar... DEST", true},
};

/* The options and positional arguments after KIND: -1 when they are good,
 * else the exit status (the message printed). */
static int parse_args(struct import *im, int argc, char **argv)
{
	struct opts *o = &im->o;
	const char *kind = im->src->kind;

	for (int i = 2; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
		if (is_help(a)) {
			fputs(help, stdout);
			return 0;
		}
		if (a[0] != '-' || strcmp(a, "-") == 0) {
			if (im->npos == (int)(sizeof im->pos / sizeof *im->pos)) {
				zr_warn("import: too many files");
				return EXIT_USAGE;
			}
			im->pos[im->npos++] = a;
			continue;
		}
		if (strcmp(a, "--follow-links") == 0 && im->src->plan == plan_dir) {
			o->follow_links = true;
			continue;
		}
		if (!val) {
			zr_warn("import: '%s' needs a value or is unknown", a);
			return EXIT_USAGE;
		}
		i++;
		if (strcmp(a, "--field") == 0) {
			o->field = val;
		} else if ((strcmp(a, "--label-from-parent") == 0 ||
			    strcmp(a, "--label-from-top") == 0) && im->src->plan == plan_dir) {
			o->label_field = val;
			o->label_top = strcmp(a, "--label-from-top") == 0;
		} else if (strcmp(a, "--ext") == 0 && im->src->plan == plan_dir) {
			if (val[0] && (strlen(val) > ZR_EXT_MAX || zr_name_check(val) < 0)) {
				zr_warn("import: --ext %s: not an extension (%s)", val,
					val[0] && strlen(val) > ZR_EXT_MAX ? "too long" : zr_errmsg(NULL));
				return EXIT_USAGE;
			}
			o->ext = val;
		} else if (strcmp(a, "--compress") == 0) {
			if (zr_compress_parse(val, &o->compress) < 0) {
				zr_warn("import: --compress: %s", zr_errmsg(NULL));
				return EXIT_USAGE;
			}
		} else if (strcmp(a, "--chunk-size") == 0) {
			if (parse_u64(val, 1, UINT32_MAX, a, &o->chunk_size) < 0)
				return EXIT_USAGE;
		} else if (strcmp(a, "--writers") == 0) {
			if (parse_u64(val, 1, 4, a, &o->writers) < 0)
				return EXIT_USAGE;
		} else if (strcmp(a, "--record-size") == 0 && im->src->plan == plan_flat) {
			if (parse_size(val, ZR_RECORD_MAX, a, &o->record_size) < 0 ||
			    o->record_size == 0)
				return EXIT_USAGE;
		} else {
			zr_warn("import %s: unknown option '%s' (see 'zr import --help')", kind, a);
			return EXIT_USAGE;
		}
	}
	if (im->npos < 2 || (!im->src->many && im->npos != 2) ||
	    (im->src->plan == plan_flat && o->record_size == 0)) {
		zr_warn("import %s: expected %s (see 'zr import --help')", kind, im->src->args);
		return EXIT_USAGE;
	}
	if (zr_name_check(o->field) < 0 || (o->label_field && zr_name_check(o->label_field) < 0)) {
		zr_warn("import: %s", zr_errmsg(NULL));
		return EXIT_USAGE;
	}
	if (o->label_field && strcmp(o->label_field, o->field) == 0) {
		zr_warn("import: the label field needs a name of its own");
		return EXIT_USAGE;
	}
	return -1;
}

/* {"classes": {"FIELD": ["a", "b", ...]}}: the class names of the labels,
 * kept in meta.json; NULL if out of memory. */
static char *class_attrs(const char *field, const struct strs *classes)
{
	json_t *names = json_array(), *root;
	char *text;

	for (size_t i = 0; names && i < classes->n; i++)
		if (json_array_append_new(names, json_string(classes->v[i])) < 0) {
			json_decref(names);
			return NULL;
		}
	root = json_pack("{s:{s:o}}", "classes", field, names);
	text = root ? json_dumps(root, JSON_COMPACT) : NULL;
	json_decref(root);
	return text;
}

/* ---- DEST ----
 *
 * An import claims DEST with DEST/import.lock (ZR_IMPORT_LOCK), made in an
 * empty directory before anything else and locked for as long as the
 * import runs; it goes once every record is committed, and last when a
 * failed import removes what it made. So a killed import leaves DEST
 * missing, empty, or holding an unlocked import.lock: the next import
 * into DEST then clears what the killed one made and starts over. */

/* Whether @name (in chunk/ if @in_chunk) is a file an import makes. */
static bool made_by_import(const char *name, bool in_chunk)
{
	static const char *const fixed[] = {"meta.json", "meta.json.tmp", "readers", "writer",
					    "changes", "changes.tmp", "journal"};
	size_t n = strlen(name);

	if (in_chunk)
		return n > 3 && strcmp(name + n - 3, ".zr") == 0;
	for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
		if (strcmp(name, fixed[i]) == 0)
			return true;
	return strncmp(name, "journal.", 8) == 0 ||
	       (n > 7 && strcmp(name + n - 7, ".offset") == 0) ||
	       (n > 11 && strcmp(name + n - 11, ".offset.new") == 0);
}

/* Remove what an import made in the directory @dfd (chunk/ and its
 * chunks included), but not its lock: 0, or -1 with the reason in @err
 * (an entry no import makes is left, and named). */
static int clear_made(int dfd, bool in_chunk, char *err, size_t errlen)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	int rc = 0;

	if (!d) {
		snprintf(err, errlen, "%s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while (rc == 0 && (de = readdir(d))) {
		const char *name = de->d_name;
		if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 ||
		    (!in_chunk && strcmp(name, ZR_IMPORT_LOCK) == 0))
			continue;
		if (!in_chunk && strcmp(name, "chunk") == 0) {
			int cfd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			rc = cfd < 0 ? -1 : clear_made(cfd, true, err, errlen);
			if (cfd >= 0)
				close(cfd);
			if (cfd < 0)
				snprintf(err, errlen, "chunk: %s", strerror(errno));
			else if (rc == 0 && unlinkat(dfd, name, AT_REMOVEDIR) < 0)
				rc = -1, snprintf(err, errlen, "chunk: %s", strerror(errno));
		} else if (!made_by_import(name, in_chunk)) {
			snprintf(err, errlen, "it also holds %s%s, which no import makes",
				 in_chunk ? "chunk/" : "", name);
			rc = -1;
		} else if (unlinkat(dfd, name, 0) < 0) {
			snprintf(err, errlen, "%s%s: %s", in_chunk ? "chunk/" : "", name,
				 strerror(errno));
			rc = -1;
		}
	}
	closedir(d);
	return rc;
}

/* Claim @dest for an import: its directory in @dfd and its lock in
 * @lockfd; 0, or -1 (the message printed). */
static int claim_dest(const char *dest, int *dfd, int *lockfd)
{
	char err[PATH_MAX + 64];
	struct dirent *de;
	bool empty = true, found;
	struct stat st;
	DIR *d;

	*dfd = *lockfd = -1;
	if (mkdir(dest, 0755) < 0 && errno != EEXIST) {
		zr_warn("import: %s: cannot create: %s", dest, strerror(errno));
		return -1;
	}
	if ((*dfd = open(dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    !(d = fdopendir(dup(*dfd)))) {
		zr_warn("import: %s: %s", dest, strerror(errno));
		return -1;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
		    strcmp(de->d_name, ZR_IMPORT_LOCK) != 0)
			empty = false;
	closedir(d);
	found = fstatat(*dfd, ZR_IMPORT_LOCK, &st, AT_SYMLINK_NOFOLLOW) == 0;
	if (!found && !empty) {
		zr_warn("import: %s: exists and is not empty", dest);
		return -1;
	}
	*lockfd = openat(*dfd, ZR_IMPORT_LOCK,
			 O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | (found ? 0 : O_CREAT | O_EXCL),
			 0644);
	if (*lockfd < 0 && errno == EEXIST) {
		zr_warn("import: %s: another import into it has just begun", dest);
		return -1;
	}
	if (*lockfd < 0 || fstat(*lockfd, &st) < 0 || !S_ISREG(st.st_mode)) {
		zr_warn("import: %s/%s: %s", dest, ZR_IMPORT_LOCK,
			*lockfd < 0 ? strerror(errno) : "not a regular file");
		return -1;
	}
	if (flock(*lockfd, LOCK_EX | LOCK_NB) < 0) {
		zr_warn("import: %s: %s", dest,
			errno == EWOULDBLOCK ? "another import into it is running"
					     : strerror(errno));
		return -1;
	}
	if (found && !empty) {
		zr_warn("import: %s: an import into it did not finish (killed?): starting over",
			dest);
		if (clear_made(*dfd, false, err, sizeof err) < 0) {
			zr_warn("import: %s: %s: remove it (rm -r %s) and import again", dest, err,
				dest);
			return -1;
		}
	}
	return 0;
}

/* The import's end: on @success the lock goes (the dataset is whole),
 * else what it made goes, the lock last, and DEST too. */
static void release_dest(const char *dest, int dfd, int lockfd, bool success)
{
	char err[PATH_MAX + 64];

	if (dfd >= 0 && lockfd >= 0) {
		if (success || clear_made(dfd, false, err, sizeof err) == 0) {
			unlinkat(dfd, ZR_IMPORT_LOCK, 0);
			fsync(dfd);
		}
		if (!success)
			rmdir(dest);
	}
	if (lockfd >= 0)
		close(lockfd);
	if (dfd >= 0)
		close(dfd);
}

/* Create DEST with the planned fields and write every record: the exit
 * status, DEST removed again on failure. */
static int write_dataset(struct import *im, const char *dest, const char *attrs)
{
	zr_dataset *ds = NULL;
	uint64_t first;
	int dfd, lockfd, rc;

	if (claim_dest(dest, &dfd, &lockfd) < 0) {
		/* nothing goes: DEST is another's, or says what to do */
		release_dest(dest, -1, lockfd, false);
		if (dfd >= 0)
			close(dfd);
		return 1;
	}
	rc = zr_create(dest, im->f, im->nf,
		       &(zr_create_opts){.chunk_size = (uint32_t)im->o.chunk_size, .attrs = attrs});
	if (rc < 0) {
		zr_warn("import: %s", zr_errmsg(NULL));
		release_dest(dest, dfd, lockfd, false);
		return rc == ZR_EINVAL_SPEC ? EXIT_USAGE : 1;
	}
	if ((rc = zr_open(&ds, dest, ZR_RDWR)) < 0 || (rc = zr_reserve(ds, im->p.n, &first)) < 0) {
		zr_warn("import: %s", zr_errmsg(ds));
	} else {
		write_all_records(&im->p, ds, first, (unsigned)im->o.writers);
		if (atomic_load(&im->p.failed))
			zr_warn("import: %s", im->p.err);
		else if ((rc = zr_commit(ds)) < 0)
			zr_warn("import: %s", zr_errmsg(ds));
	}
	zr_close(ds); /* without a commit, nothing of this import stays */
	if (rc < 0 || atomic_load(&im->p.failed)) {
		release_dest(dest, dfd, lockfd, false);
		return 1;
	}
	release_dest(dest, dfd, lockfd, true);
	printf("%s: %llu records, %.1f MB\n", dest, (unsigned long long)im->p.n,
	       (double)im->p.bytes / 1e6);
	return 0;
}

int cmd_import(int argc, char **argv)
{
	struct import *im;
	char *attrs = NULL;
	int status;

	if (argc < 2 || is_help(argv[1])) {
		fputs(help, argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_USAGE : 0;
	}
	if (!(im = calloc(1, sizeof *im))) {
		zr_warn("import: out of memory");
		return 1;
	}
	for (size_t i = 0; i < sizeof sources / sizeof *sources; i++)
		if (strcmp(argv[1], sources[i].kind) == 0)
			im->src = &sources[i];
	im->o = (struct opts){.field = "data", .compress = ZR_RAW, .writers = 4};
	if (!im->src) {
		zr_warn("import: unknown source kind '%s' (dir, npy, flat, tar; see 'zr import --help')",
			argv[1]);
		status = EXIT_USAGE;
	} else {
		status = parse_args(im, argc, argv);
	}
	if (status < 0) {
		pthread_mutex_init(&im->p.err_lock, NULL);
		im->p.width = im->nf = 1;
		im->f[0] = (zr_field_spec){.name = im->o.field, .dtype = ZR_BYTES,
					   .compress = im->o.compress};
		status = 1;
		if (im->o.label_field && !(im->p.labels = malloc(sizeof *im->p.labels)))
			zr_warn("import: out of memory");
		else if (im->src->plan(im) < 0) /* everything checked before DEST is touched */
			zr_warn("import: %s", im->p.err[0] ? im->p.err : "out of memory");
		else if (im->o.label_field &&
			 !(attrs = class_attrs(im->o.label_field, &im->classes)))
			zr_warn("import: out of memory");
		else {
			if (im->o.label_field)
				im->f[im->nf++] = (zr_field_spec){.name = im->o.label_field,
								  .dtype = ZR_I64, .fixed = 1};
			status = write_dataset(im, im->pos[im->npos - 1], attrs);
		}
		pthread_mutex_destroy(&im->p.err_lock);
	}
	strs_free(&im->files);
	strs_free(&im->classes);
	zr_tar_free(&im->t);
	strs_free(&im->unpacked);
	for (int i = 0; i < im->nunpacked; i++)
		close(im->unpacked_fd[i]);
	free(im->p.srcs);
	free(im->p.labels);
	free(im->p.unlabelled);
	free(attrs);
	free(im);
	return status;
}
