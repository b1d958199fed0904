/*
 * info.c - zr info: what a dataset holds, for people and for programs.
 */
#include "zr_i.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static const char help[] =
	"usage: zr info DIR [--json]\n"
	"\n"
	"Show the dataset's records, fields, chunks, compression ratio and\n"
	"utilisation (live bytes / chunk bytes; 'zr rebalance' restores it).\n"
	"  --json   print one JSON object instead\n";

static void fmt_bytes(char *buf, size_t cap, uint64_t n)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)n;
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(buf, cap, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

static void fmt_shape(char *buf, size_t cap, const zr_field_spec *f)
{
	size_t n = 0;

	if (!f->fixed) {
		snprintf(buf, cap, "variable");
		return;
	}
	n += (size_t)snprintf(buf, cap, "(");
	for (unsigned d = 0; d < f->ndim && n < cap; d++)
		n += (size_t)snprintf(buf + n, cap - n, d ? ",%llu" : "%llu",
				      (unsigned long long)f->shape[d]);
	if (n < cap)
		snprintf(buf + n, cap - n, f->ndim == 1 ? ",)" : ")");
}

/* The directories, symbolic links, FIFOs, sockets or devices, and hard
 * links the dataset keeps beside its records (zr_tree_get), in @n[0], [1],
 * [2] and [3]: none where it cannot tell (out of memory). */
static void tree_counts(const zr_dataset *ds, size_t n[4])
{
	zr_tree_entry *t;
	size_t len;

	n[0] = n[1] = n[2] = n[3] = 0;
	if (zr_tree_get(ds, &t, &len) < 0)
		return;
	for (size_t i = 0; i < len; i++)
		n[S_ISDIR(t[i].mode) ? 0 : S_ISLNK(t[i].mode) ? 1 : S_ISREG(t[i].mode) ? 3 : 2]++;
	free(t);
}

static json_t *info_json(zr_dataset *ds, const zr_info *in)
{
	json_t *o = json_object(), *fields = json_array();

	json_object_set_new(o, "path", json_string(zr_path(ds)));
	json_object_set_new(o, "version", json_integer(zr_format_version(ds)));
	json_object_set_new(o, "generation", json_integer((json_int_t)in->generation));
	json_object_set_new(o, "modified", json_integer(in->mtime));
	json_object_set_new(o, "length", json_integer((json_int_t)in->length));
	json_object_set_new(o, "chunks", json_pack("{s:I,s:I,s:I}", "count",
						   (json_int_t)in->chunk_count, "size",
						   (json_int_t)in->chunk_size, "bytes",
						   (json_int_t)in->chunk_bytes));
	json_object_set_new(o, "live_bytes", json_integer((json_int_t)in->live_bytes));
	json_object_set_new(o, "logical_bytes", json_integer((json_int_t)in->logical_bytes));
	json_object_set_new(o, "compression_ratio",
			    json_real(in->live_bytes ? (double)in->logical_bytes / (double)in->live_bytes
						     : 1.0));
	json_object_set_new(o, "utilisation", json_real(in->utilisation));
	json_object_set_new(o, "missing", json_integer((json_int_t)in->missing));
	for (unsigned i = 0; i < zr_field_count(ds); i++) {
		const zr_field_spec *f = zr_field(ds, i);
		json_t *jf = json_pack("{s:s,s:s,s:s}", "name", f->name, "dtype",
				       zr_dtype_name(f->dtype), "compress",
				       zr_compress_name(f->compress));
		if (f->fixed) {
			json_t *shape = json_array();
			for (unsigned d = 0; d < f->ndim; d++)
				json_array_append_new(shape, json_integer((json_int_t)f->shape[d]));
			json_object_set_new(jf, "shape", shape);
		} else {
			json_object_set_new(jf, "shape", json_null());
		}
		json_object_set_new(jf, "ext", f->ext ? json_string(f->ext) : json_null());
		json_array_append_new(fields, jf);
	}
	json_object_set_new(o, "fields", fields);
	size_t tree[4];
	tree_counts(ds, tree);
	json_object_set_new(o, "tree", json_pack("{s:I,s:I,s:I,s:I}", "directories",
						 (json_int_t)tree[0], "links", (json_int_t)tree[1],
						 "special", (json_int_t)tree[2], "hard_links",
						 (json_int_t)tree[3]));
	/* the dataset's attrs as meta.json keeps them: class names, names */
	json_t *a = zr_attrs_json(ds);
	json_object_set_new(o, "attrs", a ? a : json_object());
	return o;
}

static void info_human(zr_dataset *ds, const zr_info *in)
{
	char a[32], b[32], c[32], when[64];
	time_t t = (time_t)in->mtime;
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
	fmt_bytes(a, sizeof a, in->chunk_bytes);
	fmt_bytes(b, sizeof b, in->live_bytes);
	fmt_bytes(c, sizeof c, in->logical_bytes);
	printf("dataset      %s\n", zr_path(ds));
	printf("format       zrecord %u%s, generation %llu, committed %s\n", zr_format_version(ds),
	       zr_format_version(ds) < 2 ? " (no checksums: zr rebalance adds them)" : "",
	       (unsigned long long)in->generation, when);
	printf("records      %llu\n", (unsigned long long)in->length);
	printf("chunks       %u (up to %u records each), %s\n", in->chunk_count, in->chunk_size,
	       a);
	printf("data         %s stored, %s logical (compression ratio %.2f)\n", b, c,
	       in->live_bytes ? (double)in->logical_bytes / (double)in->live_bytes : 1.0);
	printf("utilisation  %.1f%%\n", in->utilisation * 100);
	printf("missing      %llu field values\n", (unsigned long long)in->missing);
	size_t tree[4];
	tree_counts(ds, tree);
	if (tree[0] || tree[1] || tree[2] || tree[3]) {
		printf("tree         %zu directories, %zu symbolic links", tree[0], tree[1]);
		if (tree[2])
			printf(", %zu FIFOs, sockets or devices", tree[2]);
		if (tree[3])
			printf(", %zu hard link%s", tree[3], tree[3] == 1 ? "" : "s");
		printf(" (beside the records)\n");
	}
	printf("fields       %-20s %-6s %-8s %-16s %s\n", "NAME", "DTYPE", "STORAGE", "SHAPE",
	       "EXT");
	for (unsigned i = 0; i < zr_field_count(ds); i++) {
		const zr_field_spec *f = zr_field(ds, i);
		char shape[128];
		fmt_shape(shape, sizeof shape, f);
		printf("             %-20s %-6s %-8s %-16s %s\n", f->name, zr_dtype_name(f->dtype),
		       zr_compress_name(f->compress), shape, f->ext ? f->ext : "-");
	}
}

int cmd_info(int argc, char **argv)
{
	const char *dir = NULL;
	bool json = false;
	zr_dataset *ds;
	zr_info in;
	int rc;

	static const struct option opts[] = {{"json", no_argument, 0, 'j'}, ZR_OPT_HELP,
					     ZR_OPT_END};

	while ((rc = zr_getopt(argc, argv, "h", opts, "info")) != -1)
		if (rc == 'j')
			json = true;
		else
			return rc == 'h' ? (fputs(help, stdout), 0) : EXIT_USAGE;
	if (!zr_operands(argc, "info", 1, 1, "DIR"))
		return EXIT_USAGE;
	dir = argv[optind];
	rc = zr_open(&ds, dir, ZR_RDONLY);
	if (rc < 0)
		return zr_fail(rc, "info");
	rc = zr_info_get(ds, &in);
	if (rc < 0) {
		zr_close(ds);
		return zr_fail(rc, "info");
	}
	if (json) {
		json_t *o = info_json(ds, &in);
		json_dumpf(o, stdout, JSON_INDENT(2));
		putchar('\n');
		json_decref(o);
	} else {
		info_human(ds, &in);
	}
	zr_close(ds);
	return 0;
}
