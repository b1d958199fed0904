/*
 * record.c - zr put and zr cat: one record in, one record out.
 */
#include "zr_i.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char put_help[] =
	"usage: zr put DIR --FIELD=FILE [--FIELD=FILE...]\n"
	"\n"
	"Append one record whose FIELD holds the bytes of FILE ('-' reads stdin);\n"
	"fields not given are stored as missing. Prints the new record's id and\n"
	"commits. Example: zr put cats --image=cat.jpg --label=label.bin\n";

static const char cat_help[] =
	"usage: zr cat DIR FIELD ID\n"
	"\n"
	"Write the bytes of field FIELD of record ID to standard output (inflated\n"
	"if the field is compressed). Fails if the record is missing.\n";

/* Parse the --FIELD=FILE options argv[from..argc) (getopt_long, a long
 * option per field of @ds) into @values (one per field, data NULL where not
 * given), reading the files into @bufs. 0, or an exit status (message
 * printed). */
static int read_field_args(zr_dataset *ds, int argc, char **argv, int from, const char *what,
			   zr_value *values, void **bufs)
{
	struct option opts[ZR_FIELDS_MAX + 1];
	unsigned nf = zr_field_count(ds);
	bool stdin_used = false;
	size_t len;
	int c;

	for (unsigned f = 0; f < nf; f++)
		opts[f] = (struct option){zr_field(ds, f)->name, required_argument, 0, 256 + (int)f};
	opts[nf] = (struct option)ZR_OPT_END;
	optind = from;
	while ((c = zr_getopt(argc, argv, "", opts, what)) != -1) {
		int f = c - 256;
		if (c == '?') { /* said; and which options there are */
			char names[ZR_FIELDS_MAX * (ZR_NAME_MAX + 4)];
			size_t at = 0;
			for (unsigned k = 0; k < nf; k++)
				at += (size_t)snprintf(names + at, sizeof names - at, "%s--%s=FILE",
						       k ? ", " : "", opts[k].name);
			zr_warn("%s: %s has the fields %s", what, zr_path(ds), names);
			return EXIT_USAGE;
		}
		if (values[f].data) {
			zr_warn("%s: field '%s' is given twice", what, opts[f].name);
			return EXIT_USAGE;
		}
		if (strcmp(optarg, "-") == 0) {
			if (stdin_used) {
				zr_warn("%s: only one field can read standard input", what);
				return EXIT_USAGE;
			}
			stdin_used = true;
		}
		if (read_file(what, optarg, &bufs[f], &len) < 0)
			return 1;
		values[f].data = bufs[f] ? bufs[f] : "";
		values[f].len = len;
	}
	if (optind < argc) {
		zr_warn("%s: '%s' is not --FIELD=FILE (see 'zr %s --help')", what, argv[optind], what);
		return EXIT_USAGE;
	}
	return 0;
}

/* A label outside the classes the dataset names for it (attrs.classes.
 * FIELD, as zr import dir --label-from-parent keeps them) would leave its
 * record in no class (the mount's by/ would not show it): refused. 0, or 1
 * (said). */
static int check_classes(zr_dataset *ds, const zr_value *values, const char *what)
{
	json_t *root = zr_attrs_json(ds), *classes = json_object_get(root, "classes");
	int status = 0;

	for (unsigned f = 0; f < zr_field_count(ds) && status == 0; f++) {
		const zr_field_spec *fs = zr_field(ds, f);
		json_t *names = json_object_get(classes, fs->name);
		uint8_t le[8];
		if (!values[f].data || !json_is_array(names) || fs->dtype != ZR_I64 ||
		    values[f].len != sizeof le)
			continue;
		memcpy(le, values[f].data, sizeof le);
		uint64_t v = 0;
		for (int i = 7; i >= 0; i--)
			v = v << 8 | le[i];
		size_t k = json_array_size(names);
		if (v >= k) {
			zr_warn("%s: %s: %lld is not one of the dataset's %zu classes (0..%zu, named "
				"in meta.json attrs.classes.%s): refused, the record would be in none",
				what, fs->name, (long long)v, k, k ? k - 1 : 0, fs->name);
			status = 1;
		}
	}
	json_decref(root);
	return status;
}

int field_args_open(struct field_args *a, const char *dir, int argc, char **argv, int from,
		    const char *what)
{
	int rc, status;

	memset(a, 0, sizeof *a);
	if ((rc = zr_open_writer(&a->ds, dir, ZR_RDWR, what)) < 0)
		return zr_fail(rc, what);
	a->values = calloc(zr_field_count(a->ds), sizeof *a->values);
	if (!a->values) {
		zr_warn("%s: out of memory", what);
		return 1;
	}
	status = read_field_args(a->ds, argc, argv, from, what, a->values, a->bufs);
	return status ? status : check_classes(a->ds, a->values, what);
}

void field_args_close(struct field_args *a)
{
	for (unsigned f = 0; f < ZR_FIELDS_MAX; f++)
		free(a->bufs[f]);
	free(a->values);
	zr_close(a->ds);
	memset(a, 0, sizeof *a);
}

int cmd_put(int argc, char **argv)
{
	struct field_args a;
	uint64_t id;
	int rc, status;

	if (argc >= 2 && is_help(argv[1])) {
		fputs(put_help, stdout);
		return 0;
	}
	if (argc < 3) {
		zr_warn("put: expected DIR and at least one --FIELD=FILE (see 'zr put --help')");
		return EXIT_USAGE;
	}
	if ((status = field_args_open(&a, argv[1], argc, argv, 2, "put")) == 0) {
		rc = zr_append(a.ds, a.values, &id);
		if (rc == 0)
			rc = zr_commit(a.ds);
		if (rc < 0)
			status = zr_fail(rc, "put");
		else
			printf("%llu\n", (unsigned long long)id);
	}
	field_args_close(&a);
	return status;
}

int cmd_cat(int argc, char **argv)
{
	zr_dataset *ds = NULL;
	zr_batch *b = NULL;
	const zr_slice *s;
	size_t n;
	uint64_t id;
	int f, rc, status = 1;

	if ((rc = zr_no_options(argc, argv, "cat", cat_help)) >= 0)
		return rc;
	if (!zr_operands(argc, "cat", 3, 3, "DIR FIELD ID"))
		return EXIT_USAGE;
	argc -= optind - 1; /* the operands from argv[1] on */
	argv += optind - 1;
	if (parse_u64(argv[3], 0, UINT64_MAX, "cat: ID", &id) < 0)
		return EXIT_USAGE;
	rc = zr_open(&ds, argv[1], ZR_RDONLY | ZR_CHECK);
	if (rc < 0)
		return zr_fail(rc, "cat");
	f = zr_field_find(ds, argv[2]);
	if (f < 0) {
		zr_fail(f, "cat");
		goto out;
	}
	rc = zr_gather(ds, (unsigned)f, &id, 1, &b);
	if (rc < 0) {
		zr_fail(rc, "cat");
		goto out;
	}
	s = zr_batch_records(b, &n);
	if (!s[0].data) {
		zr_warn("cat: record %llu has no '%s' (missing)", (unsigned long long)id, argv[2]);
		goto out;
	}
	if (write_all(1, s[0].data, s[0].len) < 0) {
		zr_warn("cat: write to stdout failed: %s", strerror(errno));
		goto out;
	}
	status = 0;
out:
	zr_batch_release(b);
	zr_close(ds);
	return status;
}
