/*
 * Description: reading (core/gather.c, core/batch_read.c): gathers from many
 * threads while a writer appends and the mappings grow under them; the
 * io_uring batch reader (and its pread fallback) returns exactly what
 * zr_gather returns; zr_record_copy writes what zr_record_load reads, in
 * bounded pieces; buffer and range errors.
 */
#include "helpers.h"
#include "store_i.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>

TestSuite(gather, .init = t_setup, .fini = t_cleanup);

struct rd_ctx {
	zr_dataset *ds;
	atomic_bool stop;
	_Atomic uint64_t *done; /* ids below it have been appended completely */
	atomic_ulong checked;
	int failed;
	uint64_t seed;
};

static void *reader_thread(void *arg)
{
	struct rd_ctx *c = arg;
	uint64_t s = c->seed, ids[32];

	while (!atomic_load(&c->stop) && !c->failed) {
		uint64_t done = atomic_load(c->done), len = zr_length(c->ds);
		zr_batch *b;
		size_t n;
		if (len == 0)
			continue;
		for (int i = 0; i < 32; i++)
			ids[i] = (s = t_mix(s)) % len;
		if (zr_gather(c->ds, 0, ids, 32, &b) < 0) {
			c->failed = 1;
			break;
		}
		const zr_slice *r = zr_batch_records(b, &n);
		/* an id reserved but not yet written reads as missing */
		for (size_t i = 0; i < n; i++)
			if (!r[i].data ? ids[i] < done
				       : r[i].len != t_len(31, ids[i], 600) ||
					 !t_check(r[i].data, r[i].len, 31, ids[i]))
				c->failed = 2;
		zr_batch_release(b);
		atomic_fetch_add(&c->checked, n);
	}
	return NULL;
}

static void concurrent(zr_compress comp)
{
	/* tiny growth steps: the mappings move many times under the readers */
	zr_table_step = 256;
	zr_chunk_map_step = 1 << 16;
	t_create1(t_ds, comp, 1500);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	_Atomic uint64_t done = 0;
	struct rd_ctx c[3];
	pthread_t th[3];
	for (int i = 0; i < 3; i++) {
		c[i] = (struct rd_ctx){.ds = ds, .done = &done, .seed = (uint64_t)i + 1};
		pthread_create(&th[i], NULL, reader_thread, &c[i]);
	}
	for (uint64_t id = 0; id < 20000; id += 1000) {
		t_append_range(ds, 31, id, id + 1000, 600);
		atomic_store(&done, id + 1000);
		if (id % 4000 == 0)
			cr_assert_eq(zr_commit(ds), 0);
	}
	for (int i = 0; i < 3; i++)
		atomic_store(&c[i].stop, true);
	for (int i = 0; i < 3; i++) {
		pthread_join(th[i], NULL);
		cr_assert_eq(c[i].failed, 0, "reader %d saw a wrong record (%d)", i, c[i].failed);
		cr_assert_gt(atomic_load(&c[i].checked), 1000, "reader %d barely ran", i);
	}
	cr_assert_eq(zr_commit(ds), 0);
	zr_close(ds);
	ds = t_open(t_ds, ZR_RDONLY);
	t_check_range(ds, 31, 0, 20000, 600);
	zr_close(ds);
}

Test(gather, concurrent_with_appends_raw, .timeout = T_TIMEOUT(120))
{
	concurrent(ZR_RAW);
}

Test(gather, concurrent_with_appends_flate, .timeout = T_TIMEOUT(120))
{
	concurrent(ZR_FLATE);
}

static void reader_matches_gather(zr_compress comp, bool uring)
{
	zr_uring_disabled = !uring;
	zr_field_spec f[2] = {{.name = "d", .dtype = ZR_BYTES, .compress = comp},
			      {.name = "m", .dtype = ZR_U8}};
	cr_assert_eq(zr_create(t_ds, f, 2, &(zr_create_opts){.chunk_size = 300}), 0);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	uint8_t buf[70000];
	for (uint64_t id = 0; id < 1000; id++) {
		size_t n = id % 97 == 0 ? 65537 : t_len(41, id, 3000);
		t_fill(buf, n, 41, id);
		zr_value v[2] = {{id % 13 == 5 ? NULL : buf, n}, {NULL, 0}};
		cr_assert_eq(zr_append(ds, v, NULL), 0);
	}
	cr_assert_eq(zr_commit(ds), 0);
	zr_close(ds);

	ds = t_open(t_ds, ZR_RDONLY);
	zr_reader *r;
	cr_assert_eq(zr_reader_open(ds, 16, &r), 0); /* depth < batch: waves */
	cr_assert_eq(zr_reader_uses_uring(r), uring);
	uint64_t ids[700], offs[701], total;
	for (int i = 0; i < 700; i++)
		ids[i] = t_mix((uint64_t)i) % 1000;
	cr_assert_eq(zr_batch_bytes(ds, 0, ids, 700, &total), 0);
	uint8_t *dst = malloc(total + 1);
	cr_assert_eq(zr_reader_read(r, 0, ids, 700, dst, total - 1, offs), -ENOBUFS);
	cr_assert_eq(zr_reader_read(r, 0, ids, 700, dst, total, offs), 0, "%s", zr_errmsg(ds));
	cr_assert_eq(offs[700], total);
	zr_batch *b;
	size_t n;
	cr_assert_eq(zr_gather(ds, 0, ids, 700, &b), 0);
	const zr_slice *s = zr_batch_records(b, &n);
	for (size_t i = 0; i < n; i++) {
		cr_assert_eq(offs[i + 1] - offs[i], s[i].len, "record %zu length", i);
		cr_assert_eq(memcmp(dst + offs[i], s[i].data ? s[i].data : "", s[i].len), 0,
			     "record %zu bytes", i);
	}
	/* zr_record_load: the same bytes, read with pread, or -ENOENT if missing */
	uint8_t *one = malloc(70000);
	for (size_t i = 0; i < n; i++) {
		int64_t got = zr_record_load(ds, 0, ids[i], one, 70000);
		if (!s[i].data) {
			cr_assert_eq(got, -ENOENT);
			continue;
		}
		cr_assert_eq(got, (int64_t)s[i].len, "record %zu: %lld", i, (long long)got);
		cr_assert_eq(memcmp(one, s[i].data, s[i].len), 0);
		if (s[i].len > 1)
			cr_assert_eq(zr_record_load(ds, 0, ids[i], one, s[i].len - 1), -ENOBUFS);
	}
	free(one);
	zr_batch_release(b);
	/* all missing: nothing to read */
	uint64_t none[] = {0, 1, 2};
	cr_assert_eq(zr_reader_read(r, 1, none, 3, dst, 0, offs), 0);
	cr_assert_eq(offs[3], 0);
	uint64_t out_of_range = 1000;
	cr_assert_eq(zr_reader_read(r, 0, &out_of_range, 1, dst, total, NULL), -ENOENT);
	zr_reader_close(r);
	free(dst);
	zr_close(ds);
}

Test(gather, reader_uring_raw)
{
	reader_matches_gather(ZR_RAW, true);
}

Test(gather, reader_uring_flate)
{
	reader_matches_gather(ZR_FLATE, true);
}

Test(gather, reader_pread_fallback_raw)
{
	reader_matches_gather(ZR_RAW, false);
}

Test(gather, reader_pread_fallback_flate)
{
	reader_matches_gather(ZR_FLATE, false);
}

/* Byte ranges located with zr_stat read what the mappings hold, pieces of
 * records included, through io_uring or pread; a range past the end of its
 * file is -EIO. */
static void ranges_match_records(bool uring)
{
	zr_uring_disabled = !uring;
	t_create1(t_ds, ZR_RAW, 100);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	t_append_range(ds, 5, 0, 300, 5000);
	cr_assert_eq(zr_commit(ds), 0);
	zr_close(ds);

	ds = t_open(t_ds, ZR_RDONLY);
	zr_reader *r;
	cr_assert_eq(zr_reader_open(ds, 8, &r), 0);
	zr_range ranges[300];
	uint8_t *dst = malloc(300 * 5000), *at = dst;
	size_t n = 0;
	uint64_t ids[300];
	for (uint64_t id = 299; id < 300; id -= 7) { /* every 7th, backwards */
		zr_record_stat st;
		cr_assert_eq(zr_stat(ds, 0, id, &st), 0);
		if (st.physical_len < 2)
			continue;
		/* the second half of the record */
		uint32_t half = st.physical_len / 2;
		ranges[n] = (zr_range){st.fd, st.offset + half, st.physical_len - half, at};
		ids[n++] = id;
		at += st.physical_len - half;
	}
	cr_assert_eq(zr_reader_read_ranges(r, ranges, n), 0, "%s", zr_errmsg(ds));
	for (size_t i = 0; i < n; i++) {
		zr_batch *b;
		size_t m;
		cr_assert_eq(zr_gather(ds, 0, &ids[i], 1, &b), 0);
		const zr_slice *s = zr_batch_records(b, &m);
		uint64_t half = s[0].len / 2;
		cr_assert_eq(memcmp(ranges[i].dst, (const uint8_t *)s[0].data + half, s[0].len - half),
			     0, "record %llu", (unsigned long long)ids[i]);
		zr_batch_release(b);
	}
	cr_assert_eq(zr_reader_read_ranges(r, ranges, 0), 0);
	zr_range past = {ranges[0].fd, (uint64_t)1 << 40, 16, dst};
	cr_assert_eq(zr_reader_read_ranges(r, &past, 1), -EIO);
	zr_reader_close(r);
	free(dst);
	zr_close(ds);
}

Test(gather, ranges_uring)
{
	ranges_match_records(true);
}

Test(gather, ranges_pread_fallback)
{
	ranges_match_records(false);
}

/* zr_record_copy writes what zr_record_load reads, in pieces, for values
 * larger than a piece and smaller, raw and flate, and says what is wrong. */
static void record_copy(zr_compress comp)
{
	zr_field_spec f = {.name = "v", .dtype = ZR_BYTES, .compress = comp};
	size_t sizes[] = {0, 1, 1000, (1u << 20) - 1, (1u << 20) + 1, (3u << 20) + 12345};
	size_t n = sizeof sizes / sizeof sizes[0];
	cr_assert_eq(zr_create(t_ds, &f, 1, NULL), 0);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	for (size_t i = 0; i < n; i++) {
		uint8_t *b = malloc(sizes[i] + 1);
		t_fill(b, sizes[i], 9, i);
		cr_assert_eq(zr_append(ds, &(zr_value){b, sizes[i]}, NULL), 0);
		free(b);
	}
	cr_assert_eq(zr_append(ds, &(zr_value){NULL, 0}, NULL), 0); /* missing */
	cr_assert_eq(zr_commit(ds), 0);
	char path[400];
	snprintf(path, sizeof path, "%s/out", t_dir);
	for (size_t i = 0; i < n; i++) {
		int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
		cr_assert_geq(fd, 0);
		cr_assert_eq(zr_record_copy(ds, 0, i, fd), (int64_t)sizes[i], "%s", zr_errmsg(ds));
		struct stat st;
		cr_assert_eq(fstat(fd, &st), 0);
		cr_assert_eq((size_t)st.st_size, sizes[i]);
		uint8_t *got = malloc(sizes[i] + 1), *want = malloc(sizes[i] + 1);
		cr_assert_eq(pread(fd, got, sizes[i], 0), (ssize_t)sizes[i]);
		t_fill(want, sizes[i], 9, i);
		cr_assert_eq(memcmp(got, want, sizes[i]), 0, "record %zu differs", i);
		free(got);
		free(want);
		close(fd);
	}
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	cr_assert_eq(zr_record_copy(ds, 0, n, fd), -ENOENT); /* missing */
	cr_assert_eq(zr_record_copy(ds, 0, n + 1, fd), -ENOENT);
	cr_assert_eq(zr_record_copy(ds, 1, 0, fd), -ENOENT);
	/* a damaged stream: the last byte of the biggest record flipped */
	zr_record_stat rs;
	cr_assert_eq(zr_stat(ds, 0, n - 1, &rs), 0);
	uint8_t x;
	cr_assert_eq(pread(rs.fd, &x, 1, (off_t)(rs.offset + rs.physical_len - 1)), 1);
	x ^= 0xff;
	char chunk[400];
	snprintf(chunk, sizeof chunk, "%s/chunk/%u.zr", t_ds, rs.chunk_id);
	int cfd = open(chunk, O_WRONLY);
	cr_assert_eq(pwrite(cfd, &x, 1, (off_t)(rs.offset + rs.physical_len - 1)), 1);
	close(cfd);
	int64_t rc = zr_record_copy(ds, 0, n - 1, fd);
	if (comp == ZR_FLATE)
		cr_assert_eq(rc, ZR_ECORRUPT, "%lld", (long long)rc);
	else
		cr_assert_eq(rc, (int64_t)sizes[n - 1]); /* raw bytes are not checked */
	close(fd);
	zr_close(ds);
}

Test(gather, record_copy_raw)
{
	record_copy(ZR_RAW);
}

Test(gather, record_copy_flate)
{
	record_copy(ZR_FLATE);
}


/* zr_record_copy of a value with runs of zeros into an empty file leaves
 * them holes there (a sparse value exported stays sparse); into a file
 * that has bytes it writes them, so nothing of the file's shows through. */
Test(gather, record_copy_keeps_holes)
{
	size_t len = (8u << 20) + 100;
	uint8_t *v = calloc(1, len), *got = malloc(len);
	cr_assert(v && got);
	v[0] = 1;
	v[len - 1] = 2;
	t_create1(t_ds, ZR_RAW, 16);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	cr_assert_eq(zr_append(ds, &(zr_value){v, len}, NULL), 0, "%s", zr_errmsg(ds));
	cr_assert_eq(zr_commit(ds), 0, "%s", zr_errmsg(ds));
	char path[400];
	snprintf(path, sizeof path, "%s/out", t_dir);
	for (int full = 0; full < 2; full++) {
		int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
		cr_assert_geq(fd, 0);
		if (full) { /* the file has bytes where the value has zeros */
			memset(got, 0xEE, len);
			cr_assert_eq(pwrite(fd, got, len, 0), (ssize_t)len);
		}
		cr_assert_eq(zr_record_copy(ds, 0, 0, fd), (int64_t)len, "%s", zr_errmsg(ds));
		struct stat st;
		cr_assert_eq(fstat(fd, &st), 0);
		cr_assert_eq((size_t)st.st_size, len);
		if (!full)
			cr_assert_lt((uint64_t)st.st_blocks * 512, 1u << 20, "%llu bytes on disk",
				     (unsigned long long)st.st_blocks * 512);
		cr_assert_eq(pread(fd, got, len, 0), (ssize_t)len);
		cr_assert(memcmp(got, v, len) == 0, "the copy differs (file %s)",
			  full ? "with bytes" : "empty");
		close(fd);
	}
	zr_close(ds);
	free(v);
	free(got);
}

/* zr_record_seek finds a raw value's holes where lseek(2) of a file of its
 * bytes would (to the page), zr_record_holes counts them; a flate value and
 * a dense one are data to their end. */
Test(gather, seek_finds_holes)
{
	const size_t page = 4096, a = page, gap = 256 * 1024, b = page, tail = 128 * 1024;
	size_t len = a + gap + b + tail;
	uint8_t *v = calloc(1, len), *dense = malloc(len);
	cr_assert(v && dense);
	memset(v, 'a', a);
	memset(v + a + gap, 'b', b);
	memset(dense, 'd', len);
	t_create1(t_ds, ZR_RAW, 16);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	cr_assert_eq(zr_append(ds, &(zr_value){v, len}, NULL), 0, "%s", zr_errmsg(ds));
	cr_assert_eq(zr_append(ds, &(zr_value){dense, len}, NULL), 0, "%s", zr_errmsg(ds));
	cr_assert_eq(zr_commit(ds), 0, "%s", zr_errmsg(ds));

	/* 'a', a hole, 'b', a hole to the end: page-aligned in the chunk, so
	 * each edge within a page of the value's own */
	cr_assert_eq(zr_record_seek(ds, 0, 0, 0, SEEK_DATA), 0);
	int64_t h1 = zr_record_seek(ds, 0, 0, 0, SEEK_HOLE);
	cr_assert(h1 >= (int64_t)a && h1 < (int64_t)(a + page), "first hole at %lld",
		  (long long)h1);
	int64_t d2 = zr_record_seek(ds, 0, 0, (uint64_t)h1, SEEK_DATA);
	cr_assert(d2 > (int64_t)(a + gap - page) && d2 <= (int64_t)(a + gap), "data again at %lld",
		  (long long)d2);
	int64_t h2 = zr_record_seek(ds, 0, 0, (uint64_t)d2, SEEK_HOLE);
	cr_assert(h2 >= (int64_t)(a + gap + b) && h2 < (int64_t)(a + gap + b + page),
		  "last hole at %lld", (long long)h2);
	cr_assert_eq(zr_record_seek(ds, 0, 0, (uint64_t)h2, SEEK_DATA), -ENXIO);
	cr_assert_eq(zr_record_seek(ds, 0, 0, len - 1, SEEK_HOLE), (int64_t)len - 1);
	cr_assert_eq(zr_record_seek(ds, 0, 0, len, SEEK_DATA), -ENXIO);
	cr_assert_eq(zr_record_seek(ds, 0, 0, len, SEEK_HOLE), -ENXIO);
	int64_t holes = zr_record_holes(ds, 0, 0);
	cr_assert_eq(holes, (d2 - h1) + ((int64_t)len - h2), "holes %lld", (long long)holes);
	cr_assert_geq(holes, (int64_t)(gap + tail - 2 * page));

	/* dense: one extent */
	cr_assert_eq(zr_record_seek(ds, 0, 1, 100, SEEK_DATA), 100);
	cr_assert_eq(zr_record_seek(ds, 0, 1, 100, SEEK_HOLE), (int64_t)len);
	cr_assert_eq(zr_record_holes(ds, 0, 1), 0);
	cr_assert_eq(zr_record_seek(ds, 0, 1, 0, SEEK_SET), -EINVAL);
	cr_assert_eq(zr_record_seek(ds, 0, 2, 0, SEEK_DATA), -ENOENT);
	zr_close(ds);

	/* flate: no holes to tell */
	char flate[400];
	snprintf(flate, sizeof flate, "%s/flate", t_dir);
	t_create1(flate, ZR_FLATE, 16);
	ds = t_open(flate, ZR_RDWR);
	cr_assert_eq(zr_append(ds, &(zr_value){v, len}, NULL), 0, "%s", zr_errmsg(ds));
	cr_assert_eq(zr_commit(ds), 0, "%s", zr_errmsg(ds));
	cr_assert_eq(zr_record_seek(ds, 0, 0, a + 10, SEEK_DATA), (int64_t)(a + 10));
	cr_assert_eq(zr_record_seek(ds, 0, 0, 0, SEEK_HOLE), (int64_t)len);
	cr_assert_eq(zr_record_holes(ds, 0, 0), 0);
	zr_close(ds);
	free(v);
	free(dense);
}
