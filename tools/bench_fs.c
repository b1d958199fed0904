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
 *
 * zr bench batches (bottom of the file) reuses the set-up and the mounts.
 */
#include "zr_i.h"
#include "zrsampler.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static const char help[] =
	"usage: zr bench fs [--records N] [--size BYTES] [--runs R] [--dir DIR]\n"
	"                   [--zrfs PATH]\n"
	"\n"
	"Read N record files (default 50000 x 8K) once in a shuffled order through\n"
	"a fresh zrfs mount (first pass) and again (second pass), with 1 and 2\n"
	"threads, against the same files in a native directory (warm) and in an\n"
	"uncompressed squashfs image mounted with squashfuse_ll; also cat of the\n"
	"mount's .npy view and ls -lR. Needs root (or FUSE access), mksquashfs and\n"
	"squashfuse_ll (packaging/deps.sh --bench installs them). Medians of R runs\n"
	"(default 5). --zrfs: the zrfs binary (default: next to zr, or in PATH).\n";

struct fcfg {
	uint64_t records, size, runs;
	const char *dir, *zrfs;
	char base[PATH_MAX - 64];
	char ds[PATH_MAX], tree[PATH_MAX], img[PATH_MAX], flat[PATH_MAX];
	char zmnt[PATH_MAX], smnt[PATH_MAX];
	pid_t zpid;           /* the zrfs daemon, in the foreground, 0 if none */
};

/* Start a program with its output (and with @quiet, its errors) discarded;
 * its pid, or -1. */
static pid_t spawn(char *const argv[], bool quiet)
{
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int rc;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	if (quiet)
		posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	return rc == 0 ? pid : -1;
}

/* Run a program as spawn() does; its exit status, or -1. */
static int run_quiet(char *const argv[], bool quiet)
{
	pid_t pid = spawn(argv, quiet);
	int status;

	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

static int run(char *const argv[])
{
	return run_quiet(argv, false);
}

/* Mount the dataset with zrfs kept in the foreground as our child, so that
 * unmount_zrfs() can wait for it to exit: a daemon still holding the chunk
 * files mapped would keep their pages through the next drop of the caches. */
static int mount_zrfs(struct fcfg *c)
{
	char *argv[] = {(char *)c->zrfs, c->ds, c->zmnt, "-f", NULL};
	struct stat before, st;
	int status;

	if (stat(c->zmnt, &before) < 0) {
		zr_warn("bench: %s: %s", c->zmnt, strerror(errno));
		return -1;
	}
	c->zpid = spawn(argv, false);
	/* mounted when the mount point changes device; polled, as nothing
	 * else tells a foreground daemon's parent */
	for (int i = 0; c->zpid > 0 && i < 10000; i++) {
		if (stat(c->zmnt, &st) == 0 && st.st_dev != before.st_dev)
			return 0;
		if (waitpid(c->zpid, &status, WNOHANG) == c->zpid)
			break;
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	}
	zr_warn("bench: %s %s %s failed", c->zrfs, c->ds, c->zmnt);
	if (c->zpid > 0 && waitpid(c->zpid, &status, WNOHANG) == 0) {
		kill(c->zpid, SIGTERM);
		waitpid(c->zpid, &status, 0);
	}
	c->zpid = 0;
	return -1;
}

static int mount_squash(struct fcfg *c)
{
	char *argv[] = {"squashfuse_ll", c->img, c->smnt, NULL};
	if (run(argv) != 0) {
		zr_warn("bench: squashfuse_ll %s %s failed", c->img, c->smnt);
		return -1;
	}
	return 0;
}

/* Unmount if mounted (the final clean-up calls it either way). */
static void unmount(char *mnt)
{
	char *argv[] = {"fusermount3", "-u", mnt, NULL};
	run_quiet(argv, true);
}

/* Unmount zrfs and wait for its daemon to exit. */
static void unmount_zrfs(struct fcfg *c)
{
	int status;

	unmount(c->zmnt);
	if (c->zpid > 0)
		waitpid(c->zpid, &status, 0);
	c->zpid = 0;
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
static int read_pass(const char *root, const uint64_t *order, const struct fcfg *c, int threads,
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
	int rc = run(argv);

	*secs = now_sec() - t0;
	if (rc != 0)
		zr_warn("bench: ls -lR %s failed", dir);
	return rc == 0 ? 0 : -1;
}

/* ---- set-up ---- */

/* The dataset (field "data", and with @flate a compressible flate field
 * "z" of the same size), the native tree of "data", and with @squash the
 * squashfs image of the tree. */
static int make_inputs(struct fcfg *c, bool flate, bool squash)
{
	zr_field_spec f[2] = {{.name = "data", .dtype = ZR_U8, .compress = ZR_RAW, .fixed = 1,
			       .ndim = 1, .shape = {(uint32_t)c->size}},
			      {.name = "z", .dtype = ZR_BYTES, .compress = ZR_FLATE}};
	uint8_t *rec = malloc(c->size), *zrec = malloc(c->size);
	char path[PATH_MAX + 32];
	zr_dataset *ds = NULL;
	uint64_t s = 1;
	int rc;

	rc = rec && zrec ? zr_create(c->ds, f, flate ? 2 : 1, NULL) : -ENOMEM;
	if (rc == 0)
		rc = zr_open(&ds, c->ds, ZR_RDWR);
	if (rc == 0 && mkdir(c->tree, 0755) < 0)
		rc = -errno;
	for (uint64_t i = 0; i < c->records && rc == 0 && rec; i++) {
		for (uint64_t k = 0; k < c->size; k += 8) {
			uint64_t v = bench_splitmix(&s);
			memcpy(rec + k, &v, c->size - k < 8 ? c->size - k : 8);
		}
		for (uint64_t k = 0; k < c->size; k++) /* text-like: a 16-letter alphabet */
			zrec[k] = (uint8_t)('a' + (rec[k] & 15) * (k % 3 == 0));
		rc = zr_append(ds, (zr_value[]){{rec, c->size}, {zrec, c->size}}, NULL);
		snprintf(path, sizeof path, "%s/%llu", c->tree, (unsigned long long)i);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (rc == 0 && (fd < 0 || write_all(fd, rec, c->size) < 0))
			rc = -EIO;
		if (fd >= 0)
			close(fd);
	}
	if (rc == 0)
		rc = zr_commit(ds);
	zr_close(ds);
	free(rec);
	free(zrec);
	if (rc < 0)
		return zr_fail(rc, "bench: creating the inputs");
	if (!squash)
		return 0;
	char *mk[] = {"mksquashfs", c->tree, c->img, "-noI", "-noD", "-noF", "-noX",
		      "-no-progress", "-quiet", NULL};
	if (run(mk) != 0) {
		zr_warn("bench: mksquashfs failed (is squashfs-tools installed?)");
		return -1;
	}
	return 0;
}

static void find_zrfs(struct fcfg *c, char buf[PATH_MAX])
{
	char self[PATH_MAX - 16];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);

	c->zrfs = "zrfs";
	if (n <= 0)
		return;
	self[n] = 0;
	*strrchr(self, '/') = 0;
	snprintf(buf, PATH_MAX, "%s/../fs/zrfs", self); /* a build tree */
	if (access(buf, X_OK) == 0) {
		c->zrfs = buf;
		return;
	}
	snprintf(buf, PATH_MAX, "%s/zrfs", self); /* installed side by side */
	if (access(buf, X_OK) == 0)
		c->zrfs = buf;
}

/* The start the dataset benchmarks share: parse the options into @c (which
 * holds the defaults), make the scratch directory DIR/zr-bench-NAME-XXXXXX
 * and name the inputs and, for the benchmarks that mount (@takes_zrfs), the
 * mount points in it. false with *status set when the caller must return
 * (after --help, a usage error or a failure). */
static bool fcfg_start(struct fcfg *c, int argc, char **argv, const char *usage, const char *name,
		       uint64_t records_min, bool takes_zrfs, int *status)
{
	struct bench_args ba = {c->records, c->size, c->runs, c->dir, c->zrfs, records_min,
				takes_zrfs};
	int rc = bench_args_parse(argc, argv, usage, &ba);

	if (rc != 0) {
		*status = rc > 0 ? 0 : EXIT_USAGE;
		return false;
	}
	c->records = ba.records;
	c->size = ba.size;
	c->runs = ba.runs;
	c->dir = ba.dir;
	c->zrfs = ba.zrfs;
	snprintf(c->base, sizeof c->base, "%s/zr-bench-%s-XXXXXX", c->dir, name);
	if (!mkdtemp(c->base)) {
		zr_warn("bench: cannot create a scratch directory in %s: %s", c->dir, strerror(errno));
		*status = 1;
		return false;
	}
	snprintf(c->ds, sizeof c->ds, "%s/ds", c->base);
	snprintf(c->tree, sizeof c->tree, "%s/tree", c->base);
	snprintf(c->img, sizeof c->img, "%s/tree.sqfs", c->base);
	snprintf(c->flat, sizeof c->flat, "%s/flat.bin", c->base);
	snprintf(c->zmnt, sizeof c->zmnt, "%s/zmnt", c->base);
	snprintf(c->smnt, sizeof c->smnt, "%s/smnt", c->base);
	if (takes_zrfs) {
		mkdir(c->zmnt, 0755);
		mkdir(c->smnt, 0755);
	}
	return true;
}


/* ---- the benchmark ---- */

enum { Z1, Z2, ZS1, ZS2, S1, S2, SS1, SS2, N1, N2, NPY, NFLAT, LSZ, LSN, NV };

static int one_run(struct fcfg *c, const uint64_t *order, double *v)
{
	char zdata[PATH_MAX + 8], npy[PATH_MAX + 16];
	uint64_t npy_size = 0;
	struct stat st;
	double t;

	snprintf(zdata, sizeof zdata, "%s/data", c->zmnt);
	snprintf(npy, sizeof npy, "%s/data.npy", c->zmnt);
	for (int th = 1; th <= 2; th++) {
		/* native: the first pass warms, the second is the baseline */
		if (read_pass(c->tree, order, c, th, &t) < 0 ||
		    read_pass(c->tree, order, c, th, &v[th == 1 ? N1 : N2]) < 0)
			return -1;
		if (mount_zrfs(c) < 0)
			return -1;
		int rc = read_pass(zdata, order, c, th, &v[th == 1 ? Z1 : Z2]);
		if (rc == 0)
			rc = read_pass(zdata, order, c, th, &v[th == 1 ? ZS1 : ZS2]);
		unmount_zrfs(c);
		if (rc < 0 || mount_squash(c) < 0)
			return -1;
		rc = read_pass(c->smnt, order, c, th, &v[th == 1 ? S1 : S2]);
		if (rc == 0)
			rc = read_pass(c->smnt, order, c, th, &v[th == 1 ? SS1 : SS2]);
		unmount(c->smnt);
		if (rc < 0)
			return -1;
	}
	/* cat of the .npy view on a fresh mount; a native file of its size, warm */
	if (mount_zrfs(c) < 0)
		return -1;
	int rc = stat(npy, &st);
	npy_size = (uint64_t)st.st_size;
	if (rc == 0)
		rc = cat_file(npy, npy_size, &v[NPY]);
	if (rc == 0)
		rc = ls_lr(c->zmnt, &v[LSZ]); /* the listing is still cold */
	unmount_zrfs(c);
	if (rc < 0 || cat_file(c->flat, npy_size, &t) < 0 || cat_file(c->flat, npy_size, &v[NFLAT]) < 0 ||
	    ls_lr(c->tree, &t) < 0 || ls_lr(c->tree, &v[LSN]) < 0)
		return -1;
	/* a native tree one level deep, like the mount: <tree> holds the files */
	return 0;
}

static int make_flat(struct fcfg *c)
{
	char npy[PATH_MAX + 16];
	struct stat st;
	int rc = -1;

	if (mount_zrfs(c) < 0)
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
	unmount_zrfs(c);
	return rc;
}

int bench_fs(int argc, char **argv)
{
	struct fcfg c = {.records = 50000, .size = 8192, .runs = 5, .dir = "/var/tmp"};
	char zrfs_path[PATH_MAX];
	double (*v)[NV];
	uint64_t *order;
	int rc = 0;

	find_zrfs(&c, zrfs_path);
	if (!fcfg_start(&c, argc, argv, help, "fs", 1, true, &rc))
		return rc;
	v = calloc(c.runs, sizeof *v);
	order = malloc(c.records * sizeof *order);
	printf("zr bench fs: %llu files x %llu B, %llu runs, zrfs %s, scratch %s\n",
	       (unsigned long long)c.records, (unsigned long long)c.size,
	       (unsigned long long)c.runs, c.zrfs, c.base);
	fflush(stdout);
	if (!v || !order || make_inputs(&c, false, true) < 0 || make_flat(&c) < 0)
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
	}
	unmount_zrfs(&c);
	unmount(c.smnt);
	bench_rm_rf(c.base);
	free(v);
	free(order);
	return rc;
}

/* ---- zr bench batches ---- */

static const char help_batches[] =
	"usage: zr bench batches [--records N] [--size BYTES] [--runs R] [--dir DIR]\n"
	"                        [--zrfs PATH]\n"
	"\n"
	"Read every batch file of one epoch of shuffle,seed=1,batch=256 through a\n"
	"fresh zrfs mount (/.batches/SPEC/epoch-0/K/data), with 1 and 2 threads,\n"
	"against (a) zr_gather of the same ids in this process and (b) the same\n"
	"records read in the same order as files of a native directory; warm (data\n"
	"in the page cache) and cold (after dropping caches: needs root), cold also\n"
	"for block,seed=1,batch=256; a flate field against (a) as well. Every\n"
	"consumer checksums the bytes it gets. Medians of R runs (default 3).\n";

enum bkind { B_MOUNT, B_GATHER, B_NATIVE };

struct bpass {
	enum bkind kind;
	const struct fcfg *c;
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

static void *batch_worker(void *arg)
{
	struct bpass *p = arg;
	uint64_t *ids = malloc(zs_batch_max(p->s) * sizeof *ids), k;
	uint8_t *buf = malloc(1 << 20);
	char path[PATH_MAX + 400];

	while (ids && buf && (k = atomic_fetch_add(&p->next, 1)) < zs_steps(p->s)) {
		uint64_t bytes = 0, sum = 0;
		int64_t n = zs_batch(p->s, 0, k, ids);
		if (p->kind == B_MOUNT) {
			ssize_t r = 0;
			snprintf(path, sizeof path, "%s/%llu/%s", p->dir, (unsigned long long)k,
				 p->field ? "z" : "data");
			int fd = open(path, O_RDONLY | O_CLOEXEC);
			while (fd >= 0 && (r = read(fd, buf, 1 << 20)) > 0) {
				sum += sum64(buf, (size_t)r);
				bytes += (uint64_t)r;
			}
			if (fd < 0 || r < 0)
				atomic_store(&p->bad, 1);
			if (fd >= 0)
				close(fd);
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
				ssize_t r = 0;
				snprintf(path, sizeof path, "%s/%llu", p->c->tree,
					 (unsigned long long)ids[i]);
				int fd = open(path, O_RDONLY | O_CLOEXEC);
				while (fd >= 0 && (r = read(fd, buf, 1 << 20)) > 0) {
					sum += sum64(buf, (size_t)r);
					bytes += (uint64_t)r;
				}
				if (fd < 0 || r < 0)
					atomic_store(&p->bad, 1);
				if (fd >= 0)
					close(fd);
			}
		}
		atomic_fetch_add(&p->bytes, bytes);
		atomic_fetch_add(&p->sum, sum);
	}
	free(ids);
	free(buf);
	return NULL;
}

static int drop_caches(void)
{
	int fd;

	sync();
	fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "3\n", 2) != 2) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* One pass of @kind over the epoch of @spec: MB/s, and the checksum. */
static int batch_pass(struct fcfg *c, enum bkind kind, const char *spec, unsigned field,
		      int threads, bool cold, double *mbs, uint64_t *sum)
{
	struct bpass p = {.kind = kind, .c = c, .field = field};
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
	if (cold && drop_caches() < 0) {
		zr_warn("bench: cannot drop caches (root needed)");
		rc = -1;
	}
	if (rc == 0 && kind == B_MOUNT) {
		rc = mount_zrfs(c);
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
		unmount_zrfs(c);
	zr_close(p.ds);
	zs_sampler_destroy(s);
	return rc;
}

enum { BM, BA, BN, BZM, BZA, CM, CA, CN, CBM, CBA, BNV };
static const char *const bnames[BNV] = {
	"warm: zrfs batch files",   "warm: (a) zr_gather",       "warm: (b) native files",
	"warm flate: zrfs batches", "warm flate: (a) zr_gather", "cold: zrfs batch files",
	"cold: (a) zr_gather",      "cold: (b) native files",    "cold block: zrfs batch files",
	"cold block: (a) zr_gather",
};

int bench_batches(int argc, char **argv)
{
	struct fcfg c = {.records = 50000, .size = 8192, .runs = 3, .dir = "/var/tmp"};
	const char *shuf = "shuffle,seed=1,batch=256", *blk = "block,seed=1,batch=256";
	char zrfs_path[PATH_MAX];
	double v[2][BNV][100];
	int rc = 0;

	find_zrfs(&c, zrfs_path);
	if (!fcfg_start(&c, argc, argv, help_batches, "batches", 256, true, &rc))
		return rc;
	printf("zr bench batches: %llu records x %llu B, %s, %llu runs, zrfs %s\n",
	       (unsigned long long)c.records, (unsigned long long)c.size, shuf,
	       (unsigned long long)c.runs, c.zrfs);
	fflush(stdout);
	if (make_inputs(&c, true, false) < 0)
		rc = 1;
	for (uint64_t r = 0; r < c.runs && rc == 0; r++) {
		for (int t = 0; t < 2 && rc == 0; t++) {
			struct {
				int slot;
				enum bkind kind;
				const char *spec;
				unsigned field;
				bool cold;
			} plan[] = {
				{BM, B_MOUNT, shuf, 0, false},  {BA, B_GATHER, shuf, 0, false},
				{BN, B_NATIVE, shuf, 0, false}, {BZM, B_MOUNT, shuf, 1, false},
				{BZA, B_GATHER, shuf, 1, false}, {CM, B_MOUNT, shuf, 0, true},
				{CA, B_GATHER, shuf, 0, true},  {CN, B_NATIVE, shuf, 0, true},
				{CBM, B_MOUNT, blk, 0, true},   {CBA, B_GATHER, blk, 0, true},
			};
			uint64_t sums[BNV] = {0};
			for (size_t i = 0; i < sizeof plan / sizeof *plan && rc == 0; i++) {
				double warm;
				uint64_t ws;
				/* warm means warm: an untimed pass first */
				if (!plan[i].cold)
					rc = batch_pass(&c, plan[i].kind, plan[i].spec, plan[i].field,
							t + 1, false, &warm, &ws);
				if (rc == 0)
					rc = batch_pass(&c, plan[i].kind, plan[i].spec, plan[i].field,
							t + 1, plan[i].cold, &v[t][plan[i].slot][r],
							&sums[plan[i].slot]);
			}
			if (rc == 0 && (sums[BM] != sums[BA] || sums[BM] != sums[BN] ||
					sums[BZM] != sums[BZA] || sums[CBM] != sums[CBA])) {
				zr_warn("bench: the consumers disagree on the bytes they read");
				rc = 1;
			}
			if (rc == 0) {
				printf("  run %llu, %d thread%s:", (unsigned long long)r + 1, t + 1,
				       t ? "s" : "");
				for (int k = 0; k < BNV; k++)
					printf(" %.0f", v[t][k][r]);
				printf(" MB/s\n");
				fflush(stdout);
			}
		}
	}
	if (rc == 0) {
		double m[2][BNV];
		for (int t = 0; t < 2; t++)
			for (int k = 0; k < BNV; k++) {
				double col[100];
				memcpy(col, v[t][k], c.runs * sizeof *col);
				m[t][k] = bench_median(col, c.runs);
			}
		printf("\n%-32s %12s %12s\n", "MB/s (median)", "1 thread", "2 threads");
		for (int k = 0; k < BNV; k++)
			printf("%-32s %12.0f %12.0f\n", bnames[k], m[0][k], m[1][k]);
		printf("\n%-40s %9s %9s   %s\n", "ratios of medians", "1 thread", "2 threads",
		       "target");
		printf("%-40s %8.2fx %8.2fx   >= 0.7x\n", "warm: zrfs / (a) gather", m[0][BM] / m[0][BA],
		       m[1][BM] / m[1][BA]);
		printf("%-40s %8.2fx %8.2fx   >= 3x\n", "warm: zrfs / (b) native files",
		       m[0][BM] / m[0][BN], m[1][BM] / m[1][BN]);
		printf("%-40s %8.2fx %8.2fx   >= 0.8x (2 threads)\n", "warm flate: zrfs / (a) gather",
		       m[0][BZM] / m[0][BZA], m[1][BZM] / m[1][BZA]);
		printf("%-40s %8.2fx %8.2fx   >= 0.7x\n", "cold: zrfs / (a) gather", m[0][CM] / m[0][CA],
		       m[1][CM] / m[1][CA]);
		printf("%-40s %8.2fx %8.2fx   >= 3x\n", "cold: zrfs / (b) native files",
		       m[0][CM] / m[0][CN], m[1][CM] / m[1][CN]);
		printf("%-40s %8.2fx %8.2fx   (what block buys)\n", "cold: zrfs block / zrfs shuffle",
		       m[0][CBM] / m[0][CM], m[1][CBM] / m[1][CM]);
	}
	unmount_zrfs(&c);
	bench_rm_rf(c.base);
	return rc;
}

/* ---- zr bench import ---- */

static const char help_import[] =
	"usage: zr bench import [--records N] [--size BYTES] [--runs R] [--dir DIR]\n"
	"\n"
	"Time 'zr import dir' of a tree of N files (default 50000 x 8K) with 1, 2\n"
	"and 4 writers, against 'tar cf' of the same tree to a file and\n"
	"'mksquashfs -noI -noD -noF -noX' of it, the tree in the page cache.\n"
	"Each command starts after a sync, so none pays for another's writeback.\n"
	"Medians of R runs (default 3).\n";

/* Time one command. Everyone's dirty data is written back first (untimed),
 * so no contender pays for the writeback of the one before it. */
static int time_cmd(char *const argv[], double *secs)
{
	double t0;
	int rc;

	sync();
	t0 = now_sec();
	rc = run_quiet(argv, true);

	*secs = now_sec() - t0;
	if (rc != 0)
		zr_warn("bench: %s failed (exit %d)", argv[0], rc);
	return rc == 0 ? 0 : -1;
}

int bench_import(int argc, char **argv)
{
	struct fcfg c = {.records = 50000, .size = 8192, .runs = 3, .dir = "/var/tmp"};
	char self[PATH_MAX], dest[PATH_MAX + 16], tarf[PATH_MAX + 16];
	double v[5][100];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	int rc = 0;

	if (n <= 0)
		return 1;
	self[n] = 0;
	if (!fcfg_start(&c, argc, argv, help_import, "import", 1, false, &rc))
		return rc;
	snprintf(dest, sizeof dest, "%s/imported", c.base);
	snprintf(tarf, sizeof tarf, "%s/tree.tar", c.base);
	printf("zr bench import: %llu files x %llu B, %llu runs\n", (unsigned long long)c.records,
	       (unsigned long long)c.size, (unsigned long long)c.runs);
	fflush(stdout);
	rc = make_inputs(&c, false, false) < 0 ? 1 : 0;
	char *tar[] = {"tar", "cf", tarf, "-C", c.tree, ".", NULL};
	char *sq[] = {"mksquashfs", c.tree, c.img, "-noI", "-noD", "-noF", "-noX", "-no-progress",
		      "-quiet", "-noappend", NULL};
	double warm;
	if (rc == 0)
		rc = time_cmd(tar, &warm) < 0; /* reads the tree into the page cache */
	for (uint64_t r = 0; r < c.runs && rc == 0; r++) {
		static const char *const w[] = {"1", "2", "4"};
		for (int k = 0; k < 3 && rc == 0; k++) {
			char *imp[] = {self, "import", "dir", c.tree, dest, "--writers", (char *)w[k], NULL};
			bench_rm_rf(dest);
			rc = time_cmd(imp, &v[k][r]);
		}
		bench_rm_rf(dest);
		unlink(tarf);
		rc = rc ? rc : time_cmd(tar, &v[3][r]);
		unlink(c.img);
		rc = rc ? rc : time_cmd(sq, &v[4][r]);
		if (rc == 0) {
			printf("  run %llu: import 1/2/4 writers %.2f / %.2f / %.2f s, tar cf %.2f s, "
			       "mksquashfs %.2f s\n",
			       (unsigned long long)r + 1, v[0][r], v[1][r], v[2][r], v[3][r], v[4][r]);
			fflush(stdout);
		}
	}
	if (rc == 0) {
		double m[5];
		for (int k = 0; k < 5; k++)
			m[k] = bench_median(v[k], c.runs);
		printf("\n%-28s %10s %12s %14s\n", "seconds (median)", "", "x mksquashfs",
		       "x tar cf speed");
		for (int k = 0; k < 3; k++)
			printf("zr import dir, %d writer%s %11.2f %11.1fx %13.2fx\n", 1 << k,
			       k ? "s" : " ", m[k], m[4] / m[k], m[3] / m[k]);
		printf("%-28s %10.2f\n%-28s %10.2f\n", "tar cf", m[3], "mksquashfs -noI -noD -noF -noX",
		       m[4]);
		printf("targets: import >= 5x faster than mksquashfs, >= 0.5x the speed of tar cf\n");
	}
	bench_rm_rf(c.base);
	return rc ? 1 : 0;
}
