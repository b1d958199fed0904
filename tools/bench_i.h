/*
 * bench_i.h - what the benchmarks of 'zr bench' share (bench_common.c):
 * seeded numbers, medians, options, and for the benchmarks that make a
 * dataset, the scratch environment they work in. One file per benchmark:
 * bench_store.c, bench_sampler.c, bench_fs.c, bench_batches.c,
 * bench_import.c, bench_follow.c; bench.c chooses one.
 */
#ifndef ZR_BENCH_I_H
#define ZR_BENCH_I_H

#include "zr_i.h"

#include <sys/types.h>

/* The benchmarks, each with its own --help. */
int bench_store(int argc, char **argv);
int bench_sampler(int argc, char **argv);
int bench_fs(int argc, char **argv);
int bench_batches(int argc, char **argv);
int bench_import(int argc, char **argv);
int bench_follow(int argc, char **argv);

/* SplitMix64 stream, Fisher-Yates shuffle, median (sorts @v). */
uint64_t bench_splitmix(uint64_t *s);
void bench_shuffle(uint64_t *ids, uint64_t n, uint64_t seed);
double bench_median(double *v, uint64_t n);

/* Options shared by the benchmarks that make a dataset. */
#define BENCH_THREADS_MAX 16 /* thread counts in one --threads list */
struct bench_args {
	uint64_t records, size, runs;
	const char *dir, *zrfs;
	uint64_t records_min;
	bool takes_zrfs;      /* --zrfs PATH and --uring are options */
	bool uring;           /* --uring: zrfs measured with -o uring too */
	bool takes_threads;   /* --threads LIST is an option */
	unsigned threads[BENCH_THREADS_MAX], nthreads; /* --threads 1,2,4 */
};
/* Parse --records, --size, --runs, --dir (and --zrfs, --uring, --threads):
 * 0, 1 (help printed), or -1 (usage error, reported). */
int bench_args_parse(int argc, char **argv, const char *help, struct bench_args *a);

/* Where a dataset benchmark works: DIR/zr-bench-NAME-XXXXXX holding the
 * dataset, the same records as a native tree, a squashfs image of it, a
 * flat file, and two mount points. */
struct bench_env {
	uint64_t records, size, runs;
	const char *dir, *zrfs;
	char base[PATH_MAX - 64];
	char ds[PATH_MAX], tree[PATH_MAX], img[PATH_MAX], flat[PATH_MAX];
	char zmnt[PATH_MAX], smnt[PATH_MAX];
	pid_t zpid;           /* the zrfs daemon, in the foreground, 0 if none */
	double zcpu;          /* CPU seconds (user and system) the last one used */
	double zsys;          /* ... of them in the kernel (system) */
	double zwaits;        /* ... and the times its threads waited (voluntary
			       * context switches: for a request, a lock, I/O) */
	bool uring;           /* measure zrfs with -o uring as well (--uring) */
	const char *zopts;    /* -o of the next zrfs mount; NULL: none */
	unsigned threads[BENCH_THREADS_MAX], nthreads; /* reader threads to measure with */
};

/* Parse the options into @c (which holds the defaults), make the scratch
 * directory and name the inputs and, for the benchmarks that mount
 * (@takes_zrfs), the mount points in it. false with *status set when the
 * caller must return (after --help, a usage error or a failure). */
bool bench_start(struct bench_env *c, int argc, char **argv, const char *usage, const char *name,
		 uint64_t records_min, bool takes_zrfs, int *status);
/* Unmount what is mounted in the scratch directory and remove it (an
 * interrupted benchmark does the same from its signal handler). */
void bench_finish(struct bench_env *c);
/* For a benchmark with a scratch directory of its own: from bench_guard on,
 * SIGINT, SIGTERM or SIGHUP remove @base (unmounting its zmnt and smnt
 * first) before the signal ends the process; bench_remove removes it. */
void bench_guard(const char *base);
void bench_remove(const char *base);
/* The zrfs next to this zr (a build tree, or installed side by side), else
 * "zrfs" from PATH; @buf holds the path. */
void bench_find_zrfs(struct bench_env *c, char buf[PATH_MAX]);
/* The dataset (field "data", and with @flate a compressible flate field
 * "z" of the same size), the native tree of "data", and with @squash the
 * squashfs image of the tree. 0 or -1 (reported). */
int bench_make_inputs(struct bench_env *c, bool flate, bool squash);

/* Write what is dirty, then drop the kernel's page, dentry and inode
 * caches (root only): 0, or -1. */
int bench_drop_caches(void);
/* Run a program to its end with its output (and with @quiet, its errors)
 * discarded: its exit status, or -1. */
int bench_run_quiet(char *const argv[], bool quiet);
int bench_run(char *const argv[]);
/* Mount the dataset with zrfs in the foreground as our child; unmount it
 * and wait for the daemon to exit (c->zcpu, c->zsys, c->zwaits: the CPU time
 * it used, of it in the kernel, the times it waited); unmount
 * any mount point, if mounted. */
int bench_mount_zrfs(struct bench_env *c);
/* The same for another FUSE daemon, mounting c->zmnt: @argv its command
 * line, kept in the foreground (bench_unmount_zrfs unmounts it too). */
int bench_mount_child(struct bench_env *c, char *const argv[]);
void bench_unmount_zrfs(struct bench_env *c);
void bench_unmount(char *mnt);

#endif
