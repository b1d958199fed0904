/*
 * floor.c - zrfs-floor, the FUSE floor for the benchmarks: a low-level
 * libfuse filesystem that answers the requests a program makes of a zrfs
 * mount with no work but the reply, so that its rate is what the kernel,
 * libfuse and the transport cost on a machine, and zrfs's rate can be
 * read against it (BENCHMARKS.md).
 *
 *   zrfs-floor MOUNTPOINT [-f] [-s] [-o records=N,size=B,field=F,ext=E,
 *                                     writable,uring,poll_us=US,max_threads=N]
 *
 * It shows what a zrfs mount of N records shows in one field directory,
 * F/0.E .. F/N-1.E, each of B bytes (zeros), with every setting of zrfs's
 * that changes the kernel's behaviour: the same INIT (no open where the
 * kernel allows it, read-ahead, background queue, no automatic
 * invalidation, no splice), the same timeouts (names and attributes cached
 * for a year, misses too), readdirplus, one reply per request from the
 * same threads (libfuse's loop, or zrfs's io_uring transport with
 * -o uring). With -o writable it takes what cp -r and rsync do to a field
 * directory: a new name is created (and found again, uncached), written,
 * flushed, released, renamed or removed, all of it forgotten but the name;
 * an fsync of the directory answers at once; and what rm -rf does: a
 * record's name removed is gone (a bit a record, under the names' lock),
 * and the field directory is removed once nothing is left in it. Run it in
 * a session of its own (setsid), as a mounted zrfs is.
 */
#include "zrfs_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FLOOR_DIR 2                       /* the field directory */
#define FLOOR_REC UINT64_C(1000)          /* record i: FLOOR_REC + i */
#define FLOOR_NEW (UINT64_C(1) << 40)     /* new file k: FLOOR_NEW + k */

struct floor {
	struct zrfs fs;       /* its options and transport state, for transport.c */
	uint64_t records, size;
	char *field, *ext;
	int writable;
	pthread_mutex_t lock; /* the new names, the records removed */
	struct zrfs_table names;
	uint64_t made;
	uint64_t *gone;       /* a bit a record: its name was removed */
	uint64_t ngone;
	bool dir_gone;        /* the field directory was removed */
};

struct name {
	struct zrfs_link link;
	fuse_ino_t ino;
	char s[];
};

static struct floor *floor_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static const char zeros[1 << 20];

/* ---- names ---- */

static struct name *new_find(struct floor *f, const char *s)
{
	for (struct zrfs_link *l = zrfs_table_first(&f->names, zrfs_hash(s, strlen(s), 0)); l;
	     l = zrfs_table_next(l)) {
		struct name *n = zrfs_container(l, struct name, link);
		if (strcmp(n->s, s) == 0)
			return n;
	}
	return NULL;
}

static void attr(struct floor *f, fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof *st);
	st->st_ino = ino;
	st->st_nlink = 1;
	st->st_blksize = ZRFS_BLKSIZE; /* programs size their reads by it */
	st->st_uid = f->fs.uid; /* the daemon's, asked once */
	st->st_gid = f->fs.gid;
	if (ino == FUSE_ROOT_ID || ino == FLOOR_DIR) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
	} else {
		st->st_mode = S_IFREG | 0644;
		st->st_size = ino >= FLOOR_NEW ? 0 : (off_t)f->size;
		st->st_blocks = (st->st_size + 511) / 512;
	}
}

/* Whether record @i's name was removed (under f->lock, or with no writer). */
static bool gone(const struct floor *f, uint64_t i)
{
	return f->gone && (f->gone[i / 64] >> (i % 64) & 1);
}

/* The record @name names in the field directory: its number, or 0. */
static fuse_ino_t record(struct floor *f, const char *name)
{
	char *end;
	unsigned long long i = strtoull(name, &end, 10);
	bool removed;

	if (end == name || (name[0] == '0' && end != name + 1) || i >= f->records)
		return 0;
	if (*f->ext ? *end != '.' || strcmp(end + 1, f->ext) != 0 : *end != 0)
		return 0;
	pthread_mutex_lock(&f->lock);
	removed = gone(f, i);
	pthread_mutex_unlock(&f->lock);
	return removed ? 0 : FLOOR_REC + i;
}

/* ---- requests ---- */

static void fl_init(void *userdata, struct fuse_conn_info *conn)
{
	struct floor *f = userdata;

	/* zrfs_init's choices, one for one */
	f->fs.no_open = !f->writable && (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT) != 0;
	if (f->writable)
		conn->want &= ~(unsigned)FUSE_CAP_ATOMIC_O_TRUNC;
	conn->want &= ~(unsigned)(FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
	conn->want &= ~(unsigned)FUSE_CAP_AUTO_INVAL_DATA;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	conn->max_readahead = 1 << 20;
	conn->max_background = 64;
	conn->congestion_threshold = 48;
}

static void entry(fuse_req_t req, struct floor *f, fuse_ino_t ino, double timeout)
{
	struct fuse_entry_param e = {.ino = ino, .entry_timeout = timeout, .attr_timeout = timeout};

	if (ino)
		attr(f, ino, &e.attr);
	fuse_reply_entry(req, &e);
}

static void fl_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct floor *f = floor_of(req);
	struct name *n = NULL;

	if (parent == FUSE_ROOT_ID) {
		entry(req, f, strcmp(name, f->field) == 0 && !f->dir_gone ? FLOOR_DIR : 0,
		      f->fs.opts.timeout);
		return;
	}
	if (f->writable) {
		pthread_mutex_lock(&f->lock);
		n = new_find(f, name);
		pthread_mutex_unlock(&f->lock);
	}
	if (n) /* a new name: never cached, as zrfs's */
		entry(req, f, n->ino, 0);
	else
		entry(req, f, parent == FLOOR_DIR ? record(f, name) : 0, f->fs.opts.timeout);
}

static void fl_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;

	(void)fi;
	attr(floor_of(req), ino, &st);
	fuse_reply_attr(req, &st, floor_of(req)->fs.opts.timeout);
}

static void fl_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct floor *f = floor_of(req);

	if (f->fs.no_open) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	fi->noflush = (fi->flags & O_ACCMODE) == O_RDONLY;
	if (f->writable && ino != FUSE_ROOT_ID && ino != FLOOR_DIR)
		fi->direct_io = 1;
	else
		fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

static void fl_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct floor *f = floor_of(req);
	uint64_t len = ino >= FLOOR_NEW ? 0 : f->size;

	(void)fi;
	if ((uint64_t)off >= len)
		size = 0;
	else if (size > len - (uint64_t)off)
		size = (size_t)(len - (uint64_t)off);
	fuse_reply_buf(req, zeros, size < sizeof zeros ? size : sizeof zeros);
}

static void fl_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	if (floor_of(req)->fs.no_open) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	fi->keep_cache = 1;
	fi->cache_readdir = 1;
	fuse_reply_open(req, fi);
}

static void listing(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
	struct floor *f = floor_of(req);
	char *buf = malloc(size), name[64];
	size_t used = 0;
	uint64_t pos = (uint64_t)off;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* the root holds the field directory, which holds the records */
	pthread_mutex_lock(&f->lock);
	for (uint64_t n = ino == FUSE_ROOT_ID ? !f->dir_gone : f->records; pos < n; pos++) {
		struct fuse_entry_param e = {.entry_timeout = f->fs.opts.timeout,
					     .attr_timeout = f->fs.opts.timeout};
		size_t k;
		if (ino != FUSE_ROOT_ID && gone(f, pos))
			continue;
		e.ino = ino == FUSE_ROOT_ID ? FLOOR_DIR : FLOOR_REC + pos;
		if (ino == FUSE_ROOT_ID)
			snprintf(name, sizeof name, "%s", f->field);
		else
			snprintf(name, sizeof name, "%llu%s%s", (unsigned long long)pos,
				 *f->ext ? "." : "", f->ext);
		attr(f, e.ino, &e.attr);
		k = plus ? fuse_add_direntry_plus(req, buf + used, size - used, name, &e,
						  (off_t)pos + 1)
			 : fuse_add_direntry(req, buf + used, size - used, name, &e.attr,
					     (off_t)pos + 1);
		if (k > size - used)
			break;
		used += k;
	}
	pthread_mutex_unlock(&f->lock);
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void fl_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)fi;
	listing(req, ino, size, off, false);
}

static void fl_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	(void)fi;
	listing(req, ino, size, off, true);
}

static void fl_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct floor *f = floor_of(req);
	size_t len = strlen(name);
	struct name *n;

	(void)mode;
	if (parent != FLOOR_DIR || !(n = malloc(sizeof *n + len + 1))) {
		fuse_reply_err(req, parent != FLOOR_DIR ? EPERM : ENOMEM);
		return;
	}
	memcpy(n->s, name, len + 1);
	pthread_mutex_lock(&f->lock);
	n->ino = FLOOR_NEW + f->made++;
	zrfs_table_add(&f->names, &n->link, zrfs_hash(name, len, 0));
	pthread_mutex_unlock(&f->lock);
	struct fuse_entry_param e = {.ino = n->ino, .attr_timeout = f->fs.opts.timeout};
	attr(f, n->ino, &e.attr);
	fi->direct_io = 1;
	fuse_reply_create(req, &e, fi);
}

static void fl_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	(void)ino, (void)buf, (void)off, (void)fi;
	fuse_reply_write(req, size);
}

static void fl_ok(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino, (void)fi;
	fuse_reply_err(req, 0);
}

static void fl_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)datasync;
	fl_ok(req, ino, fi);
}

static void fl_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *in, int to_set,
		       struct fuse_file_info *fi)
{
	struct stat st;

	(void)in, (void)to_set, (void)fi;
	attr(floor_of(req), ino, &st);
	fuse_reply_attr(req, &st, 0);
}

static void fl_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct floor *f = floor_of(req);
	struct name *n;

	fuse_ino_t rec = parent == FLOOR_DIR ? record(f, name) : 0;
	int err = 0;

	pthread_mutex_lock(&f->lock);
	if ((n = new_find(f, name)) != NULL) {
		zrfs_table_del(&f->names, &n->link);
	} else if (rec && !gone(f, rec - FLOOR_REC)) {
		uint64_t i = rec - FLOOR_REC;
		f->gone[i / 64] |= UINT64_C(1) << (i % 64);
		f->ngone++;
	} else {
		err = ENOENT;
	}
	pthread_mutex_unlock(&f->lock);
	free(n);
	fuse_reply_err(req, err);
}

static void fl_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct floor *f = floor_of(req);
	int err = 0;

	pthread_mutex_lock(&f->lock);
	if (parent != FUSE_ROOT_ID || strcmp(name, f->field) != 0 || f->dir_gone)
		err = ENOENT;
	else if (f->ngone < f->records || f->names.n)
		err = ENOTEMPTY;
	else
		f->dir_gone = true;
	pthread_mutex_unlock(&f->lock);
	fuse_reply_err(req, err);
}

static void fl_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned flags)
{
	struct floor *f = floor_of(req);
	size_t len = strlen(newname);
	struct name *n, *m, *old = NULL;

	(void)parent, (void)newparent, (void)flags;
	pthread_mutex_lock(&f->lock);
	if ((n = new_find(f, name)) != NULL && (m = malloc(sizeof *m + len + 1)) != NULL) {
		if ((old = new_find(f, newname)) != NULL)
			zrfs_table_del(&f->names, &old->link);
		zrfs_table_del(&f->names, &n->link);
		m->ino = n->ino;
		memcpy(m->s, newname, len + 1);
		zrfs_table_add(&f->names, &m->link, zrfs_hash(newname, len, 0));
		free(n);
	}
	pthread_mutex_unlock(&f->lock);
	free(old);
	fuse_reply_err(req, 0);
}

static void fl_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	(void)ino, (void)nlookup;
	fuse_reply_none(req);
}

static void fl_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	(void)count, (void)forgets;
	fuse_reply_none(req);
}

static const struct fuse_lowlevel_ops floor_ops = {
	.init = fl_init, .lookup = fl_lookup, .forget = fl_forget,
	.forget_multi = fl_forget_multi, .getattr = fl_getattr, .open = fl_open,
	.read = fl_read, .opendir = fl_opendir, .readdir = fl_readdir,
	.readdirplus = fl_readdirplus,
};

static const struct fuse_lowlevel_ops floor_rw_ops = {
	.init = fl_init, .lookup = fl_lookup, .forget = fl_forget,
	.forget_multi = fl_forget_multi, .getattr = fl_getattr, .open = fl_open,
	.read = fl_read, .opendir = fl_opendir, .readdir = fl_readdir,
	.readdirplus = fl_readdirplus, .create = fl_create, .write = fl_write, .flush = fl_ok, .release = fl_ok,
	.fsync = fl_fsync, .fsyncdir = fl_fsync, .setattr = fl_setattr, .unlink = fl_unlink,
	.rmdir = fl_rmdir, .rename = fl_rename,
};

/* ---- the command ---- */

struct cli {
	char *records, *size, *field, *ext, *poll_us;
	int writable, uring;
};

static const struct fuse_opt floor_cli_spec[] = {
	{"records=%s", offsetof(struct cli, records), 0},
	{"size=%s", offsetof(struct cli, size), 0},
	{"field=%s", offsetof(struct cli, field), 0},
	{"ext=%s", offsetof(struct cli, ext), 0},
	{"poll_us=%s", offsetof(struct cli, poll_us), 0},
	{"writable", offsetof(struct cli, writable), 1},
	{"uring", offsetof(struct cli, uring), 1},
	FUSE_OPT_END,
};

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts opts = {0};
	struct fuse_loop_config *cfg = NULL;
	struct cli cli = {0};
	struct floor f = {.fs = {.opts = {.timeout = 31536000, .poll_us = ZRFS_POLL_DEFAULT,
					  .uring_threads = 2}},
			  .records = 100000, .size = 8192};
	int rc = 1;

	if (fuse_opt_parse(&args, &cli, floor_cli_spec, NULL) < 0 ||
	    fuse_opt_add_arg(&args, "-osubtype=zrfs-floor,fsname=floor") < 0 ||
	    fuse_parse_cmdline(&args, &opts) < 0 || !opts.mountpoint) {
		fprintf(stderr, "usage: zrfs-floor MOUNTPOINT [-f] [-s] [-o records=N,size=B,"
				"field=F,ext=E,writable,uring,poll_us=US,max_threads=N]\n");
		return 2;
	}
	if (cli.records)
		f.records = strtoull(cli.records, NULL, 10);
	if (cli.size)
		f.size = strtoull(cli.size, NULL, 10);
	if (cli.poll_us)
		f.fs.opts.poll_us = (unsigned)strtoul(cli.poll_us, NULL, 10);
	f.field = cli.field ? cli.field : "data";
	f.ext = cli.ext ? cli.ext : "bin";
	f.writable = cli.writable;
	f.fs.opts.uring = cli.uring;
	f.fs.uid = getuid();
	f.fs.gid = getgid();
	pthread_mutex_init(&f.lock, NULL);
	if (f.writable && !(f.gone = calloc(f.records / 64 + 1, sizeof *f.gone))) {
		fprintf(stderr, "zrfs-floor: out of memory\n");
		return 1;
	}
	f.fs.se = fuse_session_new(&args, f.writable ? &floor_rw_ops : &floor_ops, sizeof floor_ops,
				   &f);
	if (!f.fs.se || fuse_set_signal_handlers(f.fs.se) < 0 ||
	    fuse_session_mount(f.fs.se, opts.mountpoint) < 0)
		goto out;
	if (zrfs_transport_start(&f.fs, f.fs.se) < 0)
		fprintf(stderr, "zrfs-floor: cannot set up the transport asked for\n");
	fuse_daemonize(opts.foreground);
	if (opts.singlethread) {
		rc = fuse_session_loop(f.fs.se) < 0;
	} else {
		cfg = fuse_loop_cfg_create();
		fuse_loop_cfg_set_clone_fd(cfg, (unsigned)opts.clone_fd);
		fuse_loop_cfg_set_max_threads(cfg, opts.max_threads);
		rc = fuse_session_loop_mt(f.fs.se, cfg) < 0;
	}
	zrfs_transport_stop(&f.fs);
	fuse_session_unmount(f.fs.se);
	fuse_remove_signal_handlers(f.fs.se);
out:
	fuse_loop_cfg_destroy(cfg);
	if (f.fs.se)
		fuse_session_destroy(f.fs.se);
	zrfs_transport_destroy(&f.fs);
	fuse_opt_free_args(&args);
	free(opts.mountpoint);
	free(f.gone);
	return rc;
}
