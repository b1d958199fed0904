/*
 * zr.c - the zr command: entry point and subcommand dispatch.
 */
#include "zr_i.h"

#include <stdlib.h>
#include <string.h>

static const zr_cmd cmds[] = {
	{"create", cmd_create, "create an empty dataset"},
	{"import", cmd_import, "make a dataset from a directory, tar shards, .npy arrays or a flat file"},
	{"put", cmd_put, "append one record from files"},
	{"set", cmd_set, "replace fields of a record"},
	{"rm", cmd_rm, "delete records (the last takes each deleted id)"},
	{"cat", cmd_cat, "write one record's bytes to stdout"},
	{"export", cmd_export, "write a field's records out as files"},
	{"ls", cmd_ls, "list a field's records"},
	{"stat", cmd_stat, "show where a record is stored"},
	{"find", cmd_find, "the ids of records by their original names"},
	{"info", cmd_info, "show a dataset's fields, size and utilisation"},
	{"verify", cmd_verify, "check every record; exit 0 only when clean"},
	{"rebalance", cmd_rebalance, "rewrite live records into fresh chunks"},
	{"sample", cmd_sample, "print a sampler's batches of record ids"},
	{"bench", cmd_bench, "run a reproducible benchmark"},
};

static void usage(FILE *out)
{
	fputs("usage: zr COMMAND [ARGS...]\n"
	      "\n"
	      "Create, fill, inspect and check zrecord datasets; compute sampler orders.\n"
	      "\n"
	      "Commands:\n",
	      out);
	for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
		fprintf(out, "  %-10s %s\n", cmds[i].name, cmds[i].summary);
	fputs("\n'zr COMMAND --help' describes a command. Exit status: 0 success, 1 failure\n"
	      "(or problems found), 2 usage error.\n",
	      out);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (is_help(argv[1])) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("zr (zrfs) %s, zrecord format %d\n", ZRFS_VERSION, ZR_FORMAT_VERSION);
		return 0;
	}
	zr_guard_mappings(); /* a table cut short while read: an error, not SIGBUS */
	for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
		if (strcmp(argv[1], cmds[i].name) == 0)
			return cmds[i].run(argc - 1, argv + 1);
	zr_warn("unknown command '%s' (try 'zr --help')", argv[1]);
	return EXIT_USAGE;
}
