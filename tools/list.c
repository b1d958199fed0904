/*
 * list.c - zr ls and zr stat: a field's records as the mount names them,
 * and where each is stored.
 */
#include "zr_i.h"

#include <stdio.h>
#include <string.h>

static const char ls_help[] =
	"usage: zr ls DIR FIELD [-l | --long | --json]\n"
	"\n"
	"List the present records of FIELD by their names in the mount; with\n"
	"--long: name, logical size, stored size, chunk and offset.\n"
	"  --json   a JSON array, an object a line: {\"id\", \"name\", \"size\",\n"
	"           \"stored\", \"chunk\", \"offset\"} (chunk and offset null for an\n"
	"           empty value, which is stored nowhere)\n";

static const char stat_help[] =
	"usage: zr stat DIR FIELD ID\n"
	"\n"
	"Show where record ID of FIELD is stored, its sizes and (format 2) the\n"
	"CRC-32C of its stored bytes, which its entry holds.\n";

int cmd_ls(int argc, char **argv)
{
	static const struct option opts[] = {{"long", no_argument, 0, 'l'},
					     {"json", no_argument, 0, 'j'}, ZR_OPT_HELP, ZR_OPT_END};
	zr_dataset *ds = NULL;
	bool lng = false, json = false, first = true;
	int f, status = 0;
	zr_names names;

	while ((f = zr_getopt(argc, argv, "hl", opts, "ls")) != -1)
		if (f == 'l' || f == 'j')
			*(f == 'l' ? &lng : &json) = true;
		else
			return f == 'h' ? (fputs(ls_help, stdout), 0) : EXIT_USAGE;
	if (!zr_operands(argc, "ls", 2, 2, "DIR FIELD"))
		return EXIT_USAGE;
	if ((f = zr_open_field("ls", argv[optind], argv[optind + 1], &ds)) < 0)
		return 1;
	if (zr_names_get(ds, &names) < 0) {
		zr_warn("ls: out of memory");
		zr_close(ds);
		return 1;
	}
	if (json)
		fputs("[\n", stdout);
	for (uint64_t id = 0; id < zr_length(ds); id++) {
		zr_record_stat st;
		char name[64];
		if (zr_stat(ds, (unsigned)f, id, &st) < 0) {
			zr_fail(-1, "ls"); /* listed so far; the rest unknown */
			status = 1;
			break;
		}
		if (!st.present)
			continue;
		zr_record_file_name(ds, &names, (unsigned)f, id, name, sizeof name);
		if (json) {
			bool stored = st.physical_len != 0;
			fputs(first ? "" : ",\n", stdout);
			first = false;
			zr_json_put(json_pack("{s:I,s:o,s:I,s:I,s:o,s:o}", "id", (json_int_t)id, "name",
					      zr_json_text(name), "size", (json_int_t)st.logical_len, "stored",
					      (json_int_t)st.physical_len, "chunk",
					      stored ? json_integer(st.chunk_id) : json_null(),
					      "offset",
					      stored ? json_integer((json_int_t)st.offset) : json_null()),
				    "");
		} else if (lng && st.physical_len == 0)
			printf("%-20s %12llu %12u  empty\n", name, (unsigned long long)st.logical_len, 0u);
		else if (lng)
			printf("%-20s %12llu %12u  chunk %u @ %llu\n", name,
			       (unsigned long long)st.logical_len, st.physical_len, st.chunk_id,
			       (unsigned long long)st.offset);
		else
			printf("%s\n", name);
	}
	if (json) /* closed even after a failure: what was listed parses */
		fputs(first ? "]\n" : "\n]\n", stdout);
	zr_close(ds);
	return status;
}

int cmd_stat(int argc, char **argv)
{
	zr_dataset *ds = NULL;
	zr_record_stat st;
	uint64_t id;
	int f, rc;

	if ((rc = zr_no_options(argc, argv, "stat", stat_help)) >= 0)
		return rc;
	if (!zr_operands(argc, "stat", 3, 3, "DIR FIELD ID"))
		return EXIT_USAGE;
	argc -= optind - 1; /* the operands from argv[1] on */
	argv += optind - 1;
	if (parse_u64(argv[3], 0, UINT64_MAX, "stat: ID", &id) < 0)
		return EXIT_USAGE;
	if ((f = zr_open_field("stat", argv[1], argv[2], &ds)) < 0)
		return 1;
	if ((rc = zr_stat(ds, (unsigned)f, id, &st)) < 0) {
		zr_fail(rc, "stat");
		zr_close(ds);
		return 1;
	}
	printf("record     %llu\nfield      %s (%s, %s)\n", (unsigned long long)id, argv[2],
	       zr_dtype_name(zr_field(ds, (unsigned)f)->dtype),
	       zr_compress_name(zr_field(ds, (unsigned)f)->compress));
	if (!st.present)
		printf("state      missing\n");
	else if (st.physical_len == 0)
		printf("state      present, empty\nsize       0 bytes\n");
	else
		printf("state      present\nsize       %llu bytes\nstored     %u bytes in chunk/%u.zr "
		       "at offset %llu\n",
		       (unsigned long long)st.logical_len, st.physical_len, st.chunk_id,
		       (unsigned long long)st.offset);
	if (st.physical_len && zr_format_version(ds) >= 2)
		printf("checksum   CRC-32C %08x\n", st.crc);
	zr_close(ds);
	return 0;
}
