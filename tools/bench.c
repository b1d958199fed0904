/*
 * bench.c - zr bench: reproducible benchmarks with their baselines.
 *
 * Every figure is printed next to a baseline measured in the same run, as a
 * ratio, and each is the median of --runs repetitions (the machines these
 * run on are small and noisy). Data is generated from a fixed seed. Each
 * benchmark is a file of its own (bench_i.h lists them); this one chooses.
 */
#include "bench_i.h"

#include <string.h>

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
} benches[] = {
	{"store", bench_store, "append and gather, against a flat file and a pread loop"},
	{"sampler", bench_sampler, "sampler ids/s and memory, against Fisher-Yates"},
	{"fs", bench_fs, "record files through zrfs, against native files and squashfuse"},
	{"batches", bench_batches, "batch files through zrfs, against gather and native files"},
	{"import", bench_import, "zr import dir, against tar cf and mksquashfs"},
	{"follow", bench_follow, "a mount following commits: latency and daemon CPU per commit"},
};

static void usage(FILE *out)
{
	fputs("usage: zr bench BENCHMARK [OPTIONS...]\n"
	      "\n"
	      "Run a benchmark against its baselines in the same run and print medians\n"
	      "and ratios (each ratio is the median of the per-run ratios; see\n"
	      "BENCHMARKS.md). 'zr bench BENCHMARK --help' describes its options.\n"
	      "\n"
	      "Benchmarks:\n",
	      out);
	for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
		fprintf(out, "  %-8s %s\n", benches[i].name, benches[i].summary);
}

int cmd_bench(int argc, char **argv)
{
	if (argc < 2 || is_help(argv[1])) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_USAGE : 0;
	}
	for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
		if (strcmp(argv[1], benches[i].name) == 0)
			return benches[i].run(argc - 1, argv + 1);
	zr_warn("bench: unknown benchmark '%s' (see 'zr bench --help')", argv[1]);
	return EXIT_USAGE;
}
