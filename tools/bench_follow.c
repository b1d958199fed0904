/*
 * bench_follow.c - zr bench follow: how fast a mount follows commits, and
 * what following costs its daemon, as the dataset grows.
 *
 * For each dataset size N (default 100,000, 1,000,000 and 10,000,000
 * records of one raw i64 field, "lab"): mount it with zrfs in the
 * foreground, then R times (--runs) modify K random records (K = 1, 100,
 * 10,000; 10,000 runs at most 5 times) with new values and commit in this
 * process, and time from the zr_commit() call until the last record
 * modified reads its new value through the mount (by name, as a program
 * would: the kernel's cached name points at the old inode until the
 * daemon tells it otherwise). The daemon's CPU time is summed over all its
 * threads from /proc/PID/task/TID/schedstat (nanoseconds) around each
 * commit. Reported: median and p99 latency, the commit's own duration,
 * and daemon CPU per commit, with each size's ratio to the smallest: a
 * mount that follows in time proportional to the change shows ratios near
 * 1 whatever N is.
 */
#include "bench_i.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char help[] =
	"usage: zr bench follow [--records N] [--runs R] [--dir DIR] [--zrfs PATH]\n"
	"\n"
	"Commit-to-visible latency through a zrfs mount (median, p99) and the\n"
	"daemon's CPU time per commit, for commits of 1, 100 and 10,000 changed\n"
	"records, on datasets of 100,000, 1,000,000 and 10,000,000 records (or\n"
	"only N with --records), with each size's ratio to the smallest. R commits\n"
	"per case (default 20; at most 5 of 10,000 records). Needs root (or FUSE\n"
	"access).\n";

#define KINDS 3
static const uint64_t changes[KINDS] = {1, 100, 10000};

/* CPU time of every thread of @pid, in nanoseconds. */
static uint64_t cpu_ns(pid_t pid)
{
	char path[64];
	uint64_t sum = 0;
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	if (!(d = opendir(path)))
		return 0;
	while ((de = readdir(d))) {
		char p[320];
		unsigned long long ns;
		FILE *f;
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof p, "/proc/%d/task/%s/schedstat", (int)pid, de->d_name);
		if ((f = fopen(p, "r")) && fscanf(f, "%llu", &ns) == 1)
			sum += ns;
		if (f)
			fclose(f);
	}
	closedir(d);
	return sum;
}

/* The dataset of @n records of one raw i64 field, record i holding i. */
static int make_dataset(const char *dir, uint64_t n)
{
	zr_field_spec f = {.name = "lab", .dtype = ZR_I64, .compress = ZR_RAW, .fixed = 1};
	enum { STEP = 65536 };
	zr_value *v = malloc(STEP * sizeof *v);
	int64_t *vals = malloc(STEP * sizeof *vals);
	zr_dataset *ds = NULL;
	int rc = v && vals ? zr_create(dir, &f, 1, NULL) : -ENOMEM;

	if (rc == 0)
		rc = zr_open(&ds, dir, ZR_RDWR);
	for (uint64_t at = 0; rc == 0 && at < n; at += STEP) {
		size_t k = n - at < STEP ? (size_t)(n - at) : STEP;
		for (size_t i = 0; i < k; i++) {
			vals[i] = (int64_t)(at + i);
			v[i] = (zr_value){&vals[i], 8};
		}
		rc = zr_append_many(ds, v, k, NULL);
	}
	if (rc == 0)
		rc = zr_commit(ds);
	zr_close(ds);
	free(v);
	free(vals);
	return rc < 0 ? zr_fail(rc, "bench: making the dataset") : 0;
}

/* Whether the mount shows @want as record @id (read by name, fresh). */
static bool shows(const char *mnt, uint64_t id, int64_t want)
{
	char path[4200];
	int64_t got = 0;
	int fd;

	snprintf(path, sizeof path, "%s/lab/%llu", mnt, (unsigned long long)id);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	bool yes = read(fd, &got, 8) == 8 && got == want;
	close(fd);
	return yes;
}

struct result {
	double latency[100], commit[100], cpu[100];
	int runs;
};

/* R commits of @k changed records each on the mounted dataset. */
static int follow_case(struct bench_env *c, uint64_t n, uint64_t k, int runs, uint64_t *stamp,
		       struct result *out)
{
	zr_dataset *ds;
	uint64_t rng = n * 31 + k;
	int rc = zr_open(&ds, c->ds, ZR_RDWR);

	if (rc < 0)
		return zr_fail(rc, "bench");
	out->runs = runs;
	for (int r = 0; r < runs && rc == 0; r++) {
		uint64_t id = 0, cpu0 = cpu_ns(c->zpid);
		int64_t val = (int64_t)(n + ++*stamp);
		for (uint64_t i = 0; i < k && rc == 0; i++) {
			id = bench_splitmix(&rng) % n;
			rc = zr_modify(ds, 0, id, (zr_value){&val, 8});
		}
		double t0 = now_sec();
		if (rc == 0)
			rc = zr_commit(ds);
		double t1 = now_sec();
		if (rc < 0)
			break;
		/* until the mount shows it: polled every 50 us, which the daemon's
		 * work is not slowed by (the poll reads the kernel's caches) */
		while (!shows(c->zmnt, id, val)) {
			if (now_sec() - t0 > 30) {
				zr_warn("bench: record %llu not visible 30 s after its commit",
					(unsigned long long)id);
				rc = -ETIMEDOUT;
				break;
			}
			nanosleep(&(struct timespec){0, 50000}, NULL);
		}
		out->latency[r] = now_sec() - t0;
		out->commit[r] = t1 - t0;
		out->cpu[r] = (double)(cpu_ns(c->zpid) - cpu0) / 1e9;
	}
	zr_close(ds);
	return rc < 0 ? -1 : 0;
}

static double p99(double *v, int n)
{
	bench_median(v, (uint64_t)n); /* sorts */
	return v[(n * 99 + 99) / 100 - 1];
}

int bench_follow(int argc, char **argv)
{
	struct bench_env c = {.records = 0, .size = 8, .runs = 20, .dir = "/var/tmp"};
	uint64_t sizes[3] = {100000, 1000000, 10000000}, stamp = 0;
	char zrfs_path[PATH_MAX];
	static struct result res[3][KINDS];
	int nsizes = 3, rc = 0;

	bench_find_zrfs(&c, zrfs_path);
	if (!bench_start(&c, argc, argv, help, "follow", 1, true, &rc))
		return rc;
	if (c.records) {
		sizes[0] = c.records;
		nsizes = 1;
	}
	printf("zr bench follow: %llu commits per case, zrfs %s, scratch %s\n",
	       (unsigned long long)c.runs, c.zrfs, c.base);
	for (int s = 0; s < nsizes && rc == 0; s++) {
		rm_tree(c.ds);
		if (make_dataset(c.ds, sizes[s]) < 0 || bench_mount_zrfs(&c) < 0) {
			rc = 1;
			break;
		}
		for (int k = 0; k < KINDS && rc == 0; k++) {
			int runs = (int)c.runs < 100 ? (int)c.runs : 100;
			if (changes[k] >= 10000 && runs > 5)
				runs = 5;
			rc = follow_case(&c, sizes[s], changes[k], runs, &stamp, &res[s][k]) < 0;
			if (rc == 0) {
				struct result *x = &res[s][k];
				double lat = bench_median(x->latency, (uint64_t)x->runs);
				printf("  %llu records, %llu changed: median %.2f ms to visible, "
				       "commit %.2f ms, daemon CPU %.3f ms\n",
				       (unsigned long long)sizes[s], (unsigned long long)changes[k],
				       lat * 1e3, bench_median(x->commit, (uint64_t)x->runs) * 1e3,
				       bench_median(x->cpu, (uint64_t)x->runs) * 1e3);
				fflush(stdout);
			}
		}
		bench_unmount_zrfs(&c);
	}
	if (rc == 0) {
		printf("\n%-12s %-8s %12s %10s %12s %14s %9s %9s\n", "records", "changed",
		       "visible ms", "p99 ms", "commit ms", "daemon CPU ms", "x lat", "x CPU");
		for (int s = 0; s < nsizes; s++)
			for (int k = 0; k < KINDS; k++) {
				struct result *x = &res[s][k], *b = &res[0][k];
				double lat = bench_median(x->latency, (uint64_t)x->runs);
				double cpu = bench_median(x->cpu, (uint64_t)x->runs);
				double lat0 = bench_median(b->latency, (uint64_t)b->runs);
				double cpu0 = bench_median(b->cpu, (uint64_t)b->runs);
				printf("%-12llu %-8llu %12.2f %10.2f %12.2f %14.3f %8.2fx %8.2fx\n",
				       (unsigned long long)sizes[s], (unsigned long long)changes[k],
				       lat * 1e3, p99(x->latency, x->runs) * 1e3,
				       bench_median(x->commit, (uint64_t)x->runs) * 1e3, cpu * 1e3,
				       lat / lat0, cpu0 > 0 ? cpu / cpu0 : 0);
			}
		printf("(x lat, x CPU: against the same commit on %llu records)\n",
		       (unsigned long long)sizes[0]);
	}
	bench_finish(&c);
	return rc;
}
