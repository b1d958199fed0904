/*
 * Description: the dataset handle and appends (core/store.c, core/write.c,
 * core/chunk.c, core/offset.c): create, open, close, append, round trips of
 * raw and flate records of every size class, missing versus empty records,
 * growth across many chunks and table steps, locking, trimming on close.
 */
#include "helpers.h"
#include "store_i.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

TestSuite(store, .init = t_setup, .fini = t_cleanup);

Test(store, create_rejects_bad_fields)
{
	static const char *const bad[] = {"", ".hidden", "-dash", "a/b", "x.npy", "sp ace",
					  "0123456789012345678901234567890123456789012345678901234567890123456789"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		zr_field_spec f = {.name = bad[i], .dtype = ZR_U8};
		cr_assert_eq(zr_create(t_ds, &f, 1, NULL), ZR_EINVAL_SPEC, "name '%s' accepted",
			     bad[i]);
	}
	zr_field_spec two[2] = {{.name = "a", .dtype = ZR_U8}, {.name = "a", .dtype = ZR_U8}};
	cr_assert_eq(zr_create(t_ds, two, 2, NULL), ZR_EINVAL_SPEC);
	cr_assert_eq(zr_create(t_ds, two, 0, NULL), ZR_EINVAL_SPEC);
	zr_field_spec ext = {.name = "a", .dtype = ZR_U8, .ext = "../x"};
	cr_assert_eq(zr_create(t_ds, &ext, 1, NULL), ZR_EINVAL_SPEC);
	zr_field_spec big = {.name = "a", .dtype = ZR_F64, .fixed = 1, .ndim = 2,
			     .shape = {1u << 20, 1u << 20}};
	cr_assert_eq(zr_create(t_ds, &big, 1, NULL), ZR_EINVAL_SPEC);
	/* nothing was created by the failures */
	cr_assert_eq(access(t_ds, F_OK), -1);
}

Test(store, create_refuses_non_empty_directory)
{
	zr_field_spec f = {.name = "a", .dtype = ZR_U8};
	char p[400];
	cr_assert_eq(mkdir(t_ds, 0755), 0);
	snprintf(p, sizeof p, "%s/keep", t_ds);
	fclose(fopen(p, "w"));
	cr_assert_eq(zr_create(t_ds, &f, 1, NULL), -EEXIST);
	cr_assert_eq(access(p, F_OK), 0, "existing file touched");
}

Test(store, open_of_a_non_dataset_says_so)
{
	zr_dataset *ds;
	cr_assert_eq(zr_open(&ds, t_dir, ZR_RDONLY), -ENOENT);
	cr_assert_null(ds);
	cr_assert_not_null(strstr(zr_errmsg(NULL), "meta.json"), "%s", zr_errmsg(NULL));
	cr_assert_eq(zr_open(&ds, "/nonexistent/zr", ZR_RDONLY), -ENOENT);
}

/* Faults of a shared filesystem's client (GlusterFS, NFS) around meta.json,
 * which a commit replaces by a rename, each played @faults times. */
static int faults, meta_fd = -1;
static int (*real_openat)(int, const char *, int, mode_t);
static ssize_t (*real_pread)(int, void *, size_t, off_t);

static double seconds_since(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Ten committed records, opened read-only and for writing while 3 faults
 * are played each time: every open outlasts them. Then a client that never
 * catches up: a bounded wait, -ESTALE, and @says in the message. The hooks
 * are in place, with no fault left to play. */
static void opens_outlast_faults(const char *says)
{
	static const unsigned modes[] = {ZR_RDONLY, ZR_RDWR};
	zr_dataset *ds;
	struct timespec t0;

	t_create1(t_ds, ZR_RAW, 0);
	ds = t_open(t_ds, ZR_RDWR);
	t_append_range(ds, 3, 0, 10, 100);
	cr_assert_eq(zr_commit(ds), 0, "%s", zr_errmsg(ds));
	zr_close(ds);
	for (size_t k = 0; k < sizeof modes / sizeof modes[0]; k++) {
		faults = 3;
		ds = t_open(t_ds, modes[k]);
		cr_assert_eq(faults, 0);
		cr_assert_eq(zr_length(ds), 10);
		t_check_range(ds, 3, 0, 10, 100);
		zr_close(ds);
	}
	faults = 1 << 30;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cr_assert_eq(zr_open(&ds, t_ds, ZR_RDONLY), -ESTALE);
	cr_assert_lt(seconds_since(&t0), T_TIMEOUT(30));
	cr_assert_null(ds);
	cr_assert_not_null(strstr(zr_errmsg(NULL), says), "%s", zr_errmsg(NULL));
}

/* The open succeeds and the read fails (GlusterFS opens at the first read:
 * ENOENT; NFS: ESTALE). */
static int meta_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	int fd = real_openat(dirfd, path, flags, mode);
	if (strcmp(path, "meta.json") == 0)
		meta_fd = fd;
	return fd;
}

static ssize_t stale_pread(int fd, void *buf, size_t n, off_t off)
{
	if (fd == meta_fd) {
		meta_fd = -1; /* its first read only: the number is reused */
		if (faults > 0) {
			faults--;
			errno = faults % 2 ? ENOENT : ESTALE;
			return -1;
		}
	}
	return real_pread(fd, buf, n, off);
}

Test(store, open_reads_again_a_meta_json_replaced_under_its_client)
{
	real_openat = zr_sys.openat;
	real_pread = zr_sys.pread;
	zr_sys.openat = meta_openat;
	zr_sys.pread = stale_pread;
	opens_outlast_faults("meta.json: replaced while it was read");
	zr_sys_reset();
}

/* The name is looked up in the rename's instant: ENOENT (GlusterFS). */
static int missing_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	if (strcmp(path, "meta.json") == 0 && faults > 0) {
		faults--;
		errno = ENOENT;
		return -1;
	}
	return real_openat(dirfd, path, flags, mode);
}

static int fuse_fstatfs(int fd, struct statfs *sf)
{
	int rc = fstatfs(fd, sf);
	if (rc == 0)
		sf->f_type = FUSE_SUPER_MAGIC;
	return rc;
}

Test(store, open_waits_for_a_meta_json_a_shared_client_misses)
{
	zr_dataset *ds;
	struct timespec t0;

	real_openat = zr_sys.openat;
	zr_sys.openat = missing_openat;
	zr_sys.fstatfs = fuse_fstatfs;
	opens_outlast_faults("meta.json: not found, though chunk/ is there");
	cr_assert_not_null(strstr(zr_errmsg(NULL), "or a damaged dataset"), "%s",
			   zr_errmsg(NULL));
	/* the client still misses it; a directory without chunk/ is no dataset,
	 * and that is said at once */
	cr_assert_eq(zr_open(&ds, t_dir, ZR_RDONLY), -ENOENT);
	cr_assert_not_null(strstr(zr_errmsg(NULL), "not a zrecord dataset?"), "%s",
			   zr_errmsg(NULL));
	/* nor is a local filesystem waited for: its rename is atomic */
	zr_sys.fstatfs = fstatfs;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cr_assert_eq(zr_open(&ds, t_ds, ZR_RDONLY), -ENOENT);
	cr_assert_lt(seconds_since(&t0), 1.0 * T_TIMEOUT(1));
	zr_sys_reset();
}

static void round_trip(zr_compress c)
{
	const uint64_t n = 3000;
	t_create1(t_ds, c, 700); /* several chunks */
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	t_append_range(ds, 11, 0, n, 5000);
	t_check_range(ds, 11, 0, n, 5000); /* visible before the commit */
	cr_assert_eq(zr_commit(ds), 0, "%s", zr_errmsg(ds));
	zr_close(ds);

	ds = t_open(t_ds, ZR_RDONLY);
	cr_assert_eq(zr_length(ds), n);
	t_check_range(ds, 11, 0, n, 5000);
	/* a batch in any order, with repeats */
	uint64_t ids[] = {2999, 0, 17, 17, 1500, 3};
	zr_batch *b;
	size_t m;
	cr_assert_eq(zr_gather(ds, 0, ids, 6, &b), 0);
	const zr_slice *s = zr_batch_records(b, &m);
	cr_assert_eq(m, 6);
	for (size_t i = 0; i < m; i++) {
		cr_assert_eq(s[i].len, t_len(11, ids[i], 5000));
		cr_assert(t_check(s[i].data, s[i].len, 11, ids[i]));
	}
	zr_batch_release(b);
	zr_info in;
	cr_assert_eq(zr_info_get(ds, &in), 0);
	cr_assert_eq(in.chunk_count, 5);
	cr_assert_eq(zr_verify(ds, NULL, NULL), 0);
	zr_close(ds);
}

Test(store, round_trip_raw)
{
	round_trip(ZR_RAW);
}

Test(store, round_trip_flate)
{
	round_trip(ZR_FLATE);
}

/* A record's small values are written together and its big ones alone
 * (write.c, the stage): each reads back whole, at its dtype's alignment,
 * with the ones of a record of more small bytes than the stage holds. */
Test(store, values_of_every_size_in_one_record_round_trip_aligned)
{
	enum { NF = 10, BIG = 100000, MID = 60000 };
	zr_field_spec f[NF] = {{.name = "s", .dtype = ZR_BYTES},
			       {.name = "d", .dtype = ZR_F64},
			       {.name = "i", .dtype = ZR_I32, .fixed = 1},
			       {.name = "big", .dtype = ZR_BYTES},
			       {.name = "z", .dtype = ZR_BYTES, .compress = ZR_FLATE},
			       {.name = "m0", .dtype = ZR_U8},
			       {.name = "m1", .dtype = ZR_U8},
			       {.name = "m2", .dtype = ZR_U8},
			       {.name = "m3", .dtype = ZR_U8},
			       {.name = "m4", .dtype = ZR_I64}};
	static uint8_t big[BIG], mid[MID + 8];
	double d[3] = {1.5, -2.25, 1e300};
	int32_t i32 = -7;
	zr_dataset *ds;

	for (size_t k = 0; k < sizeof big; k++)
		big[k] = (uint8_t)(k * 7 + 1);
	for (size_t k = 0; k < sizeof mid; k++)
		mid[k] = (uint8_t)(k * 13 + 5);
	cr_assert_eq(zr_create(t_ds, f, NF, NULL), 0, "%s", zr_errmsg(NULL));
	ds = t_open(t_ds, ZR_RDWR);
	for (uint64_t id = 0; id < 3; id++) {
		size_t odd = 1 + (size_t)id * 2; /* values that end off any alignment */
		zr_value v[NF] = {{"abcde", odd},      {d, sizeof d},  {&i32, 4},
				  {big, BIG - odd},    {mid, 300 + odd}, {mid, MID + odd},
				  {mid + 1, MID},      {mid + 2, MID - odd}, {mid + 3, MID},
				  {mid, MID / 8 * 8}};
		cr_assert_eq(zr_append(ds, v, NULL), 0, "%s", zr_errmsg(ds));
	}
	cr_assert_eq(zr_commit(ds), 0, "%s", zr_errmsg(ds));
	zr_close(ds);
	ds = t_open(t_ds, ZR_RDONLY);
	for (uint64_t id = 0; id < 3; id++) {
		size_t odd = 1 + (size_t)id * 2;
		zr_value want[NF] = {{"abcde", odd},      {d, sizeof d},  {&i32, 4},
				     {big, BIG - odd},    {mid, 300 + odd}, {mid, MID + odd},
				     {mid + 1, MID},      {mid + 2, MID - odd}, {mid + 3, MID},
				     {mid, MID / 8 * 8}};
		for (unsigned k = 0; k < NF; k++) {
			static uint8_t got[BIG];
			zr_record_stat rs;
			cr_assert_eq(zr_record_load(ds, k, id, got, sizeof got), (int64_t)want[k].len,
				     "record %llu field %u", (unsigned long long)id, k);
			cr_assert_eq(memcmp(got, want[k].data, want[k].len), 0, "record %llu field %u",
				     (unsigned long long)id, k);
			cr_assert_eq(zr_stat(ds, k, id, &rs), 0);
			if (f[k].compress == ZR_RAW)
				cr_assert_eq(rs.offset % zr_dtype_size(f[k].dtype), 0,
					     "record %llu field %u at %llu", (unsigned long long)id, k,
					     (unsigned long long)rs.offset);
		}
	}
	cr_assert_eq(zr_verify(ds, NULL, NULL), 0);
	zr_close(ds);
}

Test(store, missing_and_empty_records_differ)
{
	zr_field_spec f[2] = {{.name = "a", .dtype = ZR_BYTES},
			      {.name = "b", .dtype = ZR_BYTES, .compress = ZR_FLATE}};
	cr_assert_eq(zr_create(t_ds, f, 2, NULL), 0);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	zr_value r0[2] = {{"", 0}, {NULL, 0}}; /* a empty, b missing */
	zr_value r1[2] = {{NULL, 0}, {"", 0}}; /* a missing, b empty */
	cr_assert_eq(zr_append(ds, r0, NULL), 0);
	cr_assert_eq(zr_append(ds, r1, NULL), 0);
	cr_assert_eq(zr_commit(ds), 0);
	zr_close(ds);

	ds = t_open(t_ds, ZR_RDONLY);
	for (unsigned field = 0; field < 2; field++)
		for (uint64_t id = 0; id < 2; id++) {
			zr_batch *b;
			size_t n;
			zr_record_stat st;
			bool present = field == id; /* a of 0, b of 1 */
			cr_assert_eq(zr_gather(ds, field, &id, 1, &b), 0);
			const zr_slice *s = zr_batch_records(b, &n);
			cr_assert_eq(s[0].data != NULL, present, "field %u id %llu", field,
				     (unsigned long long)id);
			cr_assert_eq(s[0].len, 0);
			zr_batch_release(b);
			cr_assert_eq(zr_stat(ds, field, id, &st), 0);
			cr_assert_eq(st.present, present);
			cr_assert_eq(st.logical_len, 0);
		}
	zr_info in;
	cr_assert_eq(zr_info_get(ds, &in), 0);
	cr_assert_eq(in.missing, 2);
	zr_close(ds);
}

static void size_classes(zr_compress c)
{
	const size_t sizes[] = {0, 1, 17u << 20, 2, 4095, 4096, 4097};
	const size_t count = sizeof sizes / sizeof sizes[0];
	uint8_t *buf = malloc(17u << 20);
	t_create1(t_ds, c, 0);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	for (size_t i = 0; i < count; i++) {
		t_fill(buf, sizes[i], 5, i);
		zr_value v = {buf, sizes[i]};
		cr_assert_eq(zr_append(ds, &v, NULL), 0, "%s", zr_errmsg(ds));
	}
	cr_assert_eq(zr_commit(ds), 0);
	zr_close(ds);
	ds = t_open(t_ds, ZR_RDONLY);
	for (uint64_t i = 0; i < count; i++) {
		zr_batch *b;
		size_t n;
		zr_record_stat st;
		cr_assert_eq(zr_gather(ds, 0, &i, 1, &b), 0);
		const zr_slice *s = zr_batch_records(b, &n);
		cr_assert_not_null(s[0].data);
		cr_assert_eq(s[0].len, sizes[i], "size %zu", sizes[i]);
		cr_assert(t_check(s[0].data, s[0].len, 5, i));
		zr_batch_release(b);
		cr_assert_eq(zr_stat(ds, 0, i, &st), 0);
		cr_assert_eq(st.logical_len, sizes[i]);
		if (c == ZR_FLATE && sizes[i] > 4096)
			cr_assert_lt(st.physical_len, sizes[i], "flate did not compress");
	}
	zr_close(ds);
	free(buf);
}

Test(store, sizes_0_1_and_17MiB_raw)
{
	size_classes(ZR_RAW);
}

Test(store, sizes_0_1_and_17MiB_flate)
{
	size_classes(ZR_FLATE);
}

Test(store, growth_across_chunks_and_table_steps, .timeout = T_TIMEOUT(120))
{
	/* > 2 table steps (1 Mi entries each) and > 20 chunks */
	const uint64_t n = (2u << 20) + 5000;
	zr_field_spec f = {.name = "x", .dtype = ZR_U32, .fixed = 1, .ndim = 0};
	zr_create_opts o = {.chunk_size = 100000};
	cr_assert_eq(zr_create(t_ds, &f, 1, &o), 0);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	zr_writer *w;
	cr_assert_eq(zr_writer_open(ds, &w), 0);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t v = i * 2654435761u;
		zr_value val = {&v, 4};
		cr_assert_eq(zr_writer_append(w, &val, NULL), 0, "%s", zr_errmsg(ds));
		if (i == n / 2)
			cr_assert_eq(zr_commit(ds), 0);
	}
	zr_writer_close(w);
	cr_assert_eq(zr_commit(ds), 0);
	zr_close(ds);
	/* trimmed: the table holds exactly N entries, chunks exactly their data */
	cr_assert_eq(t_file_size(t_ds, "x.offset"), (off_t)(n * 16));
	cr_assert_eq(t_file_size(t_ds, "chunk/0.zr"), 400000);
	ds = t_open(t_ds, ZR_RDONLY);
	cr_assert_eq(zr_length(ds), n);
	zr_info in;
	cr_assert_eq(zr_info_get(ds, &in), 0);
	cr_assert_eq(in.chunk_count, (n + 99999) / 100000);
	cr_assert_eq(in.chunk_bytes, n * 4);
	cr_assert_eq(zr_chunk_bytes(ds), n * 4);
	uint64_t ids[] = {0, 1, 99999, 100000, 1u << 20, (1u << 20) + 1, n - 1};
	zr_batch *b;
	size_t m;
	cr_assert_eq(zr_gather(ds, 0, ids, 7, &b), 0);
	const zr_slice *s = zr_batch_records(b, &m);
	for (size_t i = 0; i < m; i++) {
		cr_assert_eq(s[i].len, 4);
		cr_assert_eq(*(const uint32_t *)s[i].data, (uint32_t)ids[i] * 2654435761u,
			     "record %llu", (unsigned long long)ids[i]);
	}
	zr_batch_release(b);
	zr_close(ds);
}

Test(store, offset_tables_start_small_and_double)
{
	zr_field_spec f = {.name = "x", .dtype = ZR_U32, .fixed = 1, .ndim = 0};
	cr_assert_eq(zr_create(t_ds, &f, 1, NULL), 0);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	uint32_t v = 7;
	zr_value val = {&v, 4};
	for (int i = 0; i < 10; i++)
		cr_assert_eq(zr_append(ds, &val, NULL), 0);
	cr_assert_eq(zr_commit(ds), 0);
	/* while written: 4096 entries of 16 bytes, not the 16 MiB step */
	cr_assert_eq(t_file_size(t_ds, "x.offset"), 65536);
	for (int i = 10; i < 5000; i++)
		cr_assert_eq(zr_append(ds, &val, NULL), 0);
	cr_assert_eq(t_file_size(t_ds, "x.offset"), 131072, "doubled once");
	cr_assert_eq(zr_commit(ds), 0);
	zr_close(ds);
	cr_assert_eq(t_file_size(t_ds, "x.offset"), 5000 * 16, "trimmed on close");
}

Test(store, fixed_shape_is_enforced_and_aligned)
{
	zr_field_spec f[2] = {{.name = "tag", .dtype = ZR_U8, .fixed = 1, .ndim = 1, .shape = {3}},
			      {.name = "v", .dtype = ZR_F64, .fixed = 1, .ndim = 2, .shape = {2, 3}}};
	cr_assert_eq(zr_create(t_ds, f, 2, NULL), 0);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	double v[6] = {1, 2, 3, 4, 5, 6};
	zr_value bad[2] = {{"ab", 2}, {v, 48}};
	cr_assert_eq(zr_append(ds, bad, NULL), -EINVAL);
	cr_assert_eq(zr_length(ds), 0, "a rejected record took an id");
	zr_value ok[2] = {{"abc", 3}, {v, 48}};
	cr_assert_eq(zr_append(ds, ok, NULL), 0);
	cr_assert_eq(zr_append(ds, ok, NULL), 0);
	cr_assert_eq(zr_field_record_size(ds, 1), 48);
	uint64_t ids[] = {0, 1};
	zr_batch *b;
	size_t n;
	cr_assert_eq(zr_gather(ds, 1, ids, 2, &b), 0);
	const zr_slice *s = zr_batch_records(b, &n);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq((uintptr_t)s[i].data % 8, 0, "f64 record not 8-aligned");
		cr_assert_eq(((const double *)s[i].data)[5], 6.0);
	}
	zr_batch_release(b);
	zr_close(ds);
}

Test(store, append_many_takes_rows_in_order_and_stops_at_a_bad_one)
{
	zr_field_spec f[2] = {{.name = "name", .dtype = ZR_BYTES},
			      {.name = "n", .dtype = ZR_I64, .fixed = 1}};
	cr_assert_eq(zr_create(t_ds, f, 2, NULL), 0);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	int64_t k[4] = {10, 11, 12, 13};
	/* row-major: one value per field per row; row 2's name is missing */
	zr_value rows[8] = {{"a", 1}, {&k[0], 8}, {"bb", 2}, {&k[1], 8},
			    {NULL, 0}, {&k[2], 8}, {"dddd", 4}, {&k[3], 8}};
	uint64_t first = 99;
	cr_assert_eq(zr_append(ds, rows, NULL), 0);
	cr_assert_eq(zr_append_many(ds, rows, 4, &first), 0, "%s", zr_errmsg(ds));
	cr_assert_eq(first, 1);
	cr_assert_eq(zr_length(ds), 5);
	for (uint64_t id = 1; id < 5; id++) {
		zr_batch *b;
		size_t n;
		cr_assert_eq(zr_gather(ds, 0, &id, 1, &b), 0);
		const zr_slice *s = zr_batch_records(b, &n);
		const zr_value *want = &rows[(id - 1) * 2];
		cr_assert_eq(s[0].data == NULL, want->data == NULL, "row %llu presence",
			     (unsigned long long)id);
		cr_assert_eq(s[0].len, want->len);
		cr_assert(!want->data || memcmp(s[0].data, want->data, want->len) == 0);
		zr_batch_release(b);
		cr_assert_eq(zr_gather(ds, 1, &id, 1, &b), 0);
		s = zr_batch_records(b, &n);
		cr_assert_eq(*(const int64_t *)s[0].data, k[id - 1]);
		zr_batch_release(b);
	}
	/* a row that does not fit its field ends the call: the rows before it
	 * are appended (uncommitted, like any append), it and those after not */
	zr_value bad[6] = {{"x", 1}, {&k[0], 8}, {"y", 1}, {&k[1], 4}, {"z", 1}, {&k[2], 8}};
	cr_assert_eq(zr_append_many(ds, bad, 3, &first), -EINVAL);
	cr_assert_eq(first, 5);
	cr_assert_eq(zr_length(ds), 6);
	cr_assert_eq(zr_append_many(ds, bad, 0, NULL), 0);
	cr_assert_eq(zr_length(ds), 6);
	zr_close(ds);
}

Test(store, second_writer_is_refused_and_readers_cannot_write)
{
	t_create1(t_ds, ZR_RAW, 0);
	zr_dataset *w = t_open(t_ds, ZR_RDWR), *w2 = NULL, *r = t_open(t_ds, ZR_RDONLY);
	cr_assert_eq(zr_open(&w2, t_ds, ZR_RDWR), -EBUSY);
	cr_assert_not_null(strstr(zr_errmsg(NULL), "another writer"));
	char who[64];
	snprintf(who, sizeof who, "pid %ld (", (long)getpid());
	cr_assert_not_null(strstr(zr_errmsg(NULL), who), "names the holder: %s", zr_errmsg(NULL));
	zr_value v = {"x", 1};
	cr_assert_eq(zr_append(r, &v, NULL), -EROFS);
	cr_assert_eq(zr_commit(r), -EROFS);
	cr_assert_eq(zr_delete(r, 0), -EROFS);
	/* the holder may say more about itself, one line; a reader holds nothing */
	cr_assert_eq(zr_holder_set(w, "zrfs mount on /mnt/x"), 0);
	cr_assert_eq(zr_open(&w2, t_ds, ZR_RDWR), -EBUSY);
	cr_assert_not_null(strstr(zr_errmsg(NULL), "UTC, zrfs mount on /mnt/x"), "%s",
			   zr_errmsg(NULL));
	cr_assert_not_null(strstr(zr_errmsg(NULL), who));
	cr_assert_eq(zr_holder_set(w, "two\nlines"), -EINVAL);
	cr_assert_eq(zr_holder_set(r, "x"), -EROFS);
	/* the holder's pid, on this machine; none when DATASET/writer names
	 * another host or nothing */
	cr_assert_eq(zr_holder_pid(t_ds), (long)getpid());
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/writer", t_ds);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fprintf(f, "pid %ld (zrfs) on no-such-host.example, since 2026-01-01 00:00:00 UTC\n",
		(long)getpid());
	fclose(f);
	cr_assert_eq(zr_holder_pid(t_ds), 0);
	cr_assert_eq(truncate(path, 0), 0);
	cr_assert_eq(zr_holder_pid(t_ds), 0);
	cr_assert_eq(zr_holder_pid("/nonexistent"), 0);
	zr_close(w);
	w2 = t_open(t_ds, ZR_RDWR); /* free again */
	zr_close(w2);
	zr_close(r);
}

/* A holder that serves a mount is ending once that mount is gone from this
 * namespace: a writer refused by it may wait for it (ZR_WAIT); one whose
 * mount is there, or that serves none, is refused at once. */
Test(store, a_writer_waits_for_a_holder_whose_mount_is_gone)
{
	struct statx root;
	int go[2], held[2];
	char c;

	t_create1(t_ds, ZR_RAW, 0);
	cr_assert_eq(statx(AT_FDCWD, "/", 0, STATX_MNT_ID, &root), 0);
	zr_dataset *w = t_open(t_ds, ZR_RDWR), *w2 = NULL, *r = t_open(t_ds, ZR_RDONLY);
	cr_assert_eq(zr_holder_mount(w, "mnt", 1), -EINVAL);
	cr_assert_eq(zr_holder_mount(w, "/mnt\n/x", 1), -EINVAL);
	cr_assert_eq(zr_holder_mount(r, "/", root.stx_mnt_id), -EROFS);
	cr_assert_eq(zr_holder_ending(t_ds), 0); /* serves no mount */
	cr_assert_eq(zr_holder_mount(w, "/", root.stx_mnt_id), 0);
	cr_assert_eq(zr_holder_ending(t_ds), 0); /* there */
	cr_assert_eq(zr_open(&w2, t_ds, ZR_RDWR | ZR_WAIT), -EBUSY); /* at once */
	cr_assert_null(strstr(zr_errmsg(NULL), "its mount is gone"), "%s", zr_errmsg(NULL));
	cr_assert_eq(zr_holder_mount(w, "/", root.stx_mnt_id + 1000000), 0);
	cr_assert_eq(zr_holder_ending(t_ds), (long)getpid()); /* another mount there now */
	cr_assert_eq(zr_holder_mount(w, "/nonexistent/mnt", 7), 0);
	cr_assert_eq(zr_holder_ending(t_ds), (long)getpid()); /* nothing there */
	cr_assert_eq(zr_holder_set(w, "zrfs mount on /nonexistent/mnt"), 0);
	cr_assert_eq(zr_holder_ending(t_ds), (long)getpid()); /* kept with a new message */
	cr_assert_eq(zr_holder_mount(w, NULL, 0), 0);
	cr_assert_eq(zr_holder_ending(t_ds), 0);
	cr_assert_eq(zr_holder_pid(t_ds), (long)getpid());
	zr_close(w);
	zr_close(r);

	/* another process holds the dataset for a mount that is gone, until
	 * told to exit: a plain open is refused, one with ZR_WAIT opens */
	cr_assert_eq(pipe(go), 0);
	cr_assert_eq(pipe(held), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		zr_dataset *h = NULL;
		close(go[1]);
		close(held[0]);
		if (zr_open(&h, t_ds, ZR_RDWR) < 0 || zr_holder_mount(h, "/nonexistent/mnt", 7) < 0)
			_exit(1);
		if (write(held[1], "h", 1) != 1 || read(go[0], &c, 1) < 0)
			_exit(1);
		_exit(0); /* the lock goes with the process */
	}
	close(go[0]);
	close(held[1]);
	cr_assert_eq(read(held[0], &c, 1), 1, "the child holds the dataset");
	cr_assert_eq(zr_holder_ending(t_ds), (long)pid);
	cr_assert_eq(zr_open(&w2, t_ds, ZR_RDWR), -EBUSY);
	cr_assert_not_null(strstr(zr_errmsg(NULL), "; its mount is gone: it lets go of the dataset"),
			   "%s", zr_errmsg(NULL));
	close(go[1]); /* it may exit now */
	cr_assert_eq(zr_open(&w2, t_ds, ZR_RDWR | ZR_WAIT), 0, "%s", zr_errmsg(NULL));
	zr_close(w2);
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(held[0]);

	/* a holder that has exited is ending, whatever its mount (a zombie
	 * here: its namespaces are gone): a waiter refused by it just before
	 * it let go tries the lock again, where it gave up before */
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		zr_dataset *h = NULL;
		_exit(zr_open(&h, t_ds, ZR_RDWR) < 0 ||
		      zr_holder_mount(h, "/", root.stx_mnt_id) < 0);
	}
	siginfo_t si;
	cr_assert_eq(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0);
	cr_assert_eq(si.si_status, 0);
	cr_assert_eq(zr_holder_ending(t_ds), (long)pid);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert_eq(zr_holder_ending(t_ds), (long)pid); /* and once reaped */
}

Test(store, close_without_commit_discards_and_trims)
{
	t_create1(t_ds, ZR_RAW, 8);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	t_append_range(ds, 3, 0, 10, 100);
	cr_assert_eq(zr_commit(ds), 0);
	off_t c1 = t_file_size(t_ds, "chunk/1.zr");
	t_append_range(ds, 3, 10, 30, 100); /* fills chunk 1, creates 2 and 3 */
	cr_assert_geq(t_file_size(t_ds, "chunk/2.zr"), 0);
	zr_close(ds);
	cr_assert_eq(t_file_size(t_ds, "chunk/1.zr"), c1, "uncommitted bytes left in chunk 1");
	cr_assert_eq(t_file_size(t_ds, "chunk/2.zr"), -1, "uncommitted chunk left behind");
	cr_assert_eq(t_file_size(t_ds, "data.offset"), 10 * 16);
	ds = t_open(t_ds, ZR_RDWR);
	cr_assert_eq(zr_length(ds), 10);
	t_check_range(ds, 3, 0, 10, 100);
	/* appending continues in the unfull chunk 1 */
	t_append_range(ds, 3, 10, 12, 100);
	cr_assert_eq(zr_commit(ds), 0);
	zr_close(ds);
	cr_assert_eq(t_file_size(t_ds, "chunk/2.zr"), -1);
	ds = t_open(t_ds, ZR_RDONLY);
	t_check_range(ds, 3, 0, 12, 100);
	cr_assert_eq(zr_verify(ds, NULL, NULL), 0);
	zr_close(ds);
}

Test(store, field_lookup_and_errors)
{
	t_create1(t_ds, ZR_RAW, 0);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	cr_assert_eq(zr_field_find(ds, "data"), 0);
	cr_assert_eq(zr_field_find(ds, "nope"), -ENOENT);
	cr_assert_str_eq(zr_field(ds, 0)->name, "data");
	cr_assert_null(zr_field(ds, 1));
	zr_batch *b;
	uint64_t id = 0;
	cr_assert_eq(zr_gather(ds, 0, &id, 1, &b), -ENOENT);
	cr_assert_null(b);
	cr_assert_eq(zr_gather(ds, 1, &id, 0, &b), -ENOENT);
	zr_record_stat st;
	cr_assert_eq(zr_stat(ds, 0, 0, &st), -ENOENT);
	cr_assert_str_eq(zr_strerror(ZR_ECORRUPT), "dataset is corrupt");
	cr_assert_str_eq(zr_strerror(-ENOENT), "No such file or directory");
	zr_close(ds);
	zr_close(NULL);
	zr_batch_release(NULL);
	zr_writer_close(NULL);
	zr_reader_close(NULL);
}
