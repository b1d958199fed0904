/*
 * maintain.c - zr verify and zr rebalance: checking and compacting.
 */
#include "zr_i.h"

#include <string.h>

static const char verify_help[] =
	"usage: zr verify DIR [--quiet]\n"
	"\n"
	"Check every record of every field against its chunk and inflate every\n"
	"compressed record. Prints each problem as 'FIELD ID: reason'.\n"
	"Exit status: 0 clean, 1 problems found or the dataset cannot be opened.\n"
	"  --quiet   print only the summary line\n";

static const char rebalance_help[] =
	"usage: zr rebalance DIR [--chunk-size N]\n"
	"\n"
	"Rewrite the live records into fresh chunks, in chunk-offset order, then\n"
	"switch to them atomically and delete the old chunks: reclaims the space\n"
	"left by modified and deleted records. Prints the utilisation before and\n"
	"after. An interrupted rebalance leaves the old dataset intact (or, past\n"
	"its commit point, the new one). Needs exclusive access to DIR.\n"
	"  --chunk-size N   records per chunk of the result (default: keep)\n";

struct vctx {
	bool quiet;
};

static void on_problem(void *ctx, const char *field, uint64_t id, const char *reason)
{
	struct vctx *v = ctx;

	if (v->quiet)
		return;
	if (field)
		printf("field %s, record %llu: %s\n", field, (unsigned long long)id, reason);
	else
		printf("%s\n", reason);
}

int cmd_verify(int argc, char **argv)
{
	struct vctx v = {false};
	const char *dir = NULL;
	zr_dataset *ds;
	int64_t n;
	int rc;

	static const struct option opts[] = {{"quiet", no_argument, 0, 'q'}, ZR_OPT_HELP,
					     ZR_OPT_END};

	while ((rc = zr_getopt(argc, argv, "hq", opts, "verify")) != -1)
		if (rc == 'q')
			v.quiet = true;
		else
			return rc == 'h' ? (fputs(verify_help, stdout), 0) : EXIT_USAGE;
	if (!zr_operands(argc, "verify", 1, 1, "DIR"))
		return EXIT_USAGE;
	dir = argv[optind];
	rc = zr_open(&ds, dir, ZR_RDONLY);
	if (rc < 0)
		return zr_fail(rc, "verify");
	n = zr_verify(ds, on_problem, &v);
	if (n < 0) {
		zr_close(ds);
		return zr_fail((int)n, "verify");
	}
	printf("%s: %llu records, %lld problem%s\n", dir, (unsigned long long)zr_length(ds),
	       (long long)n, n == 1 ? "" : "s");
	zr_close(ds);
	return n == 0 ? 0 : 1;
}

int cmd_rebalance(int argc, char **argv)
{
	const char *dir = NULL;
	uint64_t chunk_size = 0;
	zr_rebalance_report r;
	zr_dataset *ds;
	int rc;

	static const struct option opts[] = {{"chunk-size", required_argument, 0, 'c'},
					     ZR_OPT_HELP, ZR_OPT_END};

	while ((rc = zr_getopt(argc, argv, "h", opts, "rebalance")) != -1)
		if (rc != 'c')
			return rc == 'h' ? (fputs(rebalance_help, stdout), 0) : EXIT_USAGE;
		else if (parse_u64(optarg, 1, UINT32_MAX, "--chunk-size", &chunk_size) < 0)
			return EXIT_USAGE;
	if (!zr_operands(argc, "rebalance", 1, 1, "DIR"))
		return EXIT_USAGE;
	dir = argv[optind];
	rc = zr_open(&ds, dir, ZR_RDWR);
	if (rc < 0)
		return zr_fail(rc, "rebalance");
	rc = zr_rebalance(ds, (uint32_t)chunk_size, &r);
	zr_close(ds);
	if (rc < 0)
		return zr_fail(rc, "rebalance");
	printf("utilisation  %.1f%% -> %.1f%%\n", r.utilisation_before * 100,
	       r.utilisation_after * 100);
	printf("chunks       %u (%llu bytes) -> %u (%llu bytes)\n", r.chunks_before,
	       (unsigned long long)r.chunk_bytes_before, r.chunks_after,
	       (unsigned long long)r.chunk_bytes_after);
	return 0;
}
