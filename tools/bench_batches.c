/*
 * bench_batches.c - zr bench batches: every batch file of one epoch read
 * through a fresh zrfs mount, against zr_gather of the same ids in process
 * and against the same records read as files of a native directory; warm
 * and cold, raw and flate, shuffle and block orders. Every consumer
 * checksums the bytes it gets, and the checksums must agree.
 */
#include "bench_i.h"
#include "zrsampler.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char help_batches[] =
	"usage: zr bench batches [--records N] [--size BYTES] [--runs R] [--dir DIR]\n"
	"                        [--zrfs PATH] [--uring]\n"
	"\n"
	"Read every batch file of one epoch of shuffle,seed=1,batch=256 through a\n"
	"fresh zrfs mount (/.batches/SPEC/epoch-0/K/data), with 1 and 2 threads,\n"
	"against (a) zr_gather of the same ids in this process and (b) the same\n"
	"records read in the same order as files of a native directory; warm (data\n"
	"in the page cache) and cold (after dropping caches: needs root), cold also\n"
	"for block,seed=1,batch=256; a flate field against (a) as well. Every\n"
	"consumer checksums the bytes it gets. Medians of R runs (default 3).\n"
	"Warm raw batch files are also read with O_DIRECT (no page cache: one copy\n"
	"fewer).\n"
	"--uring: the raw batch files also through mounts with -o uring (warm and\n"
	"cold), with the ratios of the two transports.\n";

enum bkind { B_MOUNT, B_GATHER, B_NATIVE };

struct bpass {
	enum bkind kind;
	bool direct; /* B_MOUNT: open with O_DIRECT */
	const struct bench_env *c;
	const zs_sampler *s;
	zr_dataset *ds;
	unsigned field;
	char dir[PATH_MAX + 300];  /* B_MOUNT: the epoch directory */
	atomic_ulong next;
	atomic_ullong bytes, sum;
	atomic_int bad;
};

static uint64_t sum64(const uint8_t *p, size_t n)
{
	uint64_t a = 0, v;
	size_t k = 0;

	for (; k + 8 <= n; k += 8) {
		memcpy(&v, p + k, 8);
		a += v;
	}
	for (; k < n; k++)
		a += p[k];
	return a;
}

/* Read all of @path through @buf (1 MiB), opened with @flags added, adding
 * to *sum and *bytes: 0, or -1 if it cannot be opened or read. */
static int read_sum(const char *path, int flags, uint8_t *buf, uint64_t *sum, uint64_t *bytes)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | flags);
	ssize_t r = 0;

	while (fd >= 0 && (r = read(fd, buf, 1 << 20)) > 0) {
		*sum += sum64(buf, (size_t)r);
		*bytes += (uint64_t)r;
	}
	if (fd >= 0)
		close(fd);
	return fd < 0 || r < 0 ? -1 : 0;
}

static void *batch_worker(void *arg)
{
	struct bpass *p = arg;
	uint64_t *ids = malloc(zs_batch_max(p->s) * sizeof *ids), k;
	uint8_t *buf = aligned_alloc(4096, 1 << 20); /* as O_DIRECT may want */
	char path[PATH_MAX + 400];

	while (ids && buf && (k = atomic_fetch_add(&p->next, 1)) < zs_steps(p->s)) {
		uint64_t bytes = 0, sum = 0;
		int64_t n = zs_batch(p->s, 0, k, ids);
		if (p->kind == B_MOUNT) {
			snprintf(path, sizeof path, "%s/%llu/%s", p->dir, (unsigned long long)k,
				 p->field ? "z" : "data");
			if (read_sum(path, p->direct ? O_DIRECT : 0, buf, &sum, &bytes) < 0)
				atomic_store(&p->bad, 1);
		} else if (p->kind == B_GATHER) {
			zr_batch *b;
			size_t m;
			if (zr_gather(p->ds, p->field, ids, (size_t)n, &b) < 0) {
				atomic_store(&p->bad, 1);
				break;
			}
			const zr_slice *sl = zr_batch_records(b, &m);
			for (size_t i = 0; i < m; i++) {
				sum += sum64(sl[i].data, sl[i].len);
				bytes += sl[i].len;
			}
			zr_batch_release(b);
		} else {
			for (int64_t i = 0; i < n; i++) {
				snprintf(path, sizeof path, "%s/%llu", p->c->tree,
					 (unsigned long long)ids[i]);
				if (read_sum(path, 0, buf, &sum, &bytes) < 0)
					atomic_store(&p->bad, 1);
			}
		}
		atomic_fetch_add(&p->bytes, bytes);
		atomic_fetch_add(&p->sum, sum);
	}
	free(ids);
	free(buf);
	return NULL;
}

/* One pass of @kind over the epoch of @spec: MB/s, and the checksum. */
static int batch_pass(struct bench_env *c, enum bkind kind, bool direct, const char *spec,
		      unsigned field, int threads, bool cold, double *mbs, uint64_t *sum)
{
	struct bpass p = {.kind = kind, .direct = direct, .c = c, .field = field};
	zs_spec sp;
	zs_sampler *s = NULL;
	pthread_t th[2];
	int rc = 0;
	double t0;

	if (zs_spec_parse(spec, &sp) < 0 || zs_sampler_create(&s, &sp, c->records) < 0) {
		zr_warn("bench: %s: %s", spec, zs_errmsg());
		return -1;
	}
	p.s = s;
	atomic_init(&p.next, 0);
	atomic_init(&p.bytes, 0);
	atomic_init(&p.sum, 0);
	atomic_init(&p.bad, 0);
	if (cold && bench_drop_caches() < 0) {
		zr_warn("bench: cannot drop caches (root needed)");
		rc = -1;
	}
	if (rc == 0 && kind == B_MOUNT) {
		rc = bench_mount_zrfs(c);
		snprintf(p.dir, sizeof p.dir, "%s/.batches/%s/epoch-0", c->zmnt, spec);
	}
	if (rc == 0 && kind == B_GATHER)
		rc = zr_open(&p.ds, c->ds, ZR_RDONLY) < 0 ? zr_fail(-1, "bench") : 0;
	if (rc == 0) {
		t0 = now_sec();
		for (int i = 0; i < threads; i++)
			pthread_create(&th[i], NULL, batch_worker, &p);
		for (int i = 0; i < threads; i++)
			pthread_join(th[i], NULL);
		*mbs = (double)atomic_load(&p.bytes) / (now_sec() - t0) / 1e6;
		*sum = atomic_load(&p.sum);
		if (atomic_load(&p.bad)) {
			zr_warn("bench: reading batches (%s) failed", spec);
			rc = -1;
		}
	}
	if (kind == B_MOUNT)
		bench_unmount_zrfs(c);
	zr_close(p.ds);
	zs_sampler_destroy(s);
	return rc;
}

enum { BM, BA, BN, BMD, BZM, BZA, CM, CA, CN, CBM, CBA, BMU, BMUD, CMU, BNV };
static const char *const bnames[BNV] = {
	"warm: zrfs batch files",    "warm: (a) zr_gather",         "warm: (b) native files",
	"warm: zrfs, O_DIRECT",      "warm flate: zrfs batches",    "warm flate: (a) zr_gather",
	"cold: zrfs batch files",    "cold: (a) zr_gather",         "cold: (b) native files",
	"cold block: zrfs batch files", "cold block: (a) zr_gather", "warm: zrfs -o uring",
	"warm: -o uring, O_DIRECT",  "cold: zrfs -o uring",
};

/* Run @r with @t + 1 threads: every pass of the plan, into v[t][slot][r];
 * the consumers must agree on the bytes read. 0 or 1 (said). */
static int run_plan(struct bench_env *c, const char *shuf, const char *blk, uint64_t r, int t,
		    double (*v)[BNV][100])
{
	int rc = 0;

	struct {
		int slot;
		enum bkind kind;
		bool direct;
		const char *spec;
		unsigned field;
		bool cold;
		bool uring;
	} plan[] = {
		{BM, B_MOUNT, false, shuf, 0, false, false},
		{BA, B_GATHER, false, shuf, 0, false, false},
		{BN, B_NATIVE, false, shuf, 0, false, false},
		{BMD, B_MOUNT, true, shuf, 0, false, false},
		{BZM, B_MOUNT, false, shuf, 1, false, false},
		{BZA, B_GATHER, false, shuf, 1, false, false},
		{CM, B_MOUNT, false, shuf, 0, true, false},
		{CA, B_GATHER, false, shuf, 0, true, false},
		{CN, B_NATIVE, false, shuf, 0, true, false},
		{CBM, B_MOUNT, false, blk, 0, true, false},
		{CBA, B_GATHER, false, blk, 0, true, false},
		{BMU, B_MOUNT, false, shuf, 0, false, true},
		{BMUD, B_MOUNT, true, shuf, 0, false, true},
		{CMU, B_MOUNT, false, shuf, 0, true, true},
	};
	uint64_t sums[BNV] = {0};
	for (size_t i = 0; i < sizeof plan / sizeof *plan && rc == 0; i++) {
		double warm;
		uint64_t ws;
		if (plan[i].uring && !c->uring)
			continue;
		c->zopts = plan[i].uring ? "uring" : NULL;
		/* warm means warm: an untimed pass first */
		if (!plan[i].cold)
			rc = batch_pass(c, plan[i].kind, plan[i].direct, plan[i].spec,
					plan[i].field, t + 1, false, &warm, &ws);
		if (rc == 0)
			rc = batch_pass(c, plan[i].kind, plan[i].direct, plan[i].spec,
					plan[i].field, t + 1, plan[i].cold,
					&v[t][plan[i].slot][r], &sums[plan[i].slot]);
	}
	if (rc == 0 && (sums[BM] != sums[BA] || sums[BM] != sums[BN] ||
			sums[BMD] != sums[BA] || sums[BZM] != sums[BZA] ||
			sums[CBM] != sums[CBA] ||
			(c->uring && (sums[BMU] != sums[BA] || sums[BMUD] != sums[BA] ||
				     sums[CMU] != sums[BA])))) {
		zr_warn("bench: the consumers disagree on the bytes they read");
		rc = 1;
	}
	return rc;
}

/* Medians over the runs, and the ratios with their targets. */
static void report(const struct bench_env *c, double (*v)[BNV][100])
{
	double m[2][BNV];
	for (int t = 0; t < 2; t++)
		for (int k = 0; k < BNV; k++) {
			double col[100];
			memcpy(col, v[t][k], c->runs * sizeof *col);
			m[t][k] = bench_median(col, c->runs);
		}
	printf("\n%-32s %12s %12s\n", "MB/s (median)", "1 thread", "2 threads");
	for (int k = 0; k < (c->uring ? BNV : BMU); k++)
		printf("%-32s %12.0f %12.0f\n", bnames[k], m[0][k], m[1][k]);
	printf("\n%-40s %9s %9s   %s\n", "ratios of medians", "1 thread", "2 threads",
	       "target");
	printf("%-40s %8.2fx %8.2fx   >= 0.7x\n", "warm: zrfs / (a) gather", m[0][BM] / m[0][BA],
	       m[1][BM] / m[1][BA]);
	printf("%-40s %8.2fx %8.2fx   >= 3x\n", "warm: zrfs / (b) native files",
	       m[0][BM] / m[0][BN], m[1][BM] / m[1][BN]);
	printf("%-40s %8.2fx %8.2fx   (what O_DIRECT buys)\n", "warm: O_DIRECT / page cache",
	       m[0][BMD] / m[0][BM], m[1][BMD] / m[1][BM]);
	printf("%-40s %8.2fx %8.2fx\n", "warm: zrfs O_DIRECT / (a) gather",
	       m[0][BMD] / m[0][BA], m[1][BMD] / m[1][BA]);
	printf("%-40s %8.2fx %8.2fx   >= 0.8x (2 threads)\n", "warm flate: zrfs / (a) gather",
	       m[0][BZM] / m[0][BZA], m[1][BZM] / m[1][BZA]);
	printf("%-40s %8.2fx %8.2fx   >= 0.7x\n", "cold: zrfs / (a) gather", m[0][CM] / m[0][CA],
	       m[1][CM] / m[1][CA]);
	printf("%-40s %8.2fx %8.2fx   >= 3x\n", "cold: zrfs / (b) native files",
	       m[0][CM] / m[0][CN], m[1][CM] / m[1][CN]);
	printf("%-40s %8.2fx %8.2fx   (what block buys)\n", "cold: zrfs block / zrfs shuffle",
	       m[0][CBM] / m[0][CM], m[1][CBM] / m[1][CM]);
	if (c->uring) {
		printf("%-40s %8.2fx %8.2fx   >= 1.5x\n", "warm: -o uring / /dev/fuse",
		       m[0][BMU] / m[0][BM], m[1][BMU] / m[1][BM]);
		printf("%-40s %8.2fx %8.2fx   >= 0.5x\n", "warm: -o uring / (a) gather",
		       m[0][BMU] / m[0][BA], m[1][BMU] / m[1][BA]);
		printf("%-40s %8.2fx %8.2fx\n", "warm O_DIRECT: -o uring / /dev/fuse",
		       m[0][BMUD] / m[0][BMD], m[1][BMUD] / m[1][BMD]);
		printf("%-40s %8.2fx %8.2fx   >= 1.0x (no regression)\n",
		       "cold: -o uring / /dev/fuse", m[0][CMU] / m[0][CM], m[1][CMU] / m[1][CM]);
	}
}

int bench_batches(int argc, char **argv)
{
	struct bench_env c = {.records = 50000, .size = 8192, .runs = 3, .dir = "/var/tmp"};
	const char *shuf = "shuffle,seed=1,batch=256", *blk = "block,seed=1,batch=256";
	char zrfs_path[PATH_MAX];
	double v[2][BNV][100] = {{{0}}}; /* columns not measured stay 0 */
	int rc = 0;

	bench_find_zrfs(&c, zrfs_path);
	if (!bench_start(&c, argc, argv, help_batches, "batches", 256, true, &rc))
		return rc;
	printf("zr bench batches: %llu records x %llu B, %s, %llu runs, zrfs %s\n",
	       (unsigned long long)c.records, (unsigned long long)c.size, shuf,
	       (unsigned long long)c.runs, c.zrfs);
	fflush(stdout);
	if (bench_make_inputs(&c, true, false) < 0)
		rc = 1;
	for (uint64_t r = 0; r < c.runs && rc == 0; r++) {
		for (int t = 0; t < 2 && rc == 0; t++) {
			rc = run_plan(&c, shuf, blk, r, t, v);
			if (rc == 0) {
				printf("  run %llu, %d thread%s:", (unsigned long long)r + 1, t + 1,
				       t ? "s" : "");
				for (int k = 0; k < (c.uring ? BNV : BMU); k++)
					printf(" %.0f", v[t][k][r]);
				printf(" MB/s\n");
				fflush(stdout);
			}
		}
	}
	if (rc == 0)
		report(&c, v);
	bench_finish(&c);
	return rc;
}
