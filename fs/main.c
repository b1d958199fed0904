/*
 * main.c - the zrfs command: options, mount, session loop, shutdown.
 *
 * zrfs opens the dataset read-only before mounting, so a bad dataset is
 * reported on the terminal and nothing is mounted. It then mounts, detaches
 * (unless -f) only once the mount is in place, so that the mount is ready
 * when the command returns, and serves requests on a multithreaded loop
 * until unmounted (fusermount3 -u, umount) or sent SIGINT/SIGTERM/SIGHUP,
 * which unmount cleanly.
 */
#include "zrfs_i.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

static const char usage[] =
	"usage: zrfs DATASET MOUNTPOINT [-f] [-d] [-s] [-o OPTION[,OPTION...]]\n"
	"\n"
	"Mount the zrecord dataset DATASET on MOUNTPOINT, read-only: one directory\n"
	"per field holding one file per record, FIELD.npy for fixed-shape fields,\n"
	"meta.json, and .batches/SPEC/epoch-E/K/ holding batch K of epoch E of a\n"
	"sampler order (ids, FIELD, FIELD.offsets, FIELD.npy, info.json).\n"
	"Unmount with 'fusermount3 -u MOUNTPOINT'.\n"
	"\n"
	"  -f                   stay in the foreground\n"
	"  -d                   debug: log every request (implies -f)\n"
	"  -s                   serve requests on one thread\n"
	"  -h, --help           this text;  -V, --version  the version\n"
	"\n"
	"Options (-o):\n"
	"  ro                   read-only (the default; 'rw' is refused)\n"
	"  timeout=SECS         how long the kernel may cache names and attributes\n"
	"                       (default 31536000: the dataset cannot change)\n"
	"  cache=SIZE           bytes of inflated flate records and assembled batch\n"
	"                       files kept (default 256M; K, M, G suffixes); a file\n"
	"                       larger than this is refused (EFBIG)\n"
	"  batches=SPEC[:SPEC]  sampler specs listed under /.batches (any valid spec\n"
	"                       works there on lookup; a default is always listed)\n"
	"  prefetch=N           batch steps assembled ahead of the reader (default 2)\n"
	"  drop_behind=N        drop the batch files of step k-N from the page cache\n"
	"                       when step k is read (default 16; 0 keeps them)\n"
	"  readaround=SIZE      records read ahead (prefetch, cold reads) are read in\n"
	"                       SIZE-aligned windows (default 64K if the chunk files\n"
	"                       fit in half the memory, else 0: exactly the records)\n"
	"  readahead_kb=KB      kernel read-ahead of the mount (default 1024; 0 keeps\n"
	"                       the kernel's); larger reads mean fewer requests\n"
	"  allow_other          let other users read the mount (needs\n"
	"                       user_allow_other in /etc/fuse.conf for non-root)\n"
	"  splice               splice raw records from the chunk files into replies\n"
	"                       instead of reading them into a buffer (zero-copy; on\n"
	"                       the machines measured it was slower, see BENCHMARKS.md)\n"
	"  max_threads=N        worker threads (default 10); clone_fd: one /dev/fuse\n"
	"                       descriptor per thread\n"
	"Other FUSE mount options are passed on (see mount.fuse3(8)).\n";

struct cli {
	char *dataset;
	int nonopts;
	char *timeout, *cache, *readahead, *batches, *prefetch, *drop_behind, *readaround;
	int rw, splice;
};


enum { KEY_HELP, KEY_VERSION };

static const struct fuse_opt cli_spec[] = {
	{"timeout=%s", offsetof(struct cli, timeout), 0},
	{"cache=%s", offsetof(struct cli, cache), 0},
	{"batches=%s", offsetof(struct cli, batches), 0},
	{"prefetch=%s", offsetof(struct cli, prefetch), 0},
	{"drop_behind=%s", offsetof(struct cli, drop_behind), 0},
	{"readaround=%s", offsetof(struct cli, readaround), 0},
	{"readahead_kb=%s", offsetof(struct cli, readahead), 0},
	{"rw", offsetof(struct cli, rw), 1},
	{"splice", offsetof(struct cli, splice), 1},
	{"ro", offsetof(struct cli, rw), 0},
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	FUSE_OPT_END,
};

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
	case FUSE_OPT_KEY_OPT:
		/* "-o batches=shuffle,seed=1,batch=8": the option splitter cut the
		 * spec at its commas; glue the spec's KEY=VALUE pieces back on */
		if (c->batches && strchr(arg, '=')) {
			static const char *const keys[] = {"seed", "batch", "rank", "world",
							   "lo", "hi", "tail", "window",
							   "stride", "block"};
			size_t klen = (size_t)(strchr(arg, '=') - arg);
			for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
				if (strlen(keys[i]) != klen || strncmp(arg, keys[i], klen) != 0)
					continue;
				char *joined = malloc(strlen(c->batches) + strlen(arg) + 2);
				if (!joined)
					return -1;
				sprintf(joined, "%s,%s", c->batches, arg);
				free(c->batches);
				c->batches = joined;
				return 0;
			}
		}
		return 1;
	case FUSE_OPT_KEY_NONOPT:
		if (c->nonopts++ == 0) {
			c->dataset = strdup(arg);
			return 0; /* ours */
		}
		return c->nonopts == 2 ? 1 : -1; /* the mountpoint is libfuse's */
	}
	return 1;
}

static int parse_num(const char *what, const char *s, uint64_t max, bool suffixes, uint64_t *out)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (suffixes && *end && !end[1]) {
		switch (*end) {
		case 'K': case 'k': mul = UINT64_C(1) << 10; end++; break;
		case 'M': case 'm': mul = UINT64_C(1) << 20; end++; break;
		case 'G': case 'g': mul = UINT64_C(1) << 30; end++; break;
		}
	}
	if (errno || end == s || *end || s[0] == '-' || v > max / mul) {
		fprintf(stderr, "zrfs: -o %s=%s: expected a number up to %llu%s\n", what, s,
			(unsigned long long)max, suffixes ? " (K, M, G allowed)" : "");
		return -1;
	}
	*out = v * mul;
	return 0;
}

/* ---- setting up ---- */

static int load_meta(struct zrfs *fs)
{
	char path[PATH_MAX];
	struct stat st;
	int fd, rc = -1;

	if (snprintf(path, sizeof path, "%s/meta.json", fs->dataset) >= (int)sizeof path)
		return -1;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_size > (16 << 20))
		goto out;
	fs->meta_len = (size_t)st.st_size;
	fs->meta = malloc(fs->meta_len + 1);
	if (fs->meta && read(fd, fs->meta, fs->meta_len) == (ssize_t)fs->meta_len)
		rc = 0;
	fs->mtime = st.st_mtim;
out:
	if (fd >= 0)
		close(fd);
	if (rc < 0)
		fprintf(stderr, "zrfs: %s: cannot read: %s\n", path, strerror(errno));
	return rc;
}

static int setup(struct zrfs *fs)
{
	struct stat st;
	int rc = zr_open(&fs->ds, fs->dataset, ZR_RDONLY);

	if (rc < 0) {
		fprintf(stderr, "zrfs: %s\n", zr_errmsg(NULL));
		return -1;
	}
	if (stat(fs->dataset, &st) == 0) {
		fs->uid = st.st_uid;
		fs->gid = st.st_gid;
	}
	fs->n = zr_length(fs->ds);
	fs->nfields = zr_field_count(fs->ds);
	fs->fields = calloc(fs->nfields, sizeof *fs->fields);
	if (!fs->fields || load_meta(fs) < 0)
		return -1;
	for (unsigned i = 0; i < fs->nfields; i++) {
		struct zrfs_field *f = &fs->fields[i];
		f->spec = zr_field(fs->ds, i);
		f->name_len = strlen(f->spec->name);
		f->ext_len = f->spec->ext ? strlen(f->spec->ext) : 0;
		f->record_size = zr_field_record_size(fs->ds, i);
		f->flate = f->spec->compress == ZR_FLATE;
		f->has_npy = f->spec->fixed &&
			     zrfs_npy_header(f->spec, fs->n, f->record_size, &f->npy) == 0;
	}
	if (zrfs_cache_create(&fs->cache, fs->opts.cache_bytes) < 0) {
		fprintf(stderr, "zrfs: out of memory\n");
		return -1;
	}
	if (fs->opts.readaround == UINT64_MAX) {
		/* a dataset that fits in memory is read once per epoch, all of it:
		 * reading around each record costs no extra I/O and makes fewer,
		 * larger requests; a larger one would read bytes that are evicted
		 * before they are used, so only the records themselves */
		long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
		uint64_t ram = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
		fs->opts.readaround = zr_chunk_bytes(fs->ds) <= ram / 2 ? 64 << 10 : 0;
	}
	return 0;
}

/* Raise the mount's read-ahead (best effort): its bdi is "0:<minor>". */
static void set_readahead(const char *mountpoint, unsigned kb)
{
	char want[PATH_MAX], line[4096], path[128];
	FILE *f;

	if (kb == 0 || !realpath(mountpoint, want) || !(f = fopen("/proc/self/mountinfo", "r")))
		return;
	while (fgets(line, sizeof line, f)) {
		char devno[32], mnt[PATH_MAX];
		/* id parent major:minor root mountpoint ...; the last match wins */
		if (sscanf(line, "%*d %*d %31s %*s %4095s", devno, mnt) == 2 &&
		    strcmp(mnt, want) == 0)
			snprintf(path, sizeof path, "/sys/class/bdi/%s/read_ahead_kb", devno);
	}
	fclose(f);
	if (path[0] == 0 || !(f = fopen(path, "w")))
		return;
	fprintf(f, "%u\n", kb);
	if (fclose(f) != 0)
		fuse_log(FUSE_LOG_DEBUG, "zrfs: cannot set %s\n", path);
}

/* ---- callbacks not about the tree or contents ---- */

static void zrfs_init(void *userdata, struct fuse_conn_info *conn)
{
	struct zrfs *fs = userdata;

	fs->no_open = (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT) != 0;
	if (!(conn->capable & FUSE_CAP_SPLICE_WRITE))
		fs->opts.splice = 0;
	if (fs->opts.splice)
		conn->want |= FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE;
	else
		conn->want &= ~(unsigned)(FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
	/* the dataset cannot change under the mount: never revalidate pages */
	conn->want &= ~(unsigned)FUSE_CAP_AUTO_INVAL_DATA;
	conn->max_readahead = 1 << 20;
	conn->max_background = 64;
	conn->congestion_threshold = 48;
}

static void zrfs_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct zrfs *fs = fuse_req_userdata(req);

	(void)ino;
	if (fs->no_open) {
		fuse_reply_err(req, ENOSYS); /* listings are cached, no OPENDIR again */
		return;
	}
	fi->keep_cache = 1;
	fi->cache_readdir = 1;
	fuse_reply_open(req, fi);
}

static void zrfs_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct zrfs *fs = fuse_req_userdata(req);
	struct statvfs sv;

	(void)ino;
	memset(&sv, 0, sizeof sv);
	sv.f_bsize = sv.f_frsize = 4096;
	sv.f_files = fs->n * fs->nfields + fs->nfields * 2 + 2;
	sv.f_namemax = 255;
	sv.f_flag = ST_RDONLY;
	fuse_reply_statfs(req, &sv);
}

const struct fuse_lowlevel_ops zrfs_ops = {
	.init = zrfs_init,
	.lookup = zrfs_ll_lookup,
	.getattr = zrfs_ll_getattr,
	.open = zrfs_ll_open,
	.read = zrfs_ll_read,
	.opendir = zrfs_opendir,
	.readdir = zrfs_ll_readdir,
	.readdirplus = zrfs_ll_readdirplus,
	.statfs = zrfs_statfs,
};

static bool to_syslog;

static void log_func(enum fuse_log_level level, const char *fmt, va_list ap)
{
	if (to_syslog)
		vsyslog((int)level, fmt, ap);
	else
		vfprintf(stderr, fmt, ap);
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts opts = {0};
	struct fuse_loop_config *cfg = NULL;
	struct fuse_session *se = NULL;
	struct cli cli = {0};
	struct zrfs fs = {.opts = {.timeout = 31536000, .cache_bytes = 256 << 20,
				   .readahead_kb = 1024, .prefetch = 2,
				   .drop_behind = 16, .readaround = UINT64_MAX}};
	char *fsname = NULL, *o = NULL;
	uint64_t v;
	int rc = 1;

	/* Inflated records and batch files are large and short-lived outside
	 * the cache: keep them in their own mappings, returned to the system
	 * when freed, rather than letting glibc's sliding threshold move them
	 * into per-thread heaps that never shrink. */
	mallopt(M_MMAP_THRESHOLD, 256 << 10);
	rc = 2; /* usage errors until the arguments are understood */
	if (fuse_opt_parse(&args, &cli, cli_spec, cli_proc) < 0 || cli.nonopts != 2) {
		fprintf(stderr, "%s", cli.nonopts > 2 ? "zrfs: too many arguments\n" : "");
		fputs(usage, stderr);
		goto out;
	}
	if (cli.rw) {
		fprintf(stderr, "zrfs: read-write mounts are not supported; mount without -o rw "
				"(read-only is the default)\n");
		goto out;
	}
	if ((cli.timeout && parse_num("timeout", cli.timeout, 1u << 31, false, &v) < 0) ||
	    (cli.timeout && ((fs.opts.timeout = (double)v), 0)) ||
	    (cli.cache && parse_num("cache", cli.cache, UINT64_C(1) << 40, true,
				    &fs.opts.cache_bytes) < 0) ||
	    (cli.prefetch && parse_num("prefetch", cli.prefetch, 64, false, &v) < 0) ||
	    (cli.prefetch && ((fs.opts.prefetch = (unsigned)v), 0)) ||
	    (cli.drop_behind && parse_num("drop_behind", cli.drop_behind, 1u << 20, false, &v) < 0) ||
	    (cli.drop_behind && ((fs.opts.drop_behind = (unsigned)v), 0)) ||
	    (cli.readaround && parse_num("readaround", cli.readaround, 64 << 20, true,
					 &fs.opts.readaround) < 0) ||
	    (cli.readahead && parse_num("readahead_kb", cli.readahead, 1u << 20, false, &v) < 0) ||
	    (cli.readahead && ((fs.opts.readahead_kb = (unsigned)v), 0)))
		goto out;
	fs.dataset = cli.dataset;
	fs.opts.splice = cli.splice;
	/* read-only, permissions checked by the kernel, named after the dataset */
	if (fuse_opt_add_opt_escaped(&fsname, cli.dataset) < 0 ||
	    (o = malloc(strlen(fsname) + 64)) == NULL) {
		rc = 1;
		goto out;
	}
	sprintf(o, "-oro,default_permissions,subtype=zrfs,fsname=%s", fsname);
	if (fuse_opt_add_arg(&args, o) < 0 || fuse_parse_cmdline(&args, &opts) < 0)
		goto out;
	if (opts.show_help || opts.show_version || !opts.mountpoint) {
		fputs(usage, opts.mountpoint ? stdout : stderr);
		rc = opts.mountpoint ? 0 : 2;
		goto out;
	}
	rc = 1; /* from here on, failures are the dataset's or the mount's */
	if (setup(&fs) < 0)
		goto out;
	if (zrfs_batches_create(&fs, cli.batches) < 0) {
		rc = 2;
		goto out;
	}
	if (zrfs_byclass_create(&fs) < 0) {
		fprintf(stderr, "zrfs: %s: cannot read the label fields: %s\n", fs.dataset,
			zr_errmsg(fs.ds));
		goto out;
	}
	fuse_set_log_func(log_func);
	se = fuse_session_new(&args, &zrfs_ops, sizeof zrfs_ops, &fs);
	if (!se)
		goto out;
	fs.se = se;
	if (fuse_set_signal_handlers(se) < 0)
		goto out;
	if (fuse_session_mount(se, opts.mountpoint) < 0) {
		fprintf(stderr, "zrfs: cannot mount on %s\n", opts.mountpoint);
		goto out_signals;
	}
	set_readahead(opts.mountpoint, fs.opts.readahead_kb);
	to_syslog = !opts.foreground;
	if (to_syslog)
		openlog("zrfs", LOG_PID, LOG_DAEMON);
	fuse_daemonize(opts.foreground); /* returns in the child; the parent exits 0 */
	zrfs_batches_start(&fs);
	if (opts.singlethread) {
		rc = fuse_session_loop(se) < 0;
	} else {
		cfg = fuse_loop_cfg_create();
		fuse_loop_cfg_set_clone_fd(cfg, (unsigned)opts.clone_fd);
		fuse_loop_cfg_set_max_threads(cfg, opts.max_threads);
		rc = fuse_session_loop_mt(se, cfg) < 0;
	}
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out:
	zrfs_batches_destroy(&fs); /* its thread may still use the session */
	if (se)
		fuse_session_destroy(se);
	fuse_loop_cfg_destroy(cfg);
	zrfs_byclass_destroy(&fs);
	zrfs_cache_destroy(fs.cache);
	zr_close(fs.ds);
	free(fs.fields);
	free(fs.meta);
	free(opts.mountpoint);
	free(cli.dataset);
	free(cli.timeout);
	free(cli.cache);
	free(cli.readahead);
	free(cli.batches);
	free(cli.prefetch);
	free(cli.drop_behind);
	free(cli.readaround);
	free(fsname);
	free(o);
	fuse_opt_free_args(&args);
	return rc;
}
