/*
 * Description: chunk files (core/chunk.c): opened on first use, held open
 * in a bounded set, closed again least recently used first, never while a
 * batch or a read uses them. A dataset of more chunks than the process may
 * open files opens without a system call per chunk, reads byte-exact, takes
 * appends and rebalances; a reader of a rebalanced state keeps its chunks.
 */
#include "helpers.h"
#include "store_i.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>

#define MAX 200 /* largest record */

static void chunk_setup(void)
{
	t_setup();
	zr_chunks_open_max = 0;
}

TestSuite(chunk, .init = chunk_setup, .fini = t_cleanup);

/* A committed dataset of @n records, one chunk each. */
static void build(uint64_t n, zr_compress c)
{
	t_create1(t_ds, c, 1);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	t_append_range(ds, 7, 0, n, MAX);
	cr_assert_eq(zr_commit(ds), 0, "%s", zr_errmsg(ds));
	zr_close(ds);
}

static void limit_files(rlim_t n)
{
	struct rlimit rl;
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	rl.rlim_cur = n;
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
}

static _Atomic unsigned opens;
static int (*real_openat)(int, const char *, int, mode_t);

static int counting_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	atomic_fetch_add(&opens, 1);
	return real_openat(dirfd, path, flags, mode);
}

Test(chunk, open_costs_no_system_call_per_chunk)
{
	build(600, ZR_RAW);
	real_openat = zr_sys.openat;
	zr_sys.openat = counting_openat;
	atomic_store(&opens, 0);
	zr_dataset *ds = t_open(t_ds, ZR_RDONLY);
	unsigned at_open = atomic_load(&opens);
	t_check_range(ds, 7, 0, 600, MAX);
	zr_close(ds);
	zr_sys_reset();
	cr_assert_leq(at_open, 8, "opening 600 chunks made %u openat calls", at_open);
	cr_assert_geq(atomic_load(&opens), 600 - 2, "the chunks were read: opened then");
}

Test(chunk, more_chunks_than_descriptors, .timeout = T_TIMEOUT(60))
{
	build(2000, ZR_RAW);
	limit_files(64); /* 2000 chunks, 64 descriptors: the pool keeps 32 */
	zr_dataset *ds = t_open(t_ds, ZR_RDONLY);
	/* in a scattered order, so chunks are closed and opened again */
	for (uint64_t k = 0; k < 6000; k++) {
		uint64_t id = t_mix(k) % 2000;
		t_check_range(ds, 7, id, id + 1, MAX);
	}
	cr_assert_leq(zr_chunks_open(), 32, "%u chunks open", zr_chunks_open());
	cr_assert_eq(zr_verify(ds, NULL, NULL), 0, "%s", zr_errmsg(ds));
	zr_close(ds);
	cr_assert_eq(zr_chunks_open(), 0, "closing the handle closes its chunks");
}

Test(chunk, a_batch_keeps_its_chunks_open)
{
	build(300, ZR_RAW);
	zr_chunks_open_max = 4;
	zr_dataset *ds = t_open(t_ds, ZR_RDONLY);
	uint64_t ids[40];
	for (int i = 0; i < 40; i++)
		ids[i] = (uint64_t)i * 7;
	zr_batch *b;
	cr_assert_eq(zr_gather(ds, 0, ids, 40, &b), 0, "%s", zr_errmsg(ds));
	cr_assert_geq(zr_chunks_open(), 40, "a batch's chunks stay open past the bound");
	/* other reads meanwhile close what they can, never the batch's */
	for (uint64_t id = 1; id < 300; id += 3)
		t_check_range(ds, 7, id, id + 1, MAX);
	size_t n;
	const zr_slice *s = zr_batch_records(b, &n);
	for (int i = 0; i < 40; i++)
		cr_assert(t_check(s[i].data, s[i].len, 7, ids[i]), "record %llu changed",
			  (unsigned long long)ids[i]);
	zr_batch_release(b);
	t_check_range(ds, 7, 0, 10, MAX);
	cr_assert_leq(zr_chunks_open(), 4, "%u open after the release", zr_chunks_open());
	zr_close(ds);
}

Test(chunk, a_batch_may_outlive_its_handle)
{
	build(50, ZR_RAW);
	zr_chunks_open_max = 4;
	zr_dataset *ds = t_open(t_ds, ZR_RDONLY);
	uint64_t ids[] = {3, 30, 49};
	zr_batch *b;
	cr_assert_eq(zr_gather(ds, 0, ids, 3, &b), 0, "%s", zr_errmsg(ds));
	zr_close(ds);
	zr_batch_release(b); /* frees the chunks the handle left to it */
	cr_assert_eq(zr_chunks_open(), 0);
}

struct reader_arg {
	zr_dataset *ds;
	uint64_t seed;
	int bad;
};

static void *read_scattered(void *p)
{
	struct reader_arg *a = p;
	zr_reader *r;
	uint8_t *buf = malloc(8 * MAX);

	if (zr_reader_open(a->ds, 0, &r) < 0)
		a->bad++;
	for (uint64_t k = 0; k < 4000 && !a->bad; k++) {
		uint64_t id = t_mix(a->seed + k) % 1000, ids[4], offs[5];
		zr_batch *b;
		size_t n;
		/* a gather (pointers into chunks), a copying read, a stat */
		if (zr_gather(a->ds, 0, &id, 1, &b) < 0) {
			a->bad++;
			break;
		}
		const zr_slice *s = zr_batch_records(b, &n);
		a->bad += !t_check(s[0].data, s[0].len, 7, id);
		for (int i = 0; i < 4; i++)
			ids[i] = (id + (uint64_t)i * 97) % 1000;
		if (zr_reader_read(r, 0, ids, 4, buf, 8 * MAX, offs) < 0)
			a->bad++;
		for (int i = 0; i < 4 && !a->bad; i++)
			a->bad += !t_check(buf + offs[i], offs[i + 1] - offs[i], 7, ids[i]);
		/* the batch's bytes are still its own after the others were read */
		a->bad += !t_check(s[0].data, s[0].len, 7, id);
		zr_batch_release(b);
	}
	zr_reader_close(r);
	free(buf);
	return NULL;
}

Test(chunk, threads_read_while_chunks_come_and_go, .timeout = T_TIMEOUT(120))
{
	build(1000, ZR_RAW);
	zr_chunks_open_max = 6;
	zr_dataset *ds = t_open(t_ds, ZR_RDONLY);
	pthread_t t[3];
	struct reader_arg a[3];
	for (int i = 0; i < 3; i++) {
		a[i] = (struct reader_arg){ds, (uint64_t)i << 32, 0};
		pthread_create(&t[i], NULL, read_scattered, &a[i]);
	}
	for (int i = 0; i < 3; i++) {
		pthread_join(t[i], NULL);
		cr_assert_eq(a[i].bad, 0, "thread %d read wrong bytes or failed", i);
	}
	zr_close(ds);
}

Test(chunk, flate_records_through_a_small_pool)
{
	build(400, ZR_FLATE);
	zr_chunks_open_max = 3;
	zr_dataset *ds = t_open(t_ds, ZR_RDONLY);
	for (uint64_t k = 0; k < 800; k++) {
		uint64_t id = t_mix(k) % 400;
		uint8_t buf[MAX];
		int64_t n = zr_record_load(ds, 0, id, buf, sizeof buf);
		cr_assert_geq(n, 0, "%s", zr_errmsg(ds));
		cr_assert(t_check(buf, (size_t)n, 7, id), "record %llu", (unsigned long long)id);
	}
	t_check_range(ds, 7, 0, 400, MAX);
	zr_close(ds);
}

Test(chunk, a_writer_fills_more_chunks_than_descriptors, .timeout = T_TIMEOUT(60))
{
	t_create1(t_ds, ZR_RAW, 1);
	limit_files(64);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	t_append_range(ds, 7, 0, 1500, MAX); /* 1500 new chunks, one commit */
	cr_assert_eq(zr_commit(ds), 0, "%s", zr_errmsg(ds));
	t_append_range(ds, 7, 1500, 1700, MAX); /* and 200 the close discards */
	zr_close(ds);
	ds = t_open(t_ds, ZR_RDONLY);
	cr_assert_eq(zr_length(ds), 1500);
	cr_assert_eq(zr_verify(ds, NULL, NULL), 0, "%s", zr_errmsg(ds));
	t_check_range(ds, 7, 0, 1500, MAX);
	zr_close(ds);
	cr_assert_eq(t_file_size(t_ds, "chunk/1500.zr"), -1, "an uncommitted chunk was left");
}

Test(chunk, an_unfull_chunk_closed_and_trimmed_on_close)
{
	t_create1(t_ds, ZR_RAW, 10);
	zr_chunks_open_max = 2;
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	t_append_range(ds, 7, 0, 45, MAX);
	cr_assert_eq(zr_commit(ds), 0, "%s", zr_errmsg(ds));
	zr_close(ds);
	off_t committed = t_file_size(t_ds, "chunk/4.zr");
	ds = t_open(t_ds, ZR_RDWR);
	t_append_range(ds, 7, 45, 75, MAX); /* fills chunk 4, which the pool may close */
	t_check_range(ds, 7, 0, 75, MAX);
	zr_close(ds); /* uncommitted: chunk 4 back to its committed size */
	cr_assert_eq(t_file_size(t_ds, "chunk/4.zr"), committed);
	ds = t_open(t_ds, ZR_RDONLY);
	cr_assert_eq(zr_length(ds), 45);
	cr_assert_eq(zr_verify(ds, NULL, NULL), 0, "%s", zr_errmsg(ds));
	zr_close(ds);
}

Test(chunk, a_reader_of_a_rebalanced_state_keeps_its_chunks)
{
	build(100, ZR_RAW);
	zr_dataset *r = t_open(t_ds, ZR_RDONLY); /* opens no chunk yet */
	zr_dataset *w = t_open(t_ds, ZR_RDWR);
	cr_assert_eq(zr_rebalance(w, 10, NULL), 0, "%s", zr_errmsg(w));
	cr_assert_geq(t_file_size(t_ds, "chunk/0.zr"), 0, "removed under a reader");
	t_check_range(r, 7, 0, 100, MAX); /* the old chunks, opened now */
	zr_close(r);
	zr_close(w);
	w = t_open(t_ds, ZR_RDWR); /* no reader of the old state: swept */
	cr_assert_eq(t_file_size(t_ds, "chunk/0.zr"), -1, "old chunk left");
	t_check_range(w, 7, 0, 100, MAX);
	zr_close(w);
}

Test(chunk, old_chunks_go_at_the_first_commit_without_their_readers)
{
	build(100, ZR_RAW);
	zr_dataset *r = t_open(t_ds, ZR_RDONLY);
	zr_dataset *w = t_open(t_ds, ZR_RDWR);
	cr_assert_eq(zr_rebalance(w, 10, NULL), 0, "%s", zr_errmsg(w));
	t_append_range(w, 7, 100, 101, MAX);
	cr_assert_eq(zr_commit(w), 0, "%s", zr_errmsg(w));
	cr_assert_geq(t_file_size(t_ds, "chunk/0.zr"), 0, "removed under a reader");
	zr_close(r);
	t_append_range(w, 7, 101, 102, MAX);
	cr_assert_eq(zr_commit(w), 0, "%s", zr_errmsg(w));
	cr_assert_eq(t_file_size(t_ds, "chunk/0.zr"), -1, "old chunk left after its reader");
	t_check_range(w, 7, 0, 102, MAX);
	zr_close(w);
}

/* Disk space of the dataset's chunk files. */
static uint64_t chunks_disk_bytes(void)
{
	char path[400];
	uint64_t sum = 0;
	struct dirent *e;
	snprintf(path, sizeof path, "%s/chunk", t_ds);
	DIR *d = opendir(path);
	cr_assert(d, "%s", path);
	while ((e = readdir(d)) != NULL) {
		struct stat st;
		if (e->d_name[0] != '.' && fstatat(dirfd(d), e->d_name, &st, 0) == 0)
			sum += (uint64_t)st.st_blocks * 512;
	}
	closedir(d);
	return sum;
}

/* Each of @n values of @vals (@lens) reads as written, and verifies. */
static void read_as_written(const uint8_t *const *vals, const size_t *lens, int n, uint8_t *buf,
			    size_t cap)
{
	zr_dataset *ds = t_open(t_ds, ZR_RDONLY | ZR_CHECK);
	for (int i = 0; i < n; i++) {
		memset(buf, 0x55, lens[i]);
		int64_t got = zr_record_load(ds, 0, (uint64_t)i, buf, cap);
		cr_assert_eq(got, (int64_t)lens[i], "%d: %s", i, zr_errmsg(ds));
		cr_assert(memcmp(buf, vals[i], lens[i]) == 0, "value %d reads other bytes", i);
	}
	cr_assert_eq(zr_verify(ds, NULL, NULL), 0, "%s", zr_errmsg(ds));
	zr_close(ds);
}

/* Runs of zeros of 64 KiB or more on whole pages are left as holes: a
 * value of 64 MiB with a byte at each end takes the space of those bytes,
 * one ending in zeros leaves its chunk as long as it is, the values after
 * it land where they should, and every value reads and verifies as
 * written; a shorter run of zeros is written. A rebalance keeps them holes. */
Test(chunk, zeros_are_left_as_holes)
{
	size_t big = 64u << 20, tail = 1u << 20, dense = 200000;
	uint8_t *a = calloc(1, big), *b = calloc(1, tail), *c = malloc(dense), *got = malloc(big);
	cr_assert(a && b && c && got);
	a[0] = 1;
	a[big - 1] = 0xAB;
	b[0] = 7; /* then 1 MiB of zeros, to the end */
	for (size_t i = 0; i < dense; i++) /* 60 KiB of zeros in the middle */
		c[i] = i >= 70000 && i < 70000 + 61440 ? 0 : (uint8_t)(i * 31 + 1);
	const uint8_t *vals[] = {a, b, c};
	size_t lens[] = {big, tail, dense};

	t_create1(t_ds, ZR_RAW, 16);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	for (int i = 0; i < 3; i++) {
		zr_value v = {vals[i], lens[i]};
		cr_assert_eq(zr_append(ds, &v, NULL), 0, "%s", zr_errmsg(ds));
	}
	cr_assert_eq(zr_commit(ds), 0, "%s", zr_errmsg(ds));
	zr_close(ds);
	uint64_t disk = chunks_disk_bytes();
	cr_assert_lt(disk, 1u << 20, "%llu bytes on disk for 65 MiB of zeros",
		     (unsigned long long)disk);
	read_as_written(vals, lens, 3, got, big);
	/* a rebalance copies them into fresh chunks the same way */
	ds = t_open(t_ds, ZR_RDWR);
	cr_assert_eq(zr_rebalance(ds, 0, NULL), 0, "%s", zr_errmsg(ds));
	zr_close(ds);
	disk = chunks_disk_bytes();
	cr_assert_lt(disk, 1u << 20, "%llu bytes on disk after a rebalance", (unsigned long long)disk);
	read_as_written(vals, lens, 3, got, big);
	free(a);
	free(b);
	free(c);
	free(got);
}
