/*
 * bench_common.c - what the benchmarks share: seeded numbers, medians, the
 * options every dataset benchmark takes, and the scratch environment of
 * those that make a dataset (inputs, programs started and waited for,
 * zrfs mounted in the foreground and unmounted, all of it removed at the
 * end or when a signal interrupts the benchmark).
 */
#include "bench_i.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

uint64_t bench_splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void bench_shuffle(uint64_t *ids, uint64_t n, uint64_t seed)
{
	for (uint64_t i = n; i > 1; i--) {
		uint64_t j = (uint64_t)(((unsigned __int128)bench_splitmix(&seed) * i) >> 64);
		uint64_t t = ids[i - 1];
		ids[i - 1] = ids[j];
		ids[j] = t;
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

double bench_median(double *v, uint64_t n)
{
	qsort(v, n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* --threads 1,2,4: thread counts, each 1..256. 0 or -1 (said). */
static int parse_threads(const char *val, struct bench_args *a)
{
	const char *p = val;

	a->nthreads = 0;
	while (*p) {
		char *end;
		unsigned long t = strtoul(p, &end, 10);
		if (end == p || t < 1 || t > 256 || (*end && *end != ',') ||
		    a->nthreads == BENCH_THREADS_MAX) {
			zr_warn("bench: --threads %s: not a list of up to %d thread counts of 1..256 "
				"(e.g. 1,2,4,8,16)", val, BENCH_THREADS_MAX);
			return -1;
		}
		a->threads[a->nthreads++] = (unsigned)t;
		p = *end ? end + 1 : end;
	}
	if (a->nthreads == 0) {
		zr_warn("bench: --threads: an empty list");
		return -1;
	}
	return 0;
}

int bench_args_parse(int argc, char **argv, const char *help, struct bench_args *a)
{
	static const struct option opts[] = {{"records", required_argument, 0, 'r'},
					     {"size", required_argument, 0, 's'},
					     {"runs", required_argument, 0, 'n'},
					     {"dir", required_argument, 0, 'd'},
					     {"zrfs", required_argument, 0, 'z'},
					     {"uring", no_argument, 0, 'u'},
					     {"threads", required_argument, 0, 't'},
					     ZR_OPT_HELP, ZR_OPT_END};
	int c, rc = 0;

	while (rc == 0 && (c = zr_getopt(argc, argv, "h", opts, "bench")) != -1) {
		if ((c == 'z' || c == 'u') && !a->takes_zrfs) {
			zr_warn("bench: this benchmark takes no --zrfs or --uring");
			c = '?';
		} else if (c == 't' && !a->takes_threads) {
			zr_warn("bench: this benchmark takes no --threads");
			c = '?';
		}
		switch (c) {
		case 'r': rc = parse_u64(optarg, a->records_min, 10000000, "--records", &a->records); break;
		case 's':
			rc = parse_size(optarg, 1 << 24, "--size", &a->size) < 0 || a->size == 0 ? -1 : 0;
			break;
		case 'n': rc = parse_u64(optarg, 1, 100, "--runs", &a->runs); break;
		case 'd': a->dir = optarg; break;
		case 'z': a->zrfs = optarg; break;
		case 'u': a->uring = true; break;
		case 't': rc = parse_threads(optarg, a); break;
		case 'h': fputs(help, stdout); return 1;
		default: return -1;
		}
	}
	if (rc == 0 && optind < argc) {
		zr_warn("bench: unexpected '%s' (see 'zr bench --help')", argv[optind]);
		return -1;
	}
	return rc < 0 ? -1 : 0;
}

/* @session: the program gets a session of its own, as a daemon would (a
 * zrfs kept in the foreground): the scheduler then shares the CPUs between
 * it and the readers as between separate programs (autogroups), not as
 * threads of one (BENCHMARKS-HISTORY.md, "Polling for the next request"). */
static pid_t spawn(char *const argv[], bool quiet, bool session)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	pid_t pid;
	int rc;

	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&at);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	if (quiet)
		posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	if (session)
		posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID);
	rc = posix_spawnp(&pid, argv[0], &fa, &at, argv, environ);
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	return rc == 0 ? pid : -1;
}

int bench_run_quiet(char *const argv[], bool quiet)
{
	pid_t pid = spawn(argv, quiet, false);
	int status;

	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

int bench_run(char *const argv[])
{
	return bench_run_quiet(argv, false);
}

/* An interrupted benchmark leaves nothing behind. The zrfs running is
 * stopped (in a session of its own, the terminal's signals do not reach
 * it) and waited for; then a shell unmounts whatever is still mounted at
 * the scratch directory's mount points and removes the directory, never
 * crossing into another filesystem. Only async-signal-safe calls. */
static volatile sig_atomic_t zrfs_running;
static volatile sig_atomic_t guarded; /* the scratch directory exists */
/* the mount points in a scratch directory, for bench_start and the handler */
#define ZMNT "%s/zmnt"
#define SMNT "%s/smnt"
static char guard_base[PATH_MAX], guard_zmnt[PATH_MAX + 8], guard_smnt[PATH_MAX + 8];

static void on_signal(int sig)
{
	static const char clean[] = "fusermount3 -u -z \"$1\" 2>/dev/null; "
				    "fusermount3 -u -z \"$2\" 2>/dev/null; "
				    "rm -rf --one-file-system -- \"$3\"";
	char *argv[] = {"sh", "-c", (char *)clean, "sh", guard_smnt, guard_zmnt, guard_base, NULL};
	pid_t pid = -1;

	if (zrfs_running > 0) {
		kill((pid_t)zrfs_running, SIGTERM); /* it unmounts and exits */
		waitpid((pid_t)zrfs_running, NULL, 0);
	}
	if (guarded)
		pid = fork();
	if (pid == 0) {
		execve("/bin/sh", argv, environ);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
	signal(sig, SIG_DFL);
	raise(sig);
}

void bench_guard(const char *base)
{
	snprintf(guard_base, sizeof guard_base, "%s", base);
	snprintf(guard_zmnt, sizeof guard_zmnt, ZMNT, base);
	snprintf(guard_smnt, sizeof guard_smnt, SMNT, base);
	guarded = 1;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
}

void bench_remove(const char *base)
{
	sigset_t set, old;

	/* a signal now is taken once the directory is gone */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, &old);
	guarded = 0;
	rm_tree(base);
	sigprocmask(SIG_SETMASK, &old, NULL);
}

/* zrfs is kept in the foreground as our child so that bench_unmount_zrfs()
 * can wait for it to exit: a daemon still holding the chunk files mapped
 * would keep their pages through the next drop of the caches. */
int bench_mount_zrfs(struct bench_env *c)
{
	char *argv[] = {(char *)c->zrfs, c->ds, c->zmnt, "-f", c->zopts ? "-o" : NULL,
			(char *)c->zopts, NULL};

	return bench_mount_child(c, argv);
}

int bench_mount_child(struct bench_env *c, char *const argv[])
{
	struct stat before, st;
	int status;

	if (stat(c->zmnt, &before) < 0) {
		zr_warn("bench: %s: %s", c->zmnt, strerror(errno));
		return -1;
	}
	c->zpid = spawn(argv, false, true);
	zrfs_running = c->zpid;
	/* mounted when the mount point changes device; polled, as nothing
	 * else tells a foreground daemon's parent */
	for (int i = 0; c->zpid > 0 && i < 10000; i++) {
		if (stat(c->zmnt, &st) == 0 && st.st_dev != before.st_dev)
			return 0;
		if (waitpid(c->zpid, &status, WNOHANG) == c->zpid)
			break;
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	}
	zr_warn("bench: %s ... %s failed", argv[0], c->zmnt);
	if (c->zpid > 0 && waitpid(c->zpid, &status, WNOHANG) == 0) {
		kill(c->zpid, SIGTERM);
		waitpid(c->zpid, &status, 0);
	}
	c->zpid = zrfs_running = 0;
	return -1;
}

int bench_drop_caches(void)
{
	int fd, rc;

	sync();
	fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
	rc = fd >= 0 && write(fd, "3\n", 2) == 2 ? 0 : -1;
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Unmount if mounted (the final clean-up calls it either way). */
void bench_unmount(char *mnt)
{
	char *argv[] = {"fusermount3", "-u", mnt, NULL};
	bench_run_quiet(argv, true);
}

/* Unmount zrfs and wait for its daemon to exit. */
void bench_unmount_zrfs(struct bench_env *c)
{
	struct rusage ru;
	int status;

	bench_unmount(c->zmnt);
	c->zcpu = c->zsys = c->zwaits = 0;
	if (c->zpid > 0 && wait4(c->zpid, &status, 0, &ru) == c->zpid) {
		c->zsys = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
		c->zcpu = c->zsys + (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6;
		c->zwaits = (double)ru.ru_nvcsw;
	}
	c->zpid = zrfs_running = 0;
}

int bench_make_inputs(struct bench_env *c, bool flate, bool squash)
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
	if (bench_run(mk) != 0) {
		zr_warn("bench: mksquashfs failed (is squashfs-tools installed?)");
		return -1;
	}
	return 0;
}

void bench_find_zrfs(struct bench_env *c, char buf[PATH_MAX])
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

bool bench_start(struct bench_env *c, int argc, char **argv, const char *usage, const char *name,
		 uint64_t records_min, bool takes_zrfs, int *status)
{
	struct bench_args ba = {.records = c->records, .size = c->size, .runs = c->runs,
				.dir = c->dir, .zrfs = c->zrfs, .records_min = records_min,
				.takes_zrfs = takes_zrfs, .takes_threads = c->nthreads > 0,
				.nthreads = c->nthreads};
	memcpy(ba.threads, c->threads, sizeof ba.threads);
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
	c->uring = ba.uring;
	memcpy(c->threads, ba.threads, sizeof c->threads);
	c->nthreads = ba.nthreads;
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
	snprintf(c->zmnt, sizeof c->zmnt, ZMNT, c->base);
	snprintf(c->smnt, sizeof c->smnt, SMNT, c->base);
	if (takes_zrfs) {
		mkdir(c->zmnt, 0755);
		mkdir(c->smnt, 0755);
	}
	bench_guard(c->base);
	return true;
}

void bench_finish(struct bench_env *c)
{
	struct stat st;

	if (stat(c->zmnt, &st) == 0) { /* made by a benchmark that mounts */
		bench_unmount_zrfs(c);
		bench_unmount(c->smnt);
	}
	bench_remove(c->base);
}
