/*
 * scratch.c - per-thread state of the threads that answer requests: a few
 * buffers that grow to the largest request seen and are reused (no
 * allocation per request or record on the hot paths), and one core reader
 * (io_uring) per thread, as a zr_reader belongs to one thread at a time.
 *
 * Everything hangs off one thread-specific key, so it is freed when the
 * thread exits: libfuse's workers and the prefetch threads exit (and are
 * joined) before the dataset is closed; the main thread frees its own with
 * zrfs_scratch_free().
 */
#include "zrfs_i.h"

#include <errno.h>
#include <stdlib.h>

struct scratch {
	void *buf[ZRFS_SCRATCH_USES];
	size_t cap[ZRFS_SCRATCH_USES];
	zr_reader *reader;
};

static _Thread_local struct scratch *tl;
static pthread_key_t key;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void scratch_destroy(void *p)
{
	struct scratch *s = p;

	if (!s)
		return;
	for (int i = 0; i < ZRFS_SCRATCH_USES; i++)
		free(s->buf[i]);
	zr_reader_close(s->reader);
	free(s);
}

static void key_init(void)
{
	pthread_key_create(&key, scratch_destroy);
}

static struct scratch *mine(void)
{
	if (!tl) {
		pthread_once(&once, key_init);
		tl = calloc(1, sizeof *tl);
		if (tl)
			pthread_setspecific(key, tl);
	}
	return tl;
}

void *zrfs_scratch(enum zrfs_scratch_use use, size_t n)
{
	struct scratch *s = mine();

	if (!s)
		return NULL;
	if (n > s->cap[use]) {
		void *b = realloc(s->buf[use], n);
		if (!b)
			return NULL;
		s->buf[use] = b;
		s->cap[use] = n;
	}
	return s->buf[use];
}

int zrfs_scratch_reader(zr_dataset *ds, zr_reader **out)
{
	struct scratch *s = mine();

	if (!s)
		return -ENOMEM;
	if (!s->reader) {
		int rc = zr_reader_open(ds, 256, &s->reader);
		if (rc < 0)
			return rc;
	}
	zr_reader_retarget(s->reader, ds); /* the handle of this request's view */
	*out = s->reader;
	return 0;
}

void zrfs_scratch_free(void)
{
	if (!tl)
		return;
	pthread_setspecific(key, NULL);
	scratch_destroy(tl);
	tl = NULL;
}
