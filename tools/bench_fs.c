/*
 * bench_fs.c - zr bench fs: reading records as files through zrfs, against
 * the same files in a native directory and in a squashfs image mounted with
 * squashfuse_ll.
 *
 * Set-up, once: a dataset of N records of S bytes (one raw field "data",
 * u8 of shape S, so the mount also has data.npy), the same records as N
 * files in a directory of the scratch filesystem, and that directory packed
 * by `mksquashfs -noI -noD -noF -noX` (uncompressed). Then, per run and
 * per thread count (1, 2): mount fresh, read every file once in one
 * shuffled order (open, read to EOF, close; threads share the order), which
 * is the first pass, then again, the second pass; the native directory is
 * read twice too and its second (warm) pass is the baseline. Also per run:
 * `cat data.npy` on a fresh mount against reading a native file of the same
 * size from the page cache, and `ls -lR` of a fresh mount against the
 * native directory. Every file read is checked for its size.
 */
#include "bench_i.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char help[] =
	"usage: zr bench fs [--records N] [--size BYTES] [--runs R] [--dir DIR]\n"
	"                   [--zrfs PATH] [--uring]\n"
	"\n"
	"Read N record files (default 50000 x 8K) once in a shuffled order through\n"
	"a fresh zrfs mount (first pass) and again (second pass), with 1 and 2\n"
	"threads, against the same files in a native directory (warm) and in an\n"
	"uncompressed squashfs image mounted with squashfuse_ll; also cat of the\n"
	"mount's .npy view and ls -lR. Needs root (or FUSE access), mksquashfs and\n"
	"squashfuse_ll (packaging/deps.sh --bench installs them). Medians of R runs\n"
	"(default 5). --zrfs: the zrfs binary (default: next to zr, or in PATH).\n"
	"--uring: also through mounts with -o uring (the kernel must offer FUSE over\n"
	"io_uring), with the ratios of the two transports.\n";


static int mount_squash(struct bench_env *c)
{
	char *argv[] = {"squashfuse_ll", c->img, c->smnt, NULL};
	if (bench_run(argv) != 0) {
		zr_warn("bench: squashfuse_ll %s %s failed", c->img, c->smnt);
		return -1;
	}
	return 0;
}


/* ---- the reader ---- */

struct pass {
	const char *root;     /* files are root/<id> */
	const uint64_t *order;
	uint64_t n, size;
	atomic_ulong next;
	atomic_int bad;
};

static void *reader(void *arg)
{
	struct pass *p = arg;
	char path[PATH_MAX + 32], *buf = malloc(1 << 16);
	uint64_t i;

	while (buf && (i = atomic_fetch_add(&p->next, 1)) < p->n) {
		uint64_t got = 0;
		ssize_t r;
		snprintf(path, sizeof path, "%s/%llu", p->root, (unsigned long long)p->order[i]);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			atomic_store(&p->bad, 1);
			break;
		}
		while ((r = read(fd, buf, 1 << 16)) > 0)
			got += (uint64_t)r;
		close(fd);
		if (r < 0 || got != p->size)
			atomic_store(&p->bad, 1);
	}
	free(buf);
	return NULL;
}

/* One pass over every file with @threads threads: files per second. */
static int read_pass(const char *root, const uint64_t *order, const struct bench_env *c, int threads,
		     double *rate)
{
	struct pass p = {.root = root, .order = order, .n = c->records, .size = c->size};
	pthread_t th[2];
	double t0 = now_sec();

	atomic_init(&p.next, 0);
	atomic_init(&p.bad, 0);
	for (int i = 0; i < threads; i++)
		pthread_create(&th[i], NULL, reader, &p);
	for (int i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	*rate = (double)c->records / (now_sec() - t0);
	if (atomic_load(&p.bad)) {
		zr_warn("bench: reading the files under %s failed or gave wrong sizes", root);
		return -1;
	}
	return 0;
}

/* Read a whole file in 1 MiB pieces, like cat: seconds. */
static int cat_file(const char *path, uint64_t want, double *secs)
{
	char *buf = malloc(1 << 20);
	uint64_t got = 0;
	ssize_t r = 0;
	double t0 = now_sec();
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	while (fd >= 0 && buf && (r = read(fd, buf, 1 << 20)) > 0)
		got += (uint64_t)r;
	*secs = now_sec() - t0;
	if (fd >= 0)
		close(fd);
	free(buf);
	if (fd < 0 || r < 0 || got != want) {
		zr_warn("bench: reading %s failed", path);
		return -1;
	}
	return 0;
}

static int ls_lr(const char *dir, double *secs)
{
	char *argv[] = {"ls", "-lR", (char *)dir, NULL};
	double t0 = now_sec();
	int rc = bench_run(argv);

	*secs = now_sec() - t0;
	if (rc != 0)
		zr_warn("bench: ls -lR %s failed", dir);
	return rc == 0 ? 0 : -1;
}


/* ---- the benchmark ---- */

enum { Z1, Z2, ZS1, ZS2, S1, S2, SS1, SS2, N1, N2, NPY, NFLAT, LSZ, LSN, U1, U2, US1, US2, NPYU,
       NV };

/* Mount the dataset fresh, with -o @zopts (NULL: none). */
static int mount_with(struct bench_env *c, const char *zopts)
{
	int rc;

	c->zopts = zopts;
	rc = bench_mount_zrfs(c);
	c->zopts = NULL;
	return rc;
}

/* First and second pass through a fresh mount of the dataset (with -o
 * @zopts), into v[first] and v[second]. */
static int zrfs_passes(struct bench_env *c, const char *zopts, const uint64_t *order, int th,
		       double *first, double *second)
{
	char zdata[PATH_MAX + 8];
	int rc;

	snprintf(zdata, sizeof zdata, "%s/data", c->zmnt);
	if (mount_with(c, zopts) < 0)
		return -1;
	rc = read_pass(zdata, order, c, th, first);
	if (rc == 0)
		rc = read_pass(zdata, order, c, th, second);
	bench_unmount_zrfs(c);
	return rc;
}

/* cat of the .npy view on a fresh mount (with -o @zopts): seconds; and
 * with @ls_secs, ls -lR of the mount after it (the listing is still cold). */
static int zrfs_cat_npy(struct bench_env *c, const char *zopts, uint64_t *size, double *secs,
			double *ls_secs)
{
	char npy[PATH_MAX + 16];
	struct stat st;
	int rc;

	snprintf(npy, sizeof npy, "%s/data.npy", c->zmnt);
	if (mount_with(c, zopts) < 0)
		return -1;
	rc = stat(npy, &st);
	*size = (uint64_t)st.st_size;
	if (rc == 0)
		rc = cat_file(npy, *size, secs);
	if (rc == 0 && ls_secs)
		rc = ls_lr(c->zmnt, ls_secs);
	bench_unmount_zrfs(c);
	return rc;
}

static int one_run(struct bench_env *c, const uint64_t *order, double *v)
{
	uint64_t npy_size = 0;
	double t;

	for (int th = 1; th <= 2; th++) {
		/* native: the first pass warms, the second is the baseline */
		if (read_pass(c->tree, order, c, th, &t) < 0 ||
		    read_pass(c->tree, order, c, th, &v[th == 1 ? N1 : N2]) < 0)
			return -1;
		if (zrfs_passes(c, NULL, order, th, &v[th == 1 ? Z1 : Z2], &v[th == 1 ? ZS1 : ZS2]) < 0)
			return -1;
		if (c->uring && zrfs_passes(c, "uring", order, th, &v[th == 1 ? U1 : U2],
					    &v[th == 1 ? US1 : US2]) < 0)
			return -1;
		if (mount_squash(c) < 0)
			return -1;
		int rc = read_pass(c->smnt, order, c, th, &v[th == 1 ? S1 : S2]);
		if (rc == 0)
			rc = read_pass(c->smnt, order, c, th, &v[th == 1 ? SS1 : SS2]);
		bench_unmount(c->smnt);
		if (rc < 0)
			return -1;
	}
	/* cat of the .npy view on a fresh mount; a native file of its size, warm */
	int rc = zrfs_cat_npy(c, NULL, &npy_size, &v[NPY], &v[LSZ]);
	if (rc == 0 && c->uring)
		rc = zrfs_cat_npy(c, "uring", &npy_size, &v[NPYU], NULL);
	if (rc < 0 || cat_file(c->flat, npy_size, &t) < 0 || cat_file(c->flat, npy_size, &v[NFLAT]) < 0 ||
	    ls_lr(c->tree, &t) < 0 || ls_lr(c->tree, &v[LSN]) < 0)
		return -1;
	/* a native tree one level deep, like the mount: <tree> holds the files */
	return 0;
}

static int make_flat(struct bench_env *c)
{
	char npy[PATH_MAX + 16];
	struct stat st;
	int rc = -1;

	if (bench_mount_zrfs(c) < 0)
		return -1;
	snprintf(npy, sizeof npy, "%s/data.npy", c->zmnt);
	if (stat(npy, &st) == 0) {
		int fd = open(c->flat, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		char *buf = calloc(1, 1 << 20);
		rc = fd >= 0 && buf ? 0 : -1;
		for (off_t done = 0; rc == 0 && done < st.st_size; done += 1 << 20) {
			size_t n = st.st_size - done < (1 << 20) ? (size_t)(st.st_size - done) : 1 << 20;
			rc = write_all(fd, buf, n);
		}
		if (fd >= 0)
			close(fd);
		free(buf);
	}
	bench_unmount_zrfs(c);
	return rc;
}

/* The transports side by side (--uring): medians, and medians of the
 * per-run ratios -o uring / /dev/fuse. */
static void print_transports(const struct bench_env *c, double (*v)[NV], const double *m)
{
	static const struct {
		const char *what;
		int dev[2], ur[2];
		bool time;
	} rows[] = {
		{"first pass", {Z1, Z2}, {U1, U2}, false},
		{"second pass", {ZS1, ZS2}, {US1, US2}, false},
		{"cat data.npy (1 thread)", {NPY, NPY}, {NPYU, NPYU}, true},
	};

	printf("\n%-44s %12s %12s\n", "by transport (median)", "1 thread", "2 threads");
	for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
		if (rows[i].time) {
			double mb = (double)c->records * (double)c->size / 1e6;
			printf("%-44s %9.0f MB/s (/dev/fuse), %.0f MB/s (-o uring)\n", rows[i].what,
			       mb / m[rows[i].dev[0]], mb / m[rows[i].ur[0]]);
			continue;
		}
		char a[64], b[64];
		snprintf(a, sizeof a, "/dev/fuse, %s", rows[i].what);
		snprintf(b, sizeof b, "-o uring, %s", rows[i].what);
		printf("%-44s %12.0f %12.0f   files/s\n", a, m[rows[i].dev[0]], m[rows[i].dev[1]]);
		printf("%-44s %12.0f %12.0f   files/s\n", b, m[rows[i].ur[0]], m[rows[i].ur[1]]);
	}
	printf("\n%-44s %12s %12s   %s\n", "-o uring / /dev/fuse (median of ratios)", "1 thread",
	       "2 threads", "target");
	for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
		double r[2];
		for (int t = 0; t < 2; t++) {
			double col[100];
			for (uint64_t k = 0; k < c->runs; k++)
				col[k] = rows[i].time ? v[k][rows[i].dev[t]] / v[k][rows[i].ur[t]]
						      : v[k][rows[i].ur[t]] / v[k][rows[i].dev[t]];
			r[t] = bench_median(col, c->runs);
		}
		if (rows[i].time)
			printf("%-44s %11.2fx %12s   %s\n", rows[i].what, r[0], "",
			       ">= 1.0x (no regression)");
		else
			printf("%-44s %11.2fx %11.2fx   %s\n", rows[i].what, r[0], r[1],
			       i == 0 ? ">= 1.8x" : ">= 1.0x (no regression)");
	}
}

int bench_fs(int argc, char **argv)
{
	struct bench_env c = {.records = 50000, .size = 8192, .runs = 5, .dir = "/var/tmp"};
	char zrfs_path[PATH_MAX];
	double (*v)[NV];
	uint64_t *order;
	int rc = 0;

	bench_find_zrfs(&c, zrfs_path);
	if (!bench_start(&c, argc, argv, help, "fs", 1, true, &rc))
		return rc;
	v = calloc(c.runs, sizeof *v);
	order = malloc(c.records * sizeof *order);
	printf("zr bench fs: %llu files x %llu B, %llu runs, zrfs %s, scratch %s\n",
	       (unsigned long long)c.records, (unsigned long long)c.size,
	       (unsigned long long)c.runs, c.zrfs, c.base);
	fflush(stdout);
	if (!v || !order || bench_make_inputs(&c, false, true) < 0 || make_flat(&c) < 0)
		rc = 1;
	for (uint64_t i = 0; order && i < c.records; i++)
		order[i] = i;
	if (order)
		bench_shuffle(order, c.records, 7);
	for (uint64_t r = 0; r < c.runs && rc == 0; r++) {
		if (one_run(&c, order, v[r]) < 0) {
			rc = 1;
			break;
		}
		printf("  run %llu: 1 thread: zrfs %.0f / %.0f, squashfuse_ll %.0f / %.0f, native %.0f "
		       "files/s; 2 threads: zrfs %.0f / %.0f, squashfuse_ll %.0f / %.0f, native %.0f\n",
		       (unsigned long long)r + 1, v[r][Z1], v[r][ZS1], v[r][S1], v[r][SS1], v[r][N1],
		       v[r][Z2], v[r][ZS2], v[r][S2], v[r][SS2], v[r][N2]);
		fflush(stdout);
	}
	if (rc == 0) {
		double m[NV], ratio[6][100];
		for (int k = 0; k < NV; k++) {
			double col[100];
			for (uint64_t r = 0; r < c.runs; r++)
				col[r] = v[r][k];
			m[k] = bench_median(col, c.runs);
		}
		for (uint64_t r = 0; r < c.runs; r++) {
			ratio[0][r] = v[r][ZS1] / v[r][N1];
			ratio[1][r] = v[r][ZS2] / v[r][N2];
			ratio[2][r] = v[r][Z1] / v[r][N1];
			ratio[3][r] = v[r][Z2] / v[r][N2];
			ratio[4][r] = v[r][NFLAT] / v[r][NPY];
			ratio[5][r] = v[r][LSZ] / v[r][LSN];
		}
		double mr[6];
		for (int k = 0; k < 6; k++)
			mr[k] = bench_median(ratio[k], c.runs);
		printf("\n%-44s %12s %12s\n", "files/s (median)", "1 thread", "2 threads");
		printf("%-44s %12.0f %12.0f\n", "native directory, warm", m[N1], m[N2]);
		printf("%-44s %12.0f %12.0f\n", "squashfuse_ll, first pass", m[S1], m[S2]);
		printf("%-44s %12.0f %12.0f\n", "squashfuse_ll, second pass", m[SS1], m[SS2]);
		printf("%-44s %12.0f %12.0f\n", "zrfs, first pass", m[Z1], m[Z2]);
		printf("%-44s %12.0f %12.0f\n", "zrfs, second pass", m[ZS1], m[ZS2]);
		printf("\n%-44s %12s %12s   %s\n", "ratios (median of per-run ratios)", "1 thread",
		       "2 threads", "target");
		printf("%-44s %11.2fx %11.2fx   >= 1.0x\n", "zrfs second pass / native warm", mr[0],
		       mr[1]);
		printf("%-44s %11.2fx %11.2fx   >= 0.5x\n", "zrfs first pass / native warm", mr[2],
		       mr[3]);
		printf("%-44s %11.2fx %11.2fx   >= 2x\n", "zrfs first pass / squashfuse_ll second",
		       m[Z1] / m[SS1], m[Z2] / m[SS2]);
		printf("%-44s %11.2fx %12s   >= 0.9x\n", "cat data.npy / native file from page cache",
		       mr[4], "");
		printf("%-44s %11.2fx %12s   <= 1.5x\n", "ls -lR time: zrfs / native", mr[5], "");
		printf("(cat: %.0f MB/s through zrfs, %.0f MB/s native; ls -lR: %.3f s zrfs, %.3f s "
		       "native)\n",
		       (double)c.records * (double)c.size / m[NPY] / 1e6,
		       (double)c.records * (double)c.size / m[NFLAT] / 1e6, m[LSZ], m[LSN]);
		if (c.uring)
			print_transports(&c, v, m);
	}
	bench_finish(&c);
	free(v);
	free(order);
	return rc;
}
