/*
 * bench_sampler.c - zr bench sampler: ids per second and memory of the
 * shuffle and block orders, against a Fisher-Yates shuffle of an id array.
 *
 * Each case runs in a child process, so its peak resident set (from wait4)
 * is its own. A case produces every id of one epoch (batches of 1024) and
 * folds them into a checksum so nothing is optimised away; Fisher-Yates
 * fills an array of N ids and shuffles it, the textbook baseline whose
 * memory grows with N. Single-threaded throughout: rates are per core.
 */
#include "bench_i.h"
#include "zrsampler.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static const char help[] =
	"usage: zr bench sampler [--runs R] [--max N]\n"
	"\n"
	"Ids per second and peak memory for one epoch of 'shuffle' and 'block'\n"
	"(batch 1024) against a Fisher-Yates shuffle of an array of N ids, for\n"
	"N = 10^6 and 10^8, and 10^9 for the sampler alone. Medians of R runs\n"
	"(default 5); each case runs in its own process.\n"
	"  --max N   largest N to run (default 1000000000)\n";

enum kind { FISHER_YATES, SHUFFLE, BLOCK };

/* One epoch of @kind over @n ids; returns a checksum. */
static uint64_t run_case(enum kind kind, uint64_t n)
{
	uint64_t sum = 0;

	if (kind == FISHER_YATES) {
		uint64_t *ids = malloc(n * sizeof *ids);
		if (!ids)
			_exit(3);
		for (uint64_t i = 0; i < n; i++)
			ids[i] = i;
		bench_shuffle(ids, n, 1);
		for (uint64_t i = 0; i < n; i++)
			sum = sum * 31 + ids[i];
		free(ids);
		return sum;
	}
	zs_spec spec;
	zs_sampler *s;
	uint64_t ids[1024];
	if (zs_spec_parse(kind == SHUFFLE ? "shuffle,seed=1,batch=1024,tail=keep"
					  : "block,seed=1,batch=1024,tail=keep",
			  &spec) < 0 ||
	    zs_sampler_create(&s, &spec, n) < 0)
		_exit(4);
	for (uint64_t k = 0; k < zs_steps(s); k++) {
		int64_t m = zs_batch(s, 0, k, ids);
		for (int64_t i = 0; i < m; i++)
			sum = sum * 31 + ids[i];
	}
	zs_sampler_destroy(s);
	return sum;
}

/* Run a case in a child; its seconds and peak RSS (KiB). */
static int measure(enum kind kind, uint64_t n, double *secs, long *rss_kib)
{
	int p[2];
	pid_t pid;
	struct rusage ru;
	int status;

	if (pipe(p) < 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		close(p[0]);
		double t = now_sec();
		volatile uint64_t sum = run_case(kind, n);
		(void)sum;
		t = now_sec() - t;
		_exit(write(p[1], &t, sizeof t) == sizeof t ? 0 : 5);
	}
	close(p[1]);
	ssize_t got = read(p[0], secs, sizeof *secs);
	close(p[0]);
	if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0 || got != sizeof *secs) {
		zr_warn("bench: case failed (status %d)", status);
		return -1;
	}
	*rss_kib = ru.ru_maxrss;
	return 0;
}

int bench_sampler(int argc, char **argv)
{
	uint64_t runs = 5, max = 1000000000;
	static const char *const names[] = {"Fisher-Yates array", "shuffle (zs)", "block (zs)"};

	static const struct option opts[] = {{"runs", required_argument, 0, 'n'},
					     {"max", required_argument, 0, 'm'},
					     ZR_OPT_HELP, ZR_OPT_END};
	int c;

	while ((c = zr_getopt(argc, argv, "h", opts, "bench")) != -1)
		if (c == 'n' ? parse_u64(optarg, 1, 100, "--runs", &runs) < 0
		    : c == 'm' ? parse_u64(optarg, 1, UINT64_C(1) << 40, "--max", &max) < 0
			       : true)
			return c == 'h' ? (fputs(help, stdout), 0) : EXIT_USAGE;
	if (!zr_operands(argc, "bench", 0, 0, "no operands"))
		return EXIT_USAGE;
	printf("zr bench sampler: one epoch per case, batch 1024, %llu runs, medians\n\n",
	       (unsigned long long)runs);
	printf("%-20s %12s %14s %12s   %s\n", "order", "N", "Mids/s", "peak RSS", "ratio");
	static const uint64_t ns[] = {1000000, 100000000, 1000000000};
	for (size_t k = 0; k < 3 && ns[k] <= max; k++) {
		double t[3][100], ratio[2][100];
		long rss[3] = {0};
		int kinds = ns[k] >= 1000000000 ? 1 : 0; /* no 8 GB baseline array */
		for (uint64_t r = 0; r < runs; r++)
			for (int kd = kinds; kd < 3; kd++) {
				long m;
				if (measure((enum kind)kd, ns[k], &t[kd][r], &m) < 0)
					return 1;
				if (m > rss[kd])
					rss[kd] = m;
			}
		for (uint64_t r = 0; r < runs && kinds == 0; r++)
			for (int kd = 1; kd < 3; kd++)
				ratio[kd - 1][r] = t[0][r] / t[kd][r];
		for (int kd = kinds; kd < 3; kd++) {
			double rate = (double)ns[k] / bench_median(t[kd], runs) / 1e6;
			printf("%-20s %12llu %14.1f %9.1f MB", names[kd], (unsigned long long)ns[k],
			       rate, rss[kd] / 1024.0);
			if (kd > 0 && kinds == 0)
				printf("   %.2fx Fisher-Yates", bench_median(ratio[kd - 1], runs));
			putchar('\n');
		}
	}
	return 0;
}
