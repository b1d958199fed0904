/*
 * maintain.c - zr verify and zr rebalance: checking and compacting.
 */
#include "zr_i.h"

#include <string.h>

static const char verify_help[] =
	"usage: zr verify DIR [-q | --quiet | --json] [--repair]\n"
	"\n"
	"Check every record of every field against its chunk and inflate every\n"
	"compressed record. Prints each problem as 'FIELD ID: reason'. Reads the\n"
	"last committed state: what a writer is appending meanwhile is not looked\n"
	"at. A progress line (values/s, ETA) is shown on a terminal.\n"
	"Exit status: 0 clean (or made clean by --repair), 1 problems found or the\n"
	"dataset cannot be opened.\n"
	"  -q, --quiet   print only the summary line\n"
	"  --repair      then remove every record with a problem, highest id first\n"
	"                (the last record takes a removed one's id, as zr rm does),\n"
	"                printing each, and commit; needs exclusive access to DIR\n"
	"  --json        print one JSON object instead: {\"dataset\", \"records\",\n"
	"                \"problems\": [{\"field\", \"id\", \"reason\"}...] (field and id\n"
	"                null for a problem of the whole dataset), \"removed\":\n"
	"                [{\"id\", \"moved\"}...] (--repair: the record that took its\n"
	"                id, or null)}\n";

static const char rebalance_help[] =
	"usage: zr rebalance DIR [--chunk-size N]\n"
	"\n"
	"Rewrite the live records into fresh chunks, in chunk-offset order, then\n"
	"switch to them atomically and delete the old chunks: reclaims the space\n"
	"left by modified and deleted records. Prints the utilisation before and\n"
	"after. An interrupted rebalance leaves the old dataset intact (or, past\n"
	"its commit point, the new one). Needs exclusive access to DIR. A progress\n"
	"line (values/s, ETA) is shown on a terminal. Each value keeps its\n"
	"checksum; a dataset of format 1 gets one for every value and becomes\n"
	"format 2 (zr verify first: a damaged value would get a checksum too).\n"
	"  --chunk-size N   records per chunk of the result (default: keep)\n";

struct vctx {
	bool quiet;
	struct zr_progress *line; /* on a terminal: cleared before a problem */
	json_t *problems;     /* --json: what is found, printed at the end */
	json_t *removed;
	uint64_t *ids;        /* --repair: the records with a problem */
	size_t n, cap;
	bool short_of_memory;
};

static void on_problem(void *ctx, const char *field, uint64_t id, const char *reason)
{
	struct vctx *v = ctx;

	if (v->n == v->cap && !v->short_of_memory) {
		size_t cap = v->cap ? v->cap * 2 : 64;
		uint64_t *p = realloc(v->ids, cap * sizeof *p);
		if (p) {
			v->ids = p;
			v->cap = cap;
		} else {
			v->short_of_memory = true;
		}
	}
	if (field && v->n < v->cap)
		v->ids[v->n++] = id;
	if (v->problems) {
		json_array_append_new(v->problems,
				      json_pack("{s:o,s:o,s:o}", "field",
						field ? zr_json_text(field) : json_null(), "id",
						field ? json_integer((json_int_t)id) : json_null(),
						"reason", zr_json_text(reason)));
		return;
	}
	if (v->quiet)
		return;
	if (v->line && v->line->drawn)
		zr_progress_clear(v->line); /* the problem's line, then the line again */
	if (field)
		printf("field %s, record %llu: %s\n", field, (unsigned long long)id, reason);
	else
		printf("%s\n", reason);
}

static int by_id_down(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? 1 : x > y ? -1 : 0;
}

/* Remove the records of @v->ids from @ds, highest first (the last record,
 * never one to remove by then, takes each one's id), printing each, and
 * commit: the count removed, or a negative code (said; nothing committed). */
static int64_t remove_damaged(zr_dataset *ds, const char *dir, struct vctx *v)
{
	int64_t removed = 0;
	int rc;

	qsort(v->ids, v->n, sizeof *v->ids, by_id_down);
	for (size_t i = 0; i < v->n; i++) {
		uint64_t id = v->ids[i], last = zr_length(ds) - 1;
		if (i > 0 && id == v->ids[i - 1])
			continue; /* a problem in another field of it */
		if ((rc = zr_delete(ds, id)) < 0)
			return zr_fail(rc, "verify --repair") ? -1 : -1;
		removed++;
		if (v->removed)
			json_array_append_new(v->removed,
					      json_pack("{s:I,s:o}", "id", (json_int_t)id, "moved",
							id != last ? json_integer((json_int_t)last)
								   : json_null()));
		else if (id != last)
			printf("removed record %llu: record %llu is now record %llu\n",
			       (unsigned long long)id, (unsigned long long)last,
			       (unsigned long long)id);
		else
			printf("removed record %llu\n", (unsigned long long)id);
	}
	if ((rc = zr_commit(ds)) < 0) {
		fprintf(stderr, "zr verify: %s: nothing removed: %s\n", dir, zr_errmsg(ds));
		return -1;
	}
	return removed;
}

int cmd_verify(int argc, char **argv)
{
	struct vctx v = {0};
	const char *dir = NULL;
	bool repair = false, json = false;
	zr_dataset *ds;
	int64_t n, removed = 0;
	bool said = false; /* a failure, told */
	int rc;

	static const struct option opts[] = {{"quiet", no_argument, 0, 'q'},
					     {"repair", no_argument, 0, 'r'},
					     {"json", no_argument, 0, 'j'}, ZR_OPT_HELP, ZR_OPT_END};

	while ((rc = zr_getopt(argc, argv, "hq", opts, "verify")) != -1)
		if (rc == 'q')
			v.quiet = true;
		else if (rc == 'r' || rc == 'j')
			*(rc == 'r' ? &repair : &json) = true;
		else
			return rc == 'h' ? (fputs(verify_help, stdout), 0) : EXIT_USAGE;
	if (!zr_operands(argc, "verify", 1, 1, "DIR"))
		return EXIT_USAGE;
	dir = argv[optind];
	rc = zr_open_writer(&ds, dir, repair ? ZR_RDWR : ZR_RDONLY, "verify");
	if (rc < 0)
		return zr_fail(rc, "verify");
	if (json && (!(v.problems = json_array()) || !(v.removed = json_array()))) {
		zr_warn("verify: out of memory");
		json_decref(v.problems);
		zr_close(ds);
		return 1;
	}
	struct zr_progress line;
	zr_progress_start(&line, "values");
	v.line = &line;
	zr_progress_set(ds, zr_progress_cb_show, &line);
	n = zr_verify(ds, on_problem, &v);
	zr_progress_set(ds, NULL, NULL);
	if (n > 0 && repair) {
		said = true;
		if (v.short_of_memory)
			fprintf(stderr, "zr verify: out of memory listing the records to remove: "
					"nothing removed\n");
		else if ((removed = remove_damaged(ds, dir, &v)) >= 0)
			said = (n = zr_verify(ds, NULL, NULL)) < 0 && zr_fail((int)n, "verify");
	}
	free(v.ids);
	if (n < 0 || said) {
		if (!said)
			zr_fail((int)n, "verify");
		json_decref(v.problems);
		json_decref(v.removed);
		zr_close(ds);
		return 1;
	}
	if (json) {
		zr_json_put(json_pack("{s:o,s:I,s:o,s:o}", "dataset", zr_json_text(dir), "records",
				      (json_int_t)zr_length(ds), "problems", v.problems, "removed",
				      v.removed),
			    "\n");
		zr_close(ds);
		return n == 0 ? 0 : 1;
	}
	printf("%s: %llu records, %lld problem%s", dir, (unsigned long long)zr_length(ds),
	       (long long)n, n == 1 ? "" : "s");
	if (removed)
		printf(" (%lld record%s removed)", (long long)removed, removed == 1 ? "" : "s");
	printf("\n");
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
	rc = zr_open_writer(&ds, dir, ZR_RDWR, "rebalance");
	if (rc < 0)
		return zr_fail(rc, "rebalance");
	struct zr_progress line;
	zr_progress_start(&line, "values");
	zr_progress_set(ds, zr_progress_cb_show, &line);
	unsigned version = zr_format_version(ds);
	rc = zr_rebalance(ds, (uint32_t)chunk_size, &r);
	zr_close(ds);
	if (rc < 0)
		return zr_fail(rc, "rebalance");
	if (version < ZR_FORMAT_VERSION)
		printf("format       %u -> %d (every value has its checksum)\n", version,
		       ZR_FORMAT_VERSION);
	printf("utilisation  %.1f%% -> %.1f%%\n", r.utilisation_before * 100,
	       r.utilisation_after * 100);
	printf("chunks       %u (%llu bytes) -> %u (%llu bytes)\n", r.chunks_before,
	       (unsigned long long)r.chunk_bytes_before, r.chunks_after,
	       (unsigned long long)r.chunk_bytes_after);
	return 0;
}
