/*
 * bench_fs.c - zr bench fs: reading records as files through zrfs, against
 * the same files in a native directory, in a squashfs image mounted with
 * squashfuse_ll, and in the FUSE floor (zrfs-floor: the same names and
 * sizes, every zrfs setting that changes the kernel's behaviour, no work
 * but the reply).
 *
 * Set-up, once: a dataset of N records of S bytes (one raw field "data",
 * u8 of shape S, so the mount also has data.npy), the same records as N
 * files in a directory of the scratch filesystem, and that directory packed
 * by `mksquashfs -noI -noD -noF -noX` (uncompressed). Then, per run and
 * per thread count (--threads, default 1,2): mount fresh, read every file
 * once in one shuffled order (open, read to EOF, close; threads share the
 * order), which is the first pass, then again, the second pass; the same
 * for the floor and squashfuse_ll; the native directory is read twice too
 * and its second (warm) pass is the baseline. As root, also cold: the
 * native directory after dropping the kernel's caches (its inodes and
 * pages read from the disk: a native first touch), and zrfs with
 * everything cold; the caches are then filled again. Also per run: `cat
 * data.npy` on a fresh mount against reading a native file of the same
 * size from the page cache, and `ls -lR` of a fresh mount against the
 * native directory. Every file read is checked for its size. The CPU time
 * each daemon used (its mount, both passes, its exit; what wait4 says of
 * it) is reported per file, with the part of it in the kernel (system
 * time), and so are the times its threads waited (its voluntary context
 * switches: for the next request, a lock, the disk): where contention for
 * something shared makes the daemon's threads spin or wait, it shows
 * there, as the passes' rates alone do not say whose time it was, and the
 * split says whether it was the kernel's or the daemon's own.
 */
#include "bench_i.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char help[] =
	"usage: zr bench fs [--records N] [--size BYTES] [--runs R] [--dir DIR]\n"
	"                   [--zrfs PATH] [--uring] [--threads LIST]\n"
	"\n"
	"Read N record files (default 50000 x 8K) once in a shuffled order through\n"
	"a fresh zrfs mount (first pass) and again (second pass), with each thread\n"
	"count of LIST (default 1,2; e.g. 1,2,4,8,16 on bigger machines), against\n"
	"the same files in a native directory (warm, and as root cold: caches\n"
	"dropped, a native first touch), in an uncompressed squashfs image mounted\n"
	"with squashfuse_ll, and in the FUSE floor (zrfs-floor next to zrfs: the\n"
	"same names and sizes, no work but the reply), with the CPU time each\n"
	"daemon used per file (and of it, the time in the kernel) and the times its\n"
	"threads waited per file (voluntary context switches); also cat of the\n"
	"mount's .npy view (against a native file and the floor's one file of its\n"
	"size: a big read's floor) and ls -lR. Needs root (or FUSE access), mksquashfs and\n"
	"squashfuse_ll (packaging/deps.sh --bench installs them). Medians of R runs\n"
	"(default 5). --zrfs: the zrfs binary (default: next to zr, or in PATH).\n"
	"--uring: also zrfs and the floor through mounts with -o uring (the kernel\n"
	"must offer FUSE over io_uring), with the ratios of the two transports.\n";


static int mount_squash(struct bench_env *c)
{
	char *argv[] = {"squashfuse_ll", c->img, c->smnt, NULL};
	if (bench_run(argv) != 0) {
		zr_warn("bench: squashfuse_ll %s %s failed", c->img, c->smnt);
		return -1;
	}
	return 0;
}

/* The floor, as zrfs mounts the dataset: its files data/0 .. data/N-1 of
 * the records' size, -o @zopts added (NULL: none). */
/* The floor with @records files of @size bytes (with -o @zopts). */
static int mount_floor_of(struct bench_env *c, const char *zopts, uint64_t records, uint64_t size)
{
	char prog[PATH_MAX + 16], opts[256];
	const char *slash = strrchr(c->zrfs, '/');

	if (slash)
		snprintf(prog, sizeof prog, "%.*s/zrfs-floor", (int)(slash - c->zrfs), c->zrfs);
	else
		snprintf(prog, sizeof prog, "zrfs-floor");
	snprintf(opts, sizeof opts, "records=%llu,size=%llu,field=data,ext=%s%s",
		 (unsigned long long)records, (unsigned long long)size, zopts ? "," : "",
		 zopts ? zopts : "");
	char *argv[] = {prog, c->zmnt, "-f", "-o", opts, NULL};
	return bench_mount_child(c, argv);
}

static int mount_floor(struct bench_env *c, const char *zopts)
{
	return mount_floor_of(c, zopts, c->records, c->size);
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
static int read_pass(const char *root, const uint64_t *order, const struct bench_env *c,
		     unsigned threads, double *rate)
{
	struct pass p = {.root = root, .order = order, .n = c->records, .size = c->size};
	pthread_t th[256];
	unsigned started = 0;
	double t0 = now_sec();

	atomic_init(&p.next, 0);
	atomic_init(&p.bad, 0);
	while (started < threads && pthread_create(&th[started], NULL, reader, &p) == 0)
		started++;
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	*rate = (double)c->records / (now_sec() - t0);
	if (started < threads || atomic_load(&p.bad)) {
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
	if (fd < 0 || r < 0 || (want != UINT64_MAX && got != want)) {
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

/* Fill the page cache again after a drop: the dataset's files (its
 * chunks, as a warm first pass has them) and the squashfs image. */
static int warm_inputs(const struct bench_env *c)
{
	char *argv[] = {"sh", "-c", "find \"$1\" -type f -exec cat {} + >/dev/null && cat \"$2\" >/dev/null",
			"sh", (char *)c->ds, (char *)c->img, NULL};
	return bench_run(argv) == 0 ? 0 : -1;
}


/* ---- the benchmark ---- */

/* Each daemon's figures per file, over its mount, both passes and its
 * exit: its CPU time (ns), of it in the kernel (ns), and the times its
 * threads waited. */
/* cat of the floor's one file of @size bytes (its data.npy's size) on a
 * fresh mount (with -o @zopts): what a big read through FUSE costs with no
 * work but the reply. */
static int floor_cat(struct bench_env *c, const char *zopts, uint64_t size, double *secs)
{
	char big[PATH_MAX + 16];
	int rc;

	snprintf(big, sizeof big, "%s/data/0", c->zmnt);
	if (mount_floor_of(c, zopts, 1, size) < 0)
		return -1;
	rc = cat_file(big, size, secs);
	bench_unmount_zrfs(c);
	return rc;
}

enum { CPU, SYS, WAITS, FIGURES };
/* Per thread count of a run: files per second, and the figures of each
 * daemon: zrfs, zrfs -o uring, the floor, the floor -o uring. */
enum { NATIVE, NATIVE_COLD, Z1ST, Z2ND, ZCOLD, U1ST, U2ND, F1ST, F2ND, FU1ST, FU2ND, S1ST, S2ND,
       ZD, UD = ZD + FIGURES, FD = UD + FIGURES, FUD = FD + FIGURES, NM = FUD + FIGURES };
/* Seconds, once per run: cat of data.npy (/dev/fuse, -o uring), of the
 * floor's one file of its size (/dev/fuse, -o uring), of a native file of
 * its size, ls -lR of the mount and of the native tree. */
enum { NPY, NPYU, BIGF, BIGFU, FLAT, LSZ, LSN, NS };
struct run {
	double at[BENCH_THREADS_MAX][NM];
	double secs[NS];
};

/* Mount the dataset fresh, with -o @zopts (NULL: none). */
static int mount_with(struct bench_env *c, const char *zopts)
{
	int rc;

	c->zopts = zopts;
	rc = bench_mount_zrfs(c);
	c->zopts = NULL;
	return rc;
}

/* First and second pass through a fresh mount of the dataset, or with
 * @floor of the floor (with -o @zopts), into *@first and *@second
 * (@second NULL: the first only); into @daemon[FIGURES] (unless NULL) the
 * daemon's figures per file. */
static int passes(struct bench_env *c, bool floor, const char *zopts, const uint64_t *order,
		  unsigned th, double *first, double *second, double *daemon)
{
	char zdata[PATH_MAX + 8];
	int rc;

	snprintf(zdata, sizeof zdata, "%s/data", c->zmnt);
	if ((floor ? mount_floor(c, zopts) : mount_with(c, zopts)) < 0)
		return -1;
	rc = read_pass(zdata, order, c, th, first);
	if (rc == 0 && second)
		rc = read_pass(zdata, order, c, th, second);
	bench_unmount_zrfs(c);
	if (daemon) {
		daemon[CPU] = c->zcpu * 1e9 / (double)c->records;
		daemon[SYS] = c->zsys * 1e9 / (double)c->records;
		daemon[WAITS] = c->zwaits / (double)c->records;
	}
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

/* Cold, as root: the native directory and a zrfs mount after dropping the
 * caches (every inode, every page from the disk), then the inputs warm
 * again. 1 when not root (nothing measured), 0, or -1. */
static int cold_passes(struct bench_env *c, const uint64_t *order, unsigned th, double *a)
{
	if (bench_drop_caches() < 0)
		return 1;
	if (read_pass(c->tree, order, c, th, &a[NATIVE_COLD]) < 0 || bench_drop_caches() < 0 ||
	    passes(c, false, NULL, order, th, &a[ZCOLD], NULL, NULL) < 0)
		return -1;
	return warm_inputs(c);
}

static int one_run(struct bench_env *c, const uint64_t *order, struct run *r)
{
	uint64_t npy_size = 0;
	double t;

	for (unsigned k = 0; k < c->nthreads; k++) {
		unsigned th = c->threads[k];
		double *a = r->at[k];
		/* native: the first pass warms, the second is the baseline */
		if (read_pass(c->tree, order, c, th, &t) < 0 ||
		    read_pass(c->tree, order, c, th, &a[NATIVE]) < 0 ||
		    passes(c, false, NULL, order, th, &a[Z1ST], &a[Z2ND], &a[ZD]) < 0 ||
		    passes(c, true, NULL, order, th, &a[F1ST], &a[F2ND], &a[FD]) < 0)
			return -1;
		if (c->uring &&
		    (passes(c, false, "uring", order, th, &a[U1ST], &a[U2ND], &a[UD]) < 0 ||
		     passes(c, true, "uring", order, th, &a[FU1ST], &a[FU2ND], &a[FUD]) < 0))
			return -1;
		if (mount_squash(c) < 0)
			return -1;
		int rc = read_pass(c->smnt, order, c, th, &a[S1ST]);
		if (rc == 0)
			rc = read_pass(c->smnt, order, c, th, &a[S2ND]);
		bench_unmount(c->smnt);
		if (rc < 0 || cold_passes(c, order, th, a) < 0)
			return -1;
	}
	/* cat of the .npy view on a fresh mount; a native file of its size, warm */
	double *s = r->secs;
	int rc = zrfs_cat_npy(c, NULL, &npy_size, &s[NPY], &s[LSZ]);
	if (rc == 0 && c->uring)
		rc = zrfs_cat_npy(c, "uring", &npy_size, &s[NPYU], NULL);
	if (rc == 0)
		rc = floor_cat(c, NULL, npy_size, &s[BIGF]);
	if (rc == 0 && c->uring)
		rc = floor_cat(c, "uring", npy_size, &s[BIGFU]);
	if (rc < 0 || cat_file(c->flat, npy_size, &t) < 0 || cat_file(c->flat, npy_size, &s[FLAT]) < 0 ||
	    ls_lr(c->tree, &t) < 0 || ls_lr(c->tree, &s[LSN]) < 0)
		return -1;
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


/* ---- the report ---- */

/* The median over the runs of metric @m at thread count @k, or of the
 * per-run ratios @m / @d (@d -1: none). */
static double med_at(const struct bench_env *c, const struct run *v, unsigned k, int m, int d)
{
	double col[100];

	for (uint64_t r = 0; r < c->runs; r++)
		col[r] = v[r].at[k][m] / (d < 0 ? 1 : v[r].at[k][d]);
	return bench_median(col, c->runs);
}

/* The median of the runs' seconds @m (or of the per-run ratios @m / @d). */
static double med_secs(const struct bench_env *c, const struct run *v, int m, int d)
{
	double col[100];

	for (uint64_t r = 0; r < c->runs; r++)
		col[r] = v[r].secs[m] / (d < 0 ? 1 : v[r].secs[d]);
	return bench_median(col, c->runs);
}

/* One line: @what, then per thread count the median of @m (or of @m / @d),
 * as files/s or a ratio, and @target. Nothing for an unmeasured metric. */
static void line(const struct bench_env *c, const struct run *v, const char *what, int m, int d,
		 const char *target)
{
	if (v[0].at[0][m] == 0 || (d >= 0 && v[0].at[0][d] == 0))
		return;
	printf("%-46s", what);
	for (unsigned k = 0; k < c->nthreads; k++) {
		double x = med_at(c, v, k, m, d);
		if (d < 0)
			printf(x < 100 ? " %10.2f" : " %10.0f", x);
		else
			printf(" %9.2fx", x);
	}
	printf("%s%s\n", *target ? "   " : "", target);
}

static void header(const struct bench_env *c, const char *what, const char *target)
{
	printf("\n%-46s", what);
	for (unsigned k = 0; k < c->nthreads; k++) {
		char t[32];
		snprintf(t, sizeof t, "%u thr", c->threads[k]);
		printf(" %10s", t);
	}
	printf("%s%s\n", *target ? "   " : "", target);
}

/* A table of figure @fig of each daemon: the floor's and zrfs's, and with
 * --uring the same through the rings (@note after their names). */
static void daemon_rows(const struct bench_env *c, const struct run *v, const char *title,
			int fig, const char *note)
{
	char name[64];

	header(c, title, "");
	line(c, v, "floor", FD + fig, -1, "");
	line(c, v, "zrfs", ZD + fig, -1, "");
	if (!c->uring)
		return;
	snprintf(name, sizeof name, "floor -o uring%s", note);
	line(c, v, name, FUD + fig, -1, "");
	snprintf(name, sizeof name, "zrfs -o uring%s", note);
	line(c, v, name, UD + fig, -1, "");
}

static void report(const struct bench_env *c, const struct run *v)
{
	header(c, "files/s (median)", "");
	line(c, v, "native directory, warm", NATIVE, -1, "");
	line(c, v, "native, cold (caches dropped)", NATIVE_COLD, -1, "");
	line(c, v, "floor, first pass", F1ST, -1, "");
	line(c, v, "floor, second pass", F2ND, -1, "");
	line(c, v, "squashfuse_ll, first pass", S1ST, -1, "");
	line(c, v, "squashfuse_ll, second pass", S2ND, -1, "");
	line(c, v, "zrfs, first pass", Z1ST, -1, "");
	line(c, v, "zrfs, second pass", Z2ND, -1, "");
	line(c, v, "zrfs, everything cold", ZCOLD, -1, "");
	if (c->uring) {
		line(c, v, "floor -o uring, first pass", FU1ST, -1, "");
		line(c, v, "zrfs -o uring, first pass", U1ST, -1, "");
		line(c, v, "zrfs -o uring, second pass", U2ND, -1, "");
	}
	daemon_rows(c, v, "daemon CPU per file, ns (median)", CPU, " (polling included)");
	daemon_rows(c, v, "... of it in the kernel, ns (median)", SYS, "");
	daemon_rows(c, v, "daemon waits per file (median)", WAITS, "");
	header(c, "ratios (median of per-run ratios)", "target");
	line(c, v, "zrfs first pass / floor first pass", Z1ST, F1ST, ">= 0.8x");
	line(c, v, "zrfs daemon CPU per file / floor's", ZD + CPU, FD + CPU, "");
	line(c, v, "... in the kernel / floor's", ZD + SYS, FD + SYS, "");
	line(c, v, "zrfs daemon waits per file / floor's", ZD + WAITS, FD + WAITS, "");
	line(c, v, "floor first pass / squashfuse_ll first pass", F1ST, S1ST, ">= 1x (a floor)");
	line(c, v, "zrfs everything cold / native cold", ZCOLD, NATIVE_COLD, ">= 1.0x");
	line(c, v, "zrfs second pass / native warm", Z2ND, NATIVE, ">= 1.0x");
	line(c, v, "zrfs first pass / native warm", Z1ST, NATIVE, "");
	line(c, v, "zrfs first pass / squashfuse_ll second", Z1ST, S2ND, ">= 2x");
	if (c->uring) {
		line(c, v, "-o uring: zrfs first pass / floor's", U1ST, FU1ST, ">= 0.8x");
		line(c, v, "-o uring: zrfs daemon CPU per file / floor's", UD + CPU, FUD + CPU, "");
		line(c, v, "-o uring: ... in the kernel / floor's", UD + SYS, FUD + SYS, "");
		line(c, v, "-o uring: zrfs daemon waits per file / floor's", UD + WAITS,
		     FUD + WAITS, "");
		line(c, v, "-o uring / /dev/fuse, zrfs first pass", U1ST, Z1ST, "");
		line(c, v, "-o uring / /dev/fuse, zrfs second pass", U2ND, Z2ND, ">= 1.0x");
	}
	if (v[0].at[0][NATIVE_COLD] == 0)
		printf("(native cold and zrfs everything cold: not measured, dropping the caches "
		       "needs root)\n");
	double mb = (double)c->records * (double)c->size / 1e6;
	printf("\n%-46s %10.2fx   >= 0.9x\n", "cat data.npy / native file from page cache",
	       med_secs(c, v, FLAT, NPY));
	printf("%-46s %10.2fx   >= 0.8x\n", "cat data.npy / the floor's file of its size",
	       med_secs(c, v, BIGF, NPY));
	if (c->uring)
		printf("%-46s %10.2fx   >= 0.8x\n", "-o uring: cat data.npy / the floor's",
		       med_secs(c, v, BIGFU, NPYU));
	printf("%-46s %10.2fx   <= 1.5x\n", "ls -lR time: zrfs / native", med_secs(c, v, LSZ, LSN));
	printf("(cat: %.0f MB/s through zrfs, %.0f MB/s native; ls -lR: %.3f s zrfs, %.3f s native)\n",
	       mb / med_secs(c, v, NPY, -1), mb / med_secs(c, v, FLAT, -1), med_secs(c, v, LSZ, -1),
	       med_secs(c, v, LSN, -1));
	printf("(cat of the floor's file: %.0f MB/s)\n", mb / med_secs(c, v, BIGF, -1));
	if (c->uring)
		printf("(cat data.npy with -o uring: %.0f MB/s; of the floor's file: %.0f MB/s)\n",
		       mb / med_secs(c, v, NPYU, -1), mb / med_secs(c, v, BIGFU, -1));
}

int bench_fs(int argc, char **argv)
{
	struct bench_env c = {.records = 50000, .size = 8192, .runs = 5, .dir = "/var/tmp",
			      .threads = {1, 2}, .nthreads = 2};
	char zrfs_path[PATH_MAX];
	struct run *v;
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
		if (one_run(&c, order, &v[r]) < 0) {
			rc = 1;
			break;
		}
		for (unsigned k = 0; k < c.nthreads; k++) {
			const double *a = v[r].at[k];
			printf("  run %llu, %u thr: zrfs %.0f / %.0f, floor %.0f / %.0f, squashfuse_ll "
			       "%.0f / %.0f, native %.0f, native cold %.0f, zrfs cold %.0f files/s\n",
			       (unsigned long long)r + 1, c.threads[k], a[Z1ST], a[Z2ND], a[F1ST],
			       a[F2ND], a[S1ST], a[S2ND], a[NATIVE], a[NATIVE_COLD], a[ZCOLD]);
		}
		fflush(stdout);
	}
	if (rc == 0)
		report(&c, v);
	bench_finish(&c);
	free(v);
	free(order);
	return rc;
}
