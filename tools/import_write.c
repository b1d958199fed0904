/*
 * import_write.c - zr import's plan (where each record's bytes come from,
 * as the planners of import_sources.c list them) and the 1..4 writer
 * threads that fill the ids it reserved, each appending to its own chunk,
 * with the progress they make.
 *
 * Sections: the plan, writers and progress.
 */
#include "import_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the plan ---- */

/* Add a record of p->width values (and if the plan has labels, *@label,
 * or a missing label for NULL). */
int plan_add_record(struct plan *p, const struct src *vals, const int64_t *label)
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

int plan_add(struct plan *p, const char *path, uint64_t off, uint64_t len,
		    const int64_t *label)
{
	struct src v = {path, off, len, NULL, 0};

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

/* @n bytes at @off of @fd into @buf: how many there were. */
static uint64_t read_at(int fd, uint8_t *buf, uint64_t n, uint64_t off)
{
	uint64_t got = 0;

	while (got < n) {
		ssize_t r = pread(fd, buf + got, n - got, (off_t)(off + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (uint64_t)r;
	}
	return got;
}

/* Value @s from @fd into @buf: whether all of it was there. A sparse one
 * is its segments' data, stored one after another, and zeros around them
 * (which the store leaves as holes). */
static bool read_src(int fd, const struct src *s, uint8_t *buf)
{
	uint64_t at = s->off;

	if (!s->nsegs)
		return read_at(fd, buf, s->len, s->off) == s->len;
	memset(buf, 0, s->len);
	for (uint32_t k = 0; k < s->nsegs; at += s->segs[k++].len)
		if (read_at(fd, buf + s->segs[k].off, s->segs[k].len, at) != s->segs[k].len)
			return false;
	return true;
}

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
				struct stat st;
				if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
					close(fd);
					fd = -1;
					errno = ENXIO;
				}
				if (fd >= 0)
					errno = 0;
				bool whole = fd >= 0 && read_src(fd, s, bufs[f]);
				int e = errno;
				if (fd >= 0)
					close(fd);
				if (!whole) {
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
			if (p->names)
				v[p->width + !!p->labels] =
					(zr_value){p->names[i], strlen(p->names[i])};
			if (p->mtimes)
				v[p->width + !!p->labels + 1] =
					(zr_value){&p->mtimes[i * p->mtime_width],
						   p->mtime_width * sizeof *p->mtimes};
			if (p->modes)
				v[p->width + !!p->labels + 2] = (zr_value){&p->modes[i], sizeof *p->modes};
			if (p->atimes) {
				v[p->width + !!p->labels + 3] =
					(zr_value){&p->atimes[i], sizeof *p->atimes};
				v[p->width + !!p->labels + 4] = (zr_value){&p->ctime, sizeof p->ctime};
			}
			if (p->owners)
				for (unsigned k = 0; k < 2; k++)
					v[p->width + !!p->labels + 5 + k] = (zr_value){
						&p->owners[2 * i + k], sizeof *p->owners};
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

static void progress(const struct plan *p, struct zr_progress *line, bool final)
{
	zr_progress_show(line, atomic_load(&p->done), p->n, atomic_load(&p->done_bytes), final);
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

void write_all_records(struct plan *p, zr_dataset *ds, uint64_t first, unsigned writers)
{
	struct wctx c = {.p = p, .ds = ds, .first = first};
	struct runner r = {.left = (int)writers, .c = &c};
	pthread_t th[4];
	struct zr_progress line;

	zr_progress_start(&line, "records");
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
		progress(p, &line, false);
	}
	pthread_mutex_unlock(&r.lock);
	for (unsigned i = 0; i < writers; i++)
		pthread_join(th[i], NULL);
	progress(p, &line, true);
	pthread_mutex_destroy(&r.lock);
	pthread_cond_destroy(&r.cond);
}
