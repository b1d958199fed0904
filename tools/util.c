/*
 * util.c - small helpers for the zr command: messages, number parsing, I/O.
 */
#include "zr_i.h"

#include <errno.h>
#include <ftw.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void zr_warn(const char *fmt, ...)
{
	va_list ap;

	fputs("zr: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int zr_fail(int rc, const char *what)
{
	const char *msg = zr_errmsg(NULL);

	if (msg && msg[0])
		zr_warn("%s%s%s", what ? what : "", what ? ": " : "", msg);
	else
		zr_warn("%s%s%s", what ? what : "", what ? ": " : "", zr_strerror(rc));
	return 1;
}

int zr_getopt(int argc, char **argv, const char *shorts, const struct option *opts,
	      const char *cmd)
{
	char spec[32];
	int c;

	/* a leading ':' tells a missing value ('::') from an unknown option */
	snprintf(spec, sizeof spec, ":%s", shorts);
	opterr = 0;
	c = getopt_long(argc, argv, spec, opts, NULL);
	if (c == ':')
		zr_warn("%s: option '%s' needs a value (see 'zr %s --help')", cmd, argv[optind - 1],
			cmd);
	else if (c == '?' && strncmp(argv[optind - 1], "--", 2) == 0 && optopt)
		zr_warn("%s: option '%s' takes no value (see 'zr %s --help')", cmd, argv[optind - 1],
			cmd);
	else if (c == '?' && optopt && optopt < 256)
		zr_warn("%s: unknown option '-%c' (see 'zr %s --help')", cmd, optopt, cmd);
	else if (c == '?')
		zr_warn("%s: unknown option '%s' (see 'zr %s --help')", cmd, argv[optind - 1], cmd);
	return c == ':' ? '?' : c;
}

int zr_no_options(int argc, char **argv, const char *cmd, const char *help)
{
	static const struct option opts[] = {ZR_OPT_HELP, ZR_OPT_END};
	int c = zr_getopt(argc, argv, "h", opts, cmd);

	if (c == 'h')
		fputs(help, stdout);
	return c == -1 ? -1 : c == 'h' ? 0 : EXIT_USAGE;
}

bool zr_operands(int argc, const char *cmd, int min, int max, const char *what)
{
	int n = argc - optind;

	if (n >= min && (max < 0 || n <= max))
		return true;
	zr_warn("%s: expected %s (see 'zr %s --help')", cmd, what, cmd);
	return false;
}

int parse_u64(const char *s, uint64_t lo, uint64_t hi, const char *what, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
		goto bad;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		goto bad;
	*out = v;
	return 0;
bad:
	zr_warn("%s: '%s' is not a number in %llu..%llu", what, s ? s : "",
		(unsigned long long)lo, (unsigned long long)hi);
	return -1;
}

int parse_size(const char *s, uint64_t hi, const char *what, uint64_t *out)
{
	char buf[32];
	size_t n = s ? strlen(s) : 0;
	unsigned shift = 0;

	if (n > 0 && n < sizeof buf) {
		memcpy(buf, s, n + 1);
		switch (buf[n - 1]) {
		case 'k': case 'K': shift = 10; break;
		case 'm': case 'M': shift = 20; break;
		case 'g': case 'G': shift = 30; break;
		}
		if (shift)
			buf[n - 1] = 0;
		if (parse_u64(buf, 0, hi >> shift, what, out) == 0) {
			*out <<= shift;
			return 0;
		}
		return -1;
	}
	return parse_u64(s, 0, hi, what, out);
}

bool is_help(const char *arg)
{
	return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

int read_file(const char *what, const char *path, void **buf, size_t *len)
{
	int fd = strcmp(path, "-") == 0 ? 0 : open(path, O_RDONLY | O_CLOEXEC);
	size_t cap = 1 << 16, n = 0;
	char *p;

	if (fd < 0) {
		zr_warn("%s: %s: %s", what, path, strerror(errno));
		return -1;
	}
	p = malloc(cap);
	for (;;) {
		ssize_t r;
		if (!p) {
			zr_warn("%s: %s: out of memory", what, path);
			break;
		}
		if (n == cap) {
			char *q = realloc(p, cap *= 2);
			if (!q) {
				free(p);
				p = NULL;
				continue;
			}
			p = q;
		}
		r = read(fd, p + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			zr_warn("%s: %s: read failed: %s", what, path, strerror(errno));
			free(p);
			p = NULL;
			break;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (fd > 0)
		close(fd);
	if (!p)
		return -1;
	*buf = p;
	*len = n;
	return 0;
}

int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

double now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)flag, (void)f;
	return remove(p);
}

void rm_tree(const char *path)
{
	nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int grow(void *v, size_t *cap, size_t n, size_t size, size_t first)
{
	void **at = v;

	if (n < *cap)
		return 0;
	size_t want = *cap ? *cap * 2 : first;
	void *p = realloc(*at, want * size);
	if (!p)
		return -ENOMEM;
	*at = p;
	*cap = want;
	return 0;
}

int strs_add(struct strs *s, char *x)
{
	if (!x)
		return -ENOMEM;
	if (grow(&s->v, &s->cap, s->n, sizeof *s->v, 256) < 0) {
		free(x);
		return -ENOMEM;
	}
	s->v[s->n++] = x;
	return 0;
}

void strs_free(struct strs *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	memset(s, 0, sizeof *s);
}

int zr_open_writer(zr_dataset **ds, const char *dir, unsigned flags, const char *what)
{
	int rc = zr_open(ds, dir, flags);
	long pid;

	if (rc != -EBUSY || !(flags & ZR_RDWR) || !(pid = zr_holder_ending(dir)))
		return rc;
	zr_warn("%s: %s: waiting for pid %ld, a writer of it that is ending, to commit and exit",
		what, dir, pid);
	return zr_open(ds, dir, flags | ZR_WAIT);
}

int zr_open_field(const char *what, const char *dir, const char *field, zr_dataset **ds)
{
	int rc = zr_open(ds, dir, ZR_RDONLY | ZR_CHECK), f;

	if (rc < 0)
		return zr_fail(rc, what) ? -1 : -1;
	f = zr_field_find(*ds, field);
	if (f < 0) {
		zr_fail(f, what);
		zr_close(*ds);
		*ds = NULL;
	}
	return f;
}

void zr_record_file_name(zr_dataset *ds, const zr_names *n, unsigned f, uint64_t id, char *buf,
			 size_t cap)
{
	static char name[PATH_MAX + 1];
	const char *ext = zr_field(ds, f)->ext;
	int len = ext ? (int)strlen(ext) : 0;
	int64_t got = n && n->files == (int)f ? zr_name_load(ds, n, id, name, sizeof name) : 0;

	/* its name's own extension, as the mount shows it: where the name
	 * makes a file (a mount's tree/ holds only those) */
	if (got > 0 && zr_name_safe(name, (size_t)got) &&
	    (got = zr_names_ext(n, f, name, (size_t)got, &ext)) >= 0)
		len = (int)got;
	if (len)
		snprintf(buf, cap, "%llu.%.*s", (unsigned long long)id, len, ext);
	else
		snprintf(buf, cap, "%llu", (unsigned long long)id);
}

void zr_json_put(json_t *j, const char *after)
{
	char *text = j ? json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_ENCODE_ANY) : NULL;

	fputs(text ? text : "null", stdout);
	fputs(after, stdout);
	free(text);
	json_decref(j);
}

void zr_progress_start(struct zr_progress *p, const char *unit)
{
	*p = (struct zr_progress){unit, now_sec(), 0, isatty(STDERR_FILENO) == 1};
}

void zr_progress_show(struct zr_progress *p, uint64_t done, uint64_t total, uint64_t bytes,
		      bool final)
{
	double now = now_sec(), t = now - p->t0;
	double rate = t > 0 ? (double)done / t : 0;
	double eta = rate > 0 && total > done ? (double)(total - done) / rate : 0;
	char mbs[32] = "";

	if (!p->tty || (!final && now - p->drawn < 0.2))
		return;
	p->drawn = now;
	if (bytes)
		snprintf(mbs, sizeof mbs, "  %.1f MB/s", t > 0 ? (double)bytes / t / 1e6 : 0);
	fprintf(stderr, "\r%llu/%llu %s  %.0f %s/s%s  ETA %.0f s   %s", (unsigned long long)done,
		(unsigned long long)total, p->unit, rate, p->unit, mbs, eta, final ? "\n" : "");
}

void zr_progress_clear(struct zr_progress *p)
{
	if (p->tty) {
		fputs("\r\033[K", stderr);
		p->drawn = 0; /* drawn again at once */
	}
}

void zr_progress_cb_show(void *ctx, uint64_t done, uint64_t total)
{
	zr_progress_show(ctx, done, total, 0, done == total);
}

json_t *zr_json_text(const char *s)
{
	json_t *j = json_string(s);
	char *copy;

	if (j || !(copy = strdup(s)))
		return j;
	for (char *p = copy; *p; p++)
		if ((unsigned char)*p >= 0x80)
			*p = '?'; /* lossy, and only where the bytes are no text */
	j = json_string(copy);
	free(copy);
	return j;
}

json_t *zr_attrs_json(const zr_dataset *ds)
{
	char *text = zr_attrs(ds);
	json_t *root = text ? json_loads(text, 0, NULL) : NULL;

	free(text);
	return root;
}
