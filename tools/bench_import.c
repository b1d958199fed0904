/*
 * bench_import.c - zr bench import: 'zr import dir' of a tree of files with
 * 1, 2 and 4 writers, against 'tar cf' and 'mksquashfs' of the same tree.
 */
#include "bench_i.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
	rc = bench_run_quiet(argv, true);

	*secs = now_sec() - t0;
	if (rc != 0)
		zr_warn("bench: %s failed (exit %d)", argv[0], rc);
	return rc == 0 ? 0 : -1;
}

int bench_import(int argc, char **argv)
{
	struct bench_env c = {.records = 50000, .size = 8192, .runs = 3, .dir = "/var/tmp"};
	char self[PATH_MAX], dest[PATH_MAX + 16], tarf[PATH_MAX + 16];
	double v[5][100];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	int rc = 0;

	if (n <= 0)
		return 1;
	self[n] = 0;
	if (!bench_start(&c, argc, argv, help_import, "import", 1, false, &rc))
		return rc;
	snprintf(dest, sizeof dest, "%s/imported", c.base);
	snprintf(tarf, sizeof tarf, "%s/tree.tar", c.base);
	printf("zr bench import: %llu files x %llu B, %llu runs\n", (unsigned long long)c.records,
	       (unsigned long long)c.size, (unsigned long long)c.runs);
	fflush(stdout);
	rc = bench_make_inputs(&c, false, false) < 0 ? 1 : 0;
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
			rm_tree(dest);
			rc = time_cmd(imp, &v[k][r]);
		}
		rm_tree(dest);
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
	bench_finish(&c);
	return rc ? 1 : 0;
}
