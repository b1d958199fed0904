/*
 * edit.c - zr set and zr rm: change or delete committed records.
 */
#include "zr_i.h"

#include <stdlib.h>
#include <string.h>

static const char set_help[] =
	"usage: zr set DIR ID --FIELD=FILE [--FIELD=FILE...]\n"
	"\n"
	"Replace the given fields of record ID with the bytes of FILE ('-' reads\n"
	"stdin); other fields keep their values. Commits. The old bytes become dead\n"
	"space until 'zr rebalance'.\n";

static const char rm_help[] =
	"usage: zr rm DIR ID [ID...]\n"
	"\n"
	"Delete records. Ids stay dense: the last record takes each deleted id\n"
	"(so it is renumbered, and a line says so). IDs name records as they are\n"
	"before the command; they are deleted from the highest down. Commits once.\n";

int cmd_set(int argc, char **argv)
{
	struct field_args a;
	uint64_t id;
	int rc = 0, status;

	if (argc >= 2 && is_help(argv[1])) {
		fputs(set_help, stdout);
		return 0;
	}
	if (argc < 4) {
		zr_warn("set: expected DIR ID and at least one --FIELD=FILE (see 'zr set --help')");
		return EXIT_USAGE;
	}
	if (parse_u64(argv[2], 0, UINT64_MAX, "set: ID", &id) < 0)
		return EXIT_USAGE;
	if ((status = field_args_open(&a, argv[1], argc, argv, 3, "set")) == 0) {
		/* nothing is committed unless every field is set: the record
		 * stays as it was on any failure */
		for (unsigned f = 0; f < zr_field_count(a.ds) && rc == 0; f++)
			if (a.values[f].data)
				rc = zr_modify(a.ds, f, id, a.values[f]);
		if (rc == 0)
			rc = zr_commit(a.ds);
		if (rc < 0)
			status = zr_fail(rc, "set");
	}
	field_args_close(&a);
	return status;
}

static int cmp_desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x > y ? -1 : x < y;
}

int cmd_rm(int argc, char **argv)
{
	zr_dataset *ds = NULL;
	uint64_t *ids;
	size_t n = 0;
	int rc, status = 1;

	if ((rc = zr_no_options(argc, argv, "rm", rm_help)) >= 0)
		return rc;
	if (!zr_operands(argc, "rm", 2, -1, "DIR and at least one ID"))
		return EXIT_USAGE;
	argc -= optind - 1; /* the operands from argv[1] on */
	argv += optind - 1;
	ids = malloc((size_t)(argc - 2) * sizeof *ids);
	if (!ids)
		return 1;
	for (int i = 2; i < argc; i++)
		if (parse_u64(argv[i], 0, UINT64_MAX, "rm: ID", &ids[n++]) < 0) {
			free(ids);
			return EXIT_USAGE;
		}
	qsort(ids, n, sizeof *ids, cmp_desc);
	if ((rc = zr_open_writer(&ds, argv[1], ZR_RDWR, "rm")) < 0) {
		free(ids);
		return zr_fail(rc, "rm");
	}
	/* ids are deleted from the highest down, so a deleted id never names a
	 * record moved by this command; the moved ones are reported by the id
	 * they had before it: moved[k] = original id of the record now at k */
	uint64_t *moved_from = calloc(n, sizeof *moved_from), *moved_to = calloc(n, sizeof *moved_to);
	size_t nmoved = 0;
	/* what happened is said once it is committed: a failed commit (a
	 * full disk) changed nothing, and nothing is said to have moved */
	char *said = NULL;
	size_t said_len = 0;
	FILE *say = open_memstream(&said, &said_len);
	if (!moved_from || !moved_to || !say) {
		free(moved_from);
		free(moved_to);
		if (say)
			fclose(say);
		free(said);
		zr_warn("rm: out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t last = zr_length(ds) - 1, orig = last;
		if (i > 0 && ids[i] == ids[i - 1])
			continue; /* given twice */
		if ((rc = zr_delete(ds, ids[i])) < 0) {
			zr_fail(rc, "rm"); /* nothing committed: the dataset is as it was */
			free(moved_from);
			free(moved_to);
			fclose(say);
			free(said);
			goto out;
		}
		for (size_t k = 0; k < nmoved; k++)
			if (moved_to[k] == last)
				orig = moved_from[k];
		if (ids[i] == last) {
			fprintf(say, "deleted record %llu (it was the last)\n",
				(unsigned long long)ids[i]);
		} else {
			fprintf(say, "deleted record %llu; record %llu (the last) now has id %llu\n",
			       (unsigned long long)ids[i], (unsigned long long)orig,
			       (unsigned long long)ids[i]);
			moved_from[nmoved] = orig;
			moved_to[nmoved++] = ids[i];
		}
	}
	free(moved_from);
	free(moved_to);
	fclose(say);
	if ((rc = zr_commit(ds)) < 0) {
		zr_fail(rc, "rm");
		free(said);
		goto out;
	}
	fwrite(said, 1, said_len, stdout);
	free(said);
	printf("%s: %llu records\n", argv[1], (unsigned long long)zr_length(ds));
	status = 0;
out:
	free(ids);
	zr_close(ds);
	return status;
}
