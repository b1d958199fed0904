/*
 * main.c - the zrfs command: options, mount, session loop, shutdown.
 *
 * zrfs opens the dataset read-only before mounting (and its writer, for
 * -o writable), so a bad dataset or a writer already at work is reported on the
 * terminal and nothing is mounted. It then mounts, detaches
 * (unless -f) only once the mount is in place, so that the mount is ready
 * when the command returns, and serves requests on a multithreaded loop
 * until unmounted (fusermount3 -u, umount) or sent SIGINT/SIGTERM/SIGHUP,
 * which unmount cleanly.
 */
#include "zrfs_i.h"
#include "zrsampler.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <syslog.h>
#include <unistd.h>

static const char usage[] =
	"usage: zrfs DATASET MOUNTPOINT [-f] [-d] [-s] [-o OPTION[,OPTION...]]\n"
	"\n"
	"Mount the zrecord dataset DATASET on MOUNTPOINT, read-only unless\n"
	"-o writable:\n"
	"one directory per field holding one file per record, FIELD.npy for\n"
	"fixed-shape fields, FIELD.present.npy (which records have a value),\n"
	"meta.json, .batches/SPEC/epoch-E/K/ holding batch\n"
	"K of epoch E of a sampler order (ids, FIELD, FIELD.offsets, FIELD.npy,\n"
	"info.json; .batches/.why/SPEC says why a spec is refused), for a dataset\n"
	"that keeps its files' names (zr import dir, zr import tar) tree/ holding\n"
	"the records as files under those names, and, for a dataset with class\n"
	"names (zr import dir --label-from-parent), by/LABEL/CLASS/ holding the\n"
	"records of each class (an ImageFolder layout). The mount follows commits\n"
	"made by any writer.\n"
	"Unmount with 'fusermount3 -u MOUNTPOINT'.\n"
	"\n"
	"  -f                   stay in the foreground\n"
	"  -d                   debug: log every request (implies -f)\n"
	"  -s                   serve requests on one thread\n"
	"  -h, --help           this text;  -V, --version  the version\n"
	"\n"
	"Options (-o):\n"
	"  ro, rw               read-only either way (the default): mount(8) passes\n"
	"                       rw to every helper unless told ro, so it cannot ask\n"
	"                       for writes; rw without writable says so on stderr\n"
	"  writable             the mount becomes the dataset's writer: a record\n"
	"                       file written is its new value once its writer\n"
	"                       closes it (never at a forked child's close, nor if\n"
	"                       the writer is killed); a new file in a field\n"
	"                       directory becomes a record, named by its path, once\n"
	"                       committed with a group (until then a rename or a\n"
	"                       removal leaves no record: sed -i, atomic saves);\n"
	"                       rm makes a value missing; mv moves one (see\n"
	"                       zrfs(8), WRITING THROUGH THE MOUNT)\n"
	"  commit_ms=MS         writable: new files and removals are committed in\n"
	"                       groups, at most MS after they are closed or removed\n"
	"                       (default 100; at once on fsync of the file or of its\n"
	"                       directory: sync DIR)\n"
	"  commit_size=SIZE     or once SIZE bytes of them wait (default 64M)\n"
	"  timeout=SECS         how long the kernel may cache names and attributes\n"
	"                       (default 31536000: content never changes under a\n"
	"                       name's inode; commits are followed by telling the\n"
	"                       kernel what changed)\n"
	"  cache=SIZE           bytes of inflated flate records and assembled batch\n"
	"                       files kept (default 256M; K, M, G suffixes); a file\n"
	"                       larger than this is refused (EFBIG)\n"
	"  batches=SPEC[:SPEC]  sampler specs listed under /.batches (any valid spec\n"
	"                       works there on lookup; a default is always listed)\n"
	"  prefetch=N           batch steps assembled ahead of the reader (default 2)\n"
	"  drop_behind=N        drop the batch files of step k-N from the page cache\n"
	"                       when step k is read (default 16; 0 keeps them)\n"
	"  hold_ms=MS           a batch step keeps the commit its first lookup\n"
	"                       found for MS after its files were last looked up,\n"
	"                       also when the kernel forgets them (default 5000):\n"
	"                       a reader that opens a step's files in turn within\n"
	"                       that reads one state; one that waits longer keeps\n"
	"                       one of them open\n"
	"  readaround=SIZE      records read ahead (prefetch, cold reads) are read in\n"
	"                       SIZE-aligned windows (default 64K if the chunk files\n"
	"                       fit in half the memory, else 0: exactly the records)\n"
	"  readahead_kb=KB      kernel read-ahead of the mount (default 1024; 0 keeps\n"
	"                       the kernel's); larger reads mean fewer requests\n"
	"  allow_other          let other users read the mount (needs\n"
	"                       user_allow_other in /etc/fuse.conf for non-root)\n"
	"  log=FILE             append the daemon's log lines to FILE (default:\n"
	"                       syslog; with -f, standard error)\n"
	"  list_views           list .batches, by and tree in the mount's root (they are\n"
	"                       always reachable by name; unlisted, tools that walk\n"
	"                       the whole mount, du, find, rsync -a, see each record\n"
	"                       once)\n"
	"  check                check every raw value against its checksum before it is\n"
	"                       served (flate values always are): a record file's value\n"
	"                       is loaded whole into the cache, once; a damaged one\n"
	"                       reads EIO, logged with where it lies\n"
	"  splice               splice raw records from the chunk files into replies\n"
	"                       instead of reading them into a buffer (zero-copy; on\n"
	"                       the machines measured it was slower, see BENCHMARKS.md)\n"
	"  poll_us=US           after each request, a serving thread looks for the\n"
	"                       next one for US microseconds before it sleeps,\n"
	"                       yielding its CPU to other work meanwhile (at most\n"
	"                       100000; default 50 in uring's threads, 0 on\n"
	"                       /dev/fuse): small requests in a row get cheaper\n"
	"  uring                serve requests through io_uring rings, one queue per\n"
	"                       CPU, each request on the CPU of the program that made\n"
	"                       it (Linux 6.14+; as root: echo Y >\n"
	"                       /sys/module/fuse/parameters/enable_uring). Where the\n"
	"                       kernel does not offer it, a log line says so and\n"
	"                       requests go through /dev/fuse (see zrfs(8))\n"
	"  uring_threads=N      ring threads per CPU (default 2): one serves while\n"
	"                       another waits on a slow request\n"
	"  max_threads=N        worker threads (default 10); clone_fd: one /dev/fuse\n"
	"                       descriptor per thread\n"
	"Other FUSE mount options are passed on (see mount.fuse3(8)).\n";

/* The command line: the mount's options go straight into opts, as
 * fuse_opt_parse() finds them (switches by the templates below, numbers
 * through num_opts); the rest is the command's own. */
struct cli {
	struct zrfs_opts opts;
	char *dataset;
	const char *mountpoint; /* as given (libfuse's, parsed again there) */
	int nonopts;
	char *batches, *log;
	int writable, rw, ro, allow_other;
	bool bad;               /* an option was refused, and said why */
};

/* -o NAME=N: each into its place in struct zrfs_opts, checked. */
enum num_type { NUM_SECONDS, NUM_U64, NUM_UNSIGNED };
static const struct num_opt {
	const char *name;
	size_t off;           /* in struct zrfs_opts */
	enum num_type type;
	uint64_t min, max;
	bool suffixes;        /* K, M, G */
} num_opts[] = {
	{"timeout", offsetof(struct zrfs_opts, timeout), NUM_SECONDS, 0, 1u << 31, false},
	{"cache", offsetof(struct zrfs_opts, cache_bytes), NUM_U64, 0, UINT64_C(1) << 40, true},
	{"prefetch", offsetof(struct zrfs_opts, prefetch), NUM_UNSIGNED, 0, 64, false},
	{"drop_behind", offsetof(struct zrfs_opts, drop_behind), NUM_UNSIGNED, 0, 1u << 20, false},
	{"hold_ms", offsetof(struct zrfs_opts, hold_ms), NUM_UNSIGNED, 0, 3600000, false},
	{"readaround", offsetof(struct zrfs_opts, readaround), NUM_U64, 0, 64 << 20, true},
	{"readahead_kb", offsetof(struct zrfs_opts, readahead_kb), NUM_UNSIGNED, 0, 1u << 20, false},
	{"commit_ms", offsetof(struct zrfs_opts, commit_ms), NUM_UNSIGNED, 0, 60000, false},
	{"commit_size", offsetof(struct zrfs_opts, commit_bytes), NUM_U64, 0, UINT64_C(1) << 40, true},
	{"poll_us", offsetof(struct zrfs_opts, poll_us), NUM_UNSIGNED, 0, 100000, false},
	{"uring_threads", offsetof(struct zrfs_opts, uring_threads), NUM_UNSIGNED, 1, 64, false},
};

enum { KEY_HELP, KEY_VERSION, KEY_ALLOW_OTHER, KEY_NUM };

#define NUM(name) FUSE_OPT_KEY(name "=", KEY_NUM)
static const struct fuse_opt cli_spec[] = {
	NUM("timeout"), NUM("cache"), NUM("prefetch"), NUM("drop_behind"), NUM("hold_ms"),
	NUM("readaround"), NUM("readahead_kb"), NUM("commit_ms"), NUM("commit_size"),
	NUM("poll_us"), NUM("uring_threads"),
	{"batches=%s", offsetof(struct cli, batches), 0},
	{"log=%s", offsetof(struct cli, log), 0},
	{"uring", offsetof(struct cli, opts.uring), 1},
	{"splice", offsetof(struct cli, opts.splice), 1},
	{"check", offsetof(struct cli, opts.check), 1},
	{"list_views", offsetof(struct cli, opts.list_views), 1},
	{"writable", offsetof(struct cli, writable), 1},
	{"rw", offsetof(struct cli, rw), 1},
	{"ro", offsetof(struct cli, ro), 1},
	FUSE_OPT_KEY("allow_other", KEY_ALLOW_OTHER),
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	FUSE_OPT_END,
};
#undef NUM

static int parse_num(const struct num_opt *o, const char *s, uint64_t *out);

/* "NAME=N" of num_opts, into its place in @opts: 0, or -1 (said). */
static int take_num(struct zrfs_opts *opts, const char *arg)
{
	size_t len = (size_t)(strchr(arg, '=') - arg);
	uint64_t v;

	for (size_t i = 0; i < sizeof num_opts / sizeof *num_opts; i++) {
		const struct num_opt *o = &num_opts[i];
		if (strlen(o->name) != len || strncmp(o->name, arg, len) != 0)
			continue;
		if (parse_num(o, arg + len + 1, &v) < 0)
			return -1;
		char *at = (char *)opts + o->off;
		if (o->type == NUM_SECONDS)
			*(double *)at = (double)v;
		else if (o->type == NUM_U64)
			*(uint64_t *)at = v;
		else
			*(unsigned *)at = (unsigned)v;
		return 0;
	}
	return -1; /* not reached: the templates name only these */
}

static int cli_proc(void *data, const char *arg, int key, struct fuse_args *out)
{
	struct cli *c = data;

	(void)out;
	switch (key) {
	case KEY_HELP:
		fputs(usage, stdout);
		exit(0);
	case KEY_VERSION:
		printf("zrfs %s (libfuse %s)\n", ZRFS_VERSION, fuse_pkgversion());
		exit(0);
	case KEY_ALLOW_OTHER:
		c->allow_other = 1;
		return 1; /* libfuse's too */
	case KEY_NUM:
		if (take_num(&c->opts, arg) < 0) {
			c->bad = true;
			return -1;
		}
		return 0;
	case FUSE_OPT_KEY_OPT:
		/* "-o batches=shuffle,seed=1,batch=8": the option splitter cut the
		 * spec at its commas; glue the spec's KEY=VALUE pieces back on */
		if (c->batches && strchr(arg, '=') &&
		    zs_spec_is_key(arg, (size_t)(strchr(arg, '=') - arg))) {
			char *joined = malloc(strlen(c->batches) + strlen(arg) + 2);
			if (!joined)
				return -1;
			sprintf(joined, "%s,%s", c->batches, arg);
			free(c->batches);
			c->batches = joined;
			return 0;
		}
		return 1;
	case FUSE_OPT_KEY_NONOPT:
		if (c->nonopts++ == 0) {
			c->dataset = strdup(arg);
			return 0; /* ours */
		}
		if (c->nonopts == 2) {
			c->mountpoint = arg;
			return 1; /* the mountpoint is libfuse's */
		}
		fprintf(stderr, "zrfs: unexpected argument '%s' after DATASET and MOUNTPOINT "
				"(usage: zrfs DATASET MOUNTPOINT [-o OPTIONS]; zrfs --help)\n",
			arg);
		c->bad = true;
		return -1;
	}
	return 1;
}

static int parse_num(const struct num_opt *o, const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (o->suffixes && *end && !end[1]) {
		switch (*end) {
		case 'K': case 'k': mul = UINT64_C(1) << 10; end++; break;
		case 'M': case 'm': mul = UINT64_C(1) << 20; end++; break;
		case 'G': case 'g': mul = UINT64_C(1) << 30; end++; break;
		}
	}
	if (errno || end == s || *end || s[0] == '-' || v > o->max / mul || v * mul < o->min) {
		fprintf(stderr, "zrfs: -o %s=%s: expected a number from %llu up to %llu%s\n", o->name,
			s, (unsigned long long)o->min, (unsigned long long)o->max,
			o->suffixes ? " (K, M, G allowed)" : "");
		return -1;
	}
	*out = v * mul;
	return 0;
}

/* A mount point zrfs can take: a directory, and not one a zrfs mount
 * holds already (a second daemon would be stacked on the first, and
 * every reader would see only the last). 0, or -1 (said). */
static int check_mountpoint(const char *mountpoint)
{
	char devno[32];
	struct stat st;

	if (stat(mountpoint, &st) < 0) {
		fprintf(stderr, "zrfs: %s: %s\n", mountpoint, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "zrfs: %s: not a directory (a mount point is an empty directory)\n",
			mountpoint);
		return -1;
	}
	if (zrfs_mount_at(mountpoint, "fuse.zrfs", devno, NULL)) {
		fprintf(stderr, "zrfs: %s: a zrfs mount is there already (umount it first, "
				"or use another mount point)\n", mountpoint);
		return -1;
	}
	return 0;
}

/* The dataset exists and the mount point is one zrfs can take: the
 * dataset's path made absolute (the daemon leaves the working directory
 * for "/", and it opens the dataset again for every commit it follows).
 * 0, or -1 (said). */
static int resolve_paths(struct cli *c, struct zrfs *fs)
{
	char *abs = realpath(c->dataset, NULL);

	if (!abs) {
		fprintf(stderr, "zrfs: %s: %s\n", c->dataset, strerror(errno));
		return -1;
	}
	free(c->dataset);
	fs->dataset = c->dataset = abs;
	return check_mountpoint(c->mountpoint); /* before libfuse says "bad mount point" */
}

/* Raise the mount's read-ahead (best effort): its bdi is "0:<minor>". */
static void set_readahead(const char *mountpoint, unsigned kb)
{
	char devno[32], path[128];
	FILE *f;

	if (kb == 0 || !zrfs_mount_at(mountpoint, NULL, devno, NULL))
		return;
	snprintf(path, sizeof path, "/sys/class/bdi/%s/read_ahead_kb", devno);
	if (!(f = fopen(path, "w")))
		return;
	fprintf(f, "%u\n", kb);
	if (fclose(f) != 0)
		fuse_log(FUSE_LOG_DEBUG, "zrfs: cannot set %s\n", path);
}

static bool to_syslog;
static FILE *log_file; /* -o log=FILE */

static void log_func(enum fuse_log_level level, const char *fmt, va_list ap)
{
	if (log_file) {
		vfprintf(log_file, fmt, ap);
		fflush(log_file);
	} else if (to_syslog) {
		vsyslog((int)level, fmt, ap);
	} else {
		vfprintf(stderr, fmt, ap);
	}
}

/* Where the daemon's log lines go once it detaches: -o log=FILE, else
 * syslog; a machine without a syslog socket (many containers) is told at
 * once that they would be lost. 0, or -1 (said). */
static int open_log(const char *path, bool foreground)
{
	struct stat st;
	int fd;

	if (path) {
		fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
		if (fd < 0 || !(log_file = fdopen(fd, "a"))) {
			fprintf(stderr, "zrfs: -o log=%s: %s\n", path, strerror(errno));
			if (fd >= 0)
				close(fd);
			return -1;
		}
		return 0;
	}
	if (!foreground && (stat("/dev/log", &st) < 0 || !S_ISSOCK(st.st_mode)))
		fprintf(stderr, "zrfs: no syslog here (/dev/log): the daemon's log lines (a spec "
				"refused, a damaged record) would be lost; mounting with them in "
				"the foreground is -f, into a file -o log=FILE\n");
	return 0;
}

/* The options of @c into @fs, checked: 0, or -1 (reported). */
static int take_options(struct cli *c, struct zrfs *fs)
{
	if (c->opts.uring && c->opts.splice) {
		fprintf(stderr, "zrfs: splice does not go through io_uring rings: use one of "
				"uring and splice\n");
		return -1;
	}
	fs->opts = c->opts;
	return 0;
}

/* Mount, detach, serve until unmounted: the exit status. */
static int serve_session(struct zrfs *fs, struct fuse_session *se,
			 const struct fuse_cmdline_opts *opts)
{
	struct fuse_loop_config *cfg = NULL;
	int rc;

	if (fuse_set_signal_handlers(se) < 0)
		return 1;
	if (fuse_session_mount(se, opts->mountpoint) < 0) {
		fprintf(stderr, "zrfs: cannot mount on %s\n", opts->mountpoint);
		fuse_remove_signal_handlers(se);
		return 1;
	}
	set_readahead(opts->mountpoint, fs->opts.readahead_kb);
	if (zrfs_transport_start(fs, se) < 0)
		fprintf(stderr, "zrfs: cannot set up %s: requests are served as usual\n",
			fs->opts.uring ? "io_uring rings" : "polling");
	to_syslog = !opts->foreground;
	if (to_syslog)
		openlog("zrfs", LOG_PID, LOG_DAEMON);
	fuse_daemonize(opts->foreground); /* returns in the child; the parent exits 0 */
	zrfs_writes_mounted(fs);
	zrfs_batches_start(fs);
	if (zrfs_follow_start(fs) < 0)
		fuse_log(FUSE_LOG_ERR, "zrfs: %s: cannot follow commits: the mount shows the "
			 "dataset as it was when mounted\n", fs->dataset);
	if (opts->singlethread) {
		rc = fuse_session_loop(se) < 0;
	} else {
		cfg = fuse_loop_cfg_create();
		fuse_loop_cfg_set_clone_fd(cfg, (unsigned)opts->clone_fd);
		fuse_loop_cfg_set_max_threads(cfg, opts->max_threads);
		rc = fuse_session_loop_mt(se, cfg) < 0;
	}
	zrfs_follow_stop(fs); /* it talks to the kernel through the session */
	zrfs_transport_stop(fs); /* once requests waiting for a commit are answered */
	fuse_session_unmount(se);
	fuse_remove_signal_handlers(se);
	fuse_loop_cfg_destroy(cfg);
	return rc;
}

static void teardown(struct zrfs *fs)
{
	zrfs_follow_stop(fs);
	zrfs_batches_destroy(fs); /* its threads may still use the session */
	if (fs->se)
		fuse_session_destroy(fs->se);
	zrfs_transport_destroy(fs);
	zrfs_byclass_destroy(fs);
	zrfs_writes_close(fs); /* its last commit keeps tree/'s directories and links */
	zrfs_tree_destroy(fs);
	zrfs_follow_free(fs); /* the write layer's last commits are made */
	zrfs_dataset_close(fs);
}

/* Whether mount(8) started this process (mount.fuse3 becomes a shell that
 * starts it: mount, sh, zrfs): then rw is mount(8)'s, not the user's. */
static bool started_by_mount(void)
{
	int pid = (int)getppid();

	for (int up = 0; up < 3 && pid > 1; up++) {
		char path[64], stat[512] = "";
		FILE *f;
		snprintf(path, sizeof path, "/proc/%d/stat", pid);
		if (!(f = fopen(path, "re")))
			return false;
		size_t n = fread(stat, 1, sizeof stat - 1, f);
		fclose(f);
		stat[n] = 0;
		/* "PID (COMM) STATE PPID ...": COMM may hold spaces and ')' */
		char *open = strchr(stat, '('), *end = strrchr(stat, ')');
		if (!open || !end || end < open)
			return false;
		if (end - open - 1 == 5 && memcmp(open + 1, "mount", 5) == 0)
			return true;
		if (sscanf(end + 1, " %*c %d", &pid) != 1)
			return false;
	}
	return false;
}

static void cli_free(struct cli *c)
{
	free(c->dataset);
	free(c->batches);
	free(c->log);
}

/* What the daemon's process needs, whoever started it. */
static void setup_process(void)
{
	struct rlimit rl;

	/* Inflated records and batch files are large and short-lived outside
	 * the cache: keep them in their own mappings, returned to the system
	 * when freed, rather than letting glibc's sliding threshold move them
	 * into per-thread heaps that never shrink. */
	mallopt(M_MMAP_THRESHOLD, 256 << 10);
	/* A batch opens each chunk it spans at once, and chunk files are
	 * limited to half the descriptors (core/chunk.c): the soft limit, often
	 * 1024, goes up to the hard one, as a server raises it */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	/* an offset table cut short by another program while mounted: EIO for
	 * the entries it lost, not the daemon's death (core/fault.c) */
	zr_guard_mappings();
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts opts = {0};
	struct cli cli = {.opts = {.timeout = 31536000, .cache_bytes = 256 << 20,
				   .readahead_kb = 1024, .prefetch = 2,
				   .drop_behind = 16, .hold_ms = 5000, .readaround = UINT64_MAX,
				   .commit_ms = 100, .commit_bytes = 64 << 20,
				   .poll_us = ZRFS_POLL_DEFAULT, .uring_threads = 2}};
	struct zrfs fs = {0};
	char *fsname = NULL, *o = NULL;
	int rc = 2; /* usage errors until the arguments are understood */

	setup_process();
	if (fuse_opt_parse(&args, &cli, cli_spec, cli_proc) < 0) {
		if (!cli.bad) /* else what was wrong is said */
			fputs(usage, stderr);
		goto out;
	}
	if (cli.nonopts != 2) {
		fprintf(stderr, "zrfs: %s (usage: zrfs DATASET MOUNTPOINT [-o OPTIONS]; "
				"zrfs --help)\n",
			cli.nonopts > 2 ? "too many arguments" : cli.nonopts == 1 ? "no MOUNTPOINT given"
											: "no DATASET given");
		goto out;
	}
	if (take_options(&cli, &fs) < 0)
		goto out;
	if (cli.writable && cli.ro) {
		fprintf(stderr, "zrfs: ro and writable contradict each other: give one\n");
		goto out;
	}
	rc = 1; /* from here on, failures are the dataset's or the mount's */
	if (resolve_paths(&cli, &fs) < 0)
		goto out;
	/* rw is what mount(8) passes when not told ro (fstab "defaults" too):
	 * it never makes the mount writable; a user who typed it learns how */
	if (cli.rw && !cli.writable && !started_by_mount())
		fprintf(stderr, "zrfs: %s: the mount is read-only: 'rw' does not make a zrfs mount "
				"writable; -o writable does\n", cli.dataset);
	/* read-only unless asked, named after the dataset. Mode bits are
	 * checked by the kernel where other users may enter (allow_other);
	 * else only the mounting user can, every write the daemon does not
	 * serve it refuses itself, and a path walk after a create costs no
	 * GETATTR of the directory for the check (tools/bench_write.sh) */
	if (fuse_opt_add_opt_escaped(&fsname, cli.dataset) < 0 ||
	    (o = malloc(strlen(fsname) + 64)) == NULL)
		goto out;
	sprintf(o, "-o%s%s,subtype=zrfs,fsname=%s", cli.writable ? "rw" : "ro",
		cli.allow_other ? ",default_permissions" : "", fsname);
	if (fuse_opt_add_arg(&args, o) < 0 || fuse_parse_cmdline(&args, &opts) < 0) {
		rc = 2;
		goto out;
	}
	if (opts.show_help || opts.show_version || !opts.mountpoint) {
		fputs(usage, opts.mountpoint ? stdout : stderr);
		rc = opts.mountpoint ? 0 : 2;
		goto out;
	}
	/* libfuse's options are checked here, before the dataset is opened: one
	 * it does not know is a usage error (it says which) */
	fs.se = fuse_session_new(&args, cli.writable ? &zrfs_rw_ops : &zrfs_ops, sizeof zrfs_ops, &fs);
	if (!fs.se) {
		rc = 2;
		goto out;
	}
	if (open_log(cli.log, opts.foreground) < 0)
		goto out;
	if (zrfs_dataset_open(&fs) < 0 || (cli.writable && zrfs_writes_open(&fs, opts.mountpoint) < 0))
		goto out;
	struct zrfs_view *first = zrfs_view_current(&fs);
	if (zrfs_batches_create(&fs, first, cli.batches) < 0) {
		zrfs_view_put(first);
		rc = 2;
		goto out;
	}
	if (zrfs_byclass_create(&fs, first) < 0) {
		fprintf(stderr, "zrfs: %s: cannot read the label fields: %s\n", fs.dataset,
			zr_errmsg(first->ds));
		zrfs_view_put(first);
		goto out;
	}
	if (zrfs_tree_create(&fs, first) < 0) {
		fprintf(stderr, "zrfs: %s: cannot index the records' names: out of memory\n",
			fs.dataset);
		zrfs_view_put(first);
		goto out;
	}
	zrfs_view_put(first);
	fuse_set_log_func(log_func);
	rc = serve_session(&fs, fs.se, &opts);
out:
	teardown(&fs);
	free(opts.mountpoint);
	cli_free(&cli);
	if (log_file)
		fclose(log_file);
	free(fsname);
	free(o);
	fuse_opt_free_args(&args);
	return rc;
}
