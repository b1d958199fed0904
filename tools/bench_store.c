/*
 * bench_store.c - zr bench store: the store alone, no mount.
 *
 * Append N records of S bytes (raw) and commit, against write() of the same
 * bytes to one flat file and fdatasync; gather them in a shuffled order in
 * batches, against a pread loop at the same offsets of the flat file. Both
 * consumers checksum every byte they get, so zero-copy gets no credit for
 * bytes nobody reads. Then a flate dataset of compressible records
 * gathered by 2 threads, against zlib's one-thread inflate of the same
 * streams from memory.
 */
#include "bench_i.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

static const char help[] =
	"usage: zr bench store [--records N] [--size BYTES] [--runs R] [--dir DIR]\n"
	"\n"
	"Append and gather against a flat file and a pread loop; gather of a flate\n"
	"field by 2 threads against zlib inflating the same streams in memory.\n"
	"  --records N   records to write (default 50000)\n"
	"  --size BYTES  bytes per record, K/M suffixes allowed (default 8K)\n"
	"  --runs R      repetitions; medians are reported (default 5)\n"
	"  --dir DIR     where scratch files go (default /var/tmp); removed after\n";

struct cfg {
	uint64_t records, size, runs;
	const char *dir;
};

/* Record @i: random bytes, or (compressible) bytes from a 16-letter alphabet. */
static void fill(uint8_t *p, size_t n, uint64_t i, bool compressible)
{
	uint64_t s = i * 0x100000001b3ULL + 7;

	for (size_t k = 0; k < n; k += 8) {
		uint64_t v = bench_splitmix(&s);
		if (compressible)
			v = (v & 0x0f0f0f0f0f0f0f0fULL) | 0x6060606060606060ULL;
		memcpy(p + k, &v, n - k < 8 ? n - k : 8);
	}
}

static uint64_t checksum(const uint8_t *p, size_t n)
{
	uint64_t a = 0, v;
	size_t k = 0;

	for (; k + 8 <= n; k += 8) {
		memcpy(&v, p + k, 8);
		a ^= v + (a << 1);
	}
	for (; k < n; k++)
		a += p[k];
	return a;
}

/* ---- the workloads ---- */

static int make_dataset(const char *path, const struct cfg *c, zr_compress comp, bool compressible,
			double *secs)
{
	zr_field_spec f = {.name = "data", .dtype = ZR_BYTES, .compress = comp};
	uint8_t *rec = malloc(c->size);
	zr_dataset *ds = NULL;
	double t0;
	int rc;

	rm_tree(path);
	t0 = now_sec();
	rc = zr_create(path, &f, 1, NULL);
	if (rc == 0)
		rc = zr_open(&ds, path, ZR_RDWR);
	for (uint64_t i = 0; i < c->records && rc == 0; i++) {
		zr_value v = {rec, c->size};
		fill(rec, c->size, i, compressible);
		rc = zr_append(ds, &v, NULL);
	}
	if (rc == 0)
		rc = zr_commit(ds);
	*secs = now_sec() - t0;
	zr_close(ds);
	free(rec);
	return rc < 0 ? zr_fail(rc, "bench") : 0;
}

static int flat_write(const char *path, const struct cfg *c, double *secs)
{
	uint8_t *rec = malloc(c->size);
	int fd, rc = 0;
	double t0;

	unlink(path);
	t0 = now_sec();
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	for (uint64_t i = 0; i < c->records && fd >= 0 && rc == 0; i++) {
		fill(rec, c->size, i, false);
		rc = write_all(fd, rec, c->size);
	}
	if (fd < 0 || rc < 0 || fdatasync(fd) < 0) {
		zr_warn("bench: %s: %s", path, strerror(errno));
		rc = -1;
	}
	*secs = now_sec() - t0;
	if (fd >= 0)
		close(fd);
	free(rec);
	return rc;
}

#define BATCH 256

static int gather_pass(const char *path, const uint64_t *ids, uint64_t n, double *secs,
		       uint64_t *sum)
{
	zr_dataset *ds;
	double t0;
	int rc = zr_open(&ds, path, ZR_RDONLY);

	if (rc < 0)
		return zr_fail(rc, "bench");
	*sum = 0;
	t0 = now_sec();
	for (uint64_t i = 0; i < n && rc == 0; i += BATCH) {
		size_t k = n - i < BATCH ? n - i : BATCH, m;
		zr_batch *b;
		rc = zr_gather(ds, 0, ids + i, k, &b);
		if (rc < 0)
			break;
		const zr_slice *s = zr_batch_records(b, &m);
		for (size_t j = 0; j < m; j++)
			*sum += checksum(s[j].data, s[j].len);
		zr_batch_release(b);
	}
	*secs = now_sec() - t0;
	zr_close(ds);
	return rc < 0 ? zr_fail(rc, "bench") : 0;
}

static int pread_pass(const char *path, const uint64_t *ids, uint64_t n, uint64_t size,
		      double *secs, uint64_t *sum)
{
	uint8_t *buf = malloc(size);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	double t0;

	*sum = 0;
	if (fd < 0 || !buf) {
		zr_warn("bench: %s: %s", path, strerror(errno));
		free(buf);
		return -1;
	}
	t0 = now_sec();
	for (uint64_t i = 0; i < n; i++) {
		if (pread(fd, buf, size, (off_t)(ids[i] * size)) != (ssize_t)size) {
			zr_warn("bench: %s: short read", path);
			break;
		}
		*sum += checksum(buf, size);
	}
	*secs = now_sec() - t0;
	close(fd);
	free(buf);
	return 0;
}

struct flate_job {
	const char *path;
	const uint64_t *ids;
	uint64_t n;
	int rc;
	uint64_t sum;
};

static void *flate_worker(void *arg)
{
	struct flate_job *j = arg;
	double secs;

	j->rc = gather_pass(j->path, j->ids, j->n, &secs, &j->sum);
	return NULL;
}

/* 2 threads, each gathering half of the shuffled ids. */
static int flate_gather2(const char *path, const uint64_t *ids, uint64_t n, double *secs)
{
	struct flate_job jobs[2] = {{path, ids, n / 2, 0, 0}, {path, ids + n / 2, n - n / 2, 0, 0}};
	pthread_t th[2];
	double t0 = now_sec();

	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, flate_worker, &jobs[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	*secs = now_sec() - t0;
	return jobs[0].rc < 0 ? jobs[0].rc : jobs[1].rc;
}

/* zlib alone: inflate the same records, compressed in memory beforehand. */
static int zlib_inflate1(const struct cfg *c, const uint64_t *ids, uint64_t n, double *secs)
{
	uLong bound = compressBound((uLong)c->size);
	uint8_t *z = malloc(bound * c->records), *rec = malloc(c->size);
	uLongf *zlen = malloc(c->records * sizeof *zlen);
	uint64_t sum = 0;
	double t0;

	if (!z || !rec || !zlen) {
		free(z);
		free(rec);
		free(zlen);
		zr_warn("bench: out of memory");
		return -1;
	}
	for (uint64_t i = 0; i < c->records; i++) {
		fill(rec, c->size, i, true);
		zlen[i] = bound;
		compress2(z + i * bound, &zlen[i], rec, (uLong)c->size, Z_DEFAULT_COMPRESSION);
	}
	t0 = now_sec();
	for (uint64_t i = 0; i < n; i++) {
		uLongf out = (uLongf)c->size;
		uncompress(rec, &out, z + ids[i] * bound, zlen[ids[i]]);
		sum += checksum(rec, out);
	}
	*secs = now_sec() - t0;
	free(z);
	free(rec);
	free(zlen);
	return sum == 42 ? 1 : 0; /* keep the work observable */
}

static int run_store(const struct cfg *c)
{
	char base[4096], ds_raw[4200], ds_flate[4200], flat[4200];
	double *v = calloc(c->runs * 8, sizeof *v);
	uint64_t *ids = malloc(c->records * sizeof *ids);
	double mb = (double)c->records * (double)c->size / 1e6;
	int rc = 0;

	snprintf(base, sizeof base, "%s/zr-bench-XXXXXX", c->dir);
	if (!v || !ids || !mkdtemp(base)) {
		zr_warn("bench: cannot create a scratch directory in %s: %s", c->dir,
			strerror(errno));
		free(v);
		free(ids);
		return 1;
	}
	bench_guard(base);
	snprintf(ds_raw, sizeof ds_raw, "%s/raw", base);
	snprintf(ds_flate, sizeof ds_flate, "%s/flate", base);
	snprintf(flat, sizeof flat, "%s/flat.bin", base);
	for (uint64_t i = 0; i < c->records; i++)
		ids[i] = i;
	bench_shuffle(ids, c->records, 1);

	printf("zr bench store: %llu records x %llu B (%.0f MB), %llu runs, scratch %s\n",
	       (unsigned long long)c->records, (unsigned long long)c->size, mb,
	       (unsigned long long)c->runs, base);
	double *app = v, *fw = v + c->runs, *ga = v + 2 * c->runs, *pr = v + 3 * c->runs;
	double *fl = v + 4 * c->runs, *zl = v + 5 * c->runs, *r1 = v + 6 * c->runs,
	       *r2 = v + 7 * c->runs;
	for (uint64_t r = 0; r < c->runs && rc == 0; r++) {
		double t;
		uint64_t s1, s2;
		/* alternate the order so neither side always runs on a fresher cache */
		if (r % 2 == 0) {
			rc = make_dataset(ds_raw, c, ZR_RAW, false, &app[r]);
			rc = rc ? rc : flat_write(flat, c, &fw[r]);
		} else {
			rc = flat_write(flat, c, &fw[r]);
			rc = rc ? rc : make_dataset(ds_raw, c, ZR_RAW, false, &app[r]);
		}
		rc = rc ? rc : gather_pass(ds_raw, ids, c->records, &t, &s1); /* maps, faults in */
		rc = rc ? rc : gather_pass(ds_raw, ids, c->records, &ga[r], &s1);
		rc = rc ? rc : pread_pass(flat, ids, c->records, c->size, &pr[r], &s2);
		if (rc == 0 && s1 != s2) {
			zr_warn("bench: gather and pread disagree on the bytes (%llx != %llx)",
				(unsigned long long)s1, (unsigned long long)s2);
			rc = 1;
		}
		r1[r] = (mb / app[r]) / (mb / fw[r]);
		r2[r] = (mb / ga[r]) / (mb / pr[r]);
		printf("  run %llu: append %.0f MB/s, flat write %.0f MB/s; gather %.0f MB/s, pread %.0f MB/s\n",
		       (unsigned long long)r + 1, mb / app[r], mb / fw[r], mb / ga[r], mb / pr[r]);
	}
	if (rc == 0)
		{
		double t;
		rc = make_dataset(ds_flate, c, ZR_FLATE, true, &t);
	}
	for (uint64_t r = 0; r < c->runs && rc == 0; r++) {
		rc = flate_gather2(ds_flate, ids, c->records, &fl[r]);
		if (rc == 0)
			zlib_inflate1(c, ids, c->records, &zl[r]);
	}
	if (rc == 0) {
		printf("\n%-34s %12s   %s\n", "workload (median)", "rate", "ratio to baseline");
		printf("%-34s %9.0f MB/s   %.2fx flat-file write\n", "append + commit (zr, raw)",
		       mb / bench_median(app, c->runs), bench_median(r1, c->runs));
		printf("%-34s %9.0f MB/s\n", "flat-file write + fdatasync", mb / bench_median(fw, c->runs));
		printf("%-34s %9.0f MB/s   %.2fx pread loop\n", "gather, shuffled, warm (zr, raw)",
		       mb / bench_median(ga, c->runs), bench_median(r2, c->runs));
		printf("%-34s %9.0f MB/s\n", "pread loop, same order", mb / bench_median(pr, c->runs));
		printf("%-34s %9.0f MB/s   %.2fx zlib 1 thread\n", "gather flate, 2 threads (zr)",
		       mb / bench_median(fl, c->runs), bench_median(zl, c->runs) / bench_median(fl, c->runs));
		printf("%-34s %9.0f MB/s\n", "zlib inflate, 1 thread, in memory",
		       mb / bench_median(zl, c->runs));
	}
	bench_remove(base);
	free(v);
	free(ids);
	return rc ? 1 : 0;
}

int bench_store(int argc, char **argv)
{
	struct bench_args ba = {.records = 50000, .size = 8192, .runs = 5, .dir = "/var/tmp", .records_min = 1};
	int rc = bench_args_parse(argc, argv, help, &ba);

	if (rc != 0)
		return rc > 0 ? 0 : EXIT_USAGE;
	return run_store(&(struct cfg){ba.records, ba.size, ba.runs, ba.dir});
}
