/*
 * create.c - zr create: a new, empty dataset.
 */
#include "zr_i.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static const char help[] =
	"usage: zr create DIR --field SPEC [--field SPEC...] [--chunk-size N]\n"
	"                 [--format 1|2]\n"
	"\n"
	"Create an empty dataset in DIR (which must not exist, or be empty).\n"
	"\n"
	"SPEC is NAME:DTYPE[:OPTION...], each OPTION one of\n"
	"  raw | flate      how records are stored (default raw)\n"
	"  shape=D1xD2...   every record has this fixed shape (shape= for a scalar)\n"
	"  ext=EXT          file extension of records in the mount (e.g. ext=jpg)\n"
	"DTYPE is u8 u16 u32 u64 i8 i16 i32 i64 f16 f32 f64 bool or bytes.\n"
	"NAME uses A-Z a-z 0-9 _ - . and does not start with '.' or '-'.\n"
	"\n"
	"  --chunk-size N   records per chunk file (default 65536)\n"
	"  --format 1|2     the format version (default 2: every value carries a\n"
	"                   CRC-32C that zr verify checks; 1: none, for versions of\n"
	"                   zr and zrfs from before checksums, which refuse 2)\n"
	"\n"
	"Example:\n"
	"  zr create cifar --field image:u8:shape=32x32x3 --field label:i64:shape=\n";

/* Parse NAME:DTYPE[:OPTION...] into @f; strings point into @spec (modified). */
static int parse_field(char *spec, zr_field_spec *f)
{
	char *save = NULL, *tok;

	memset(f, 0, sizeof *f);
	f->name = strtok_r(spec, ":", &save);
	tok = strtok_r(NULL, ":", &save);
	if (!f->name || !tok) {
		zr_warn("--field '%s': expected NAME:DTYPE[:OPTION...]", spec);
		return -1;
	}
	if (zr_dtype_parse(tok, &f->dtype) < 0 || zr_name_check(f->name) < 0) {
		zr_warn("--field: %s", zr_errmsg(NULL));
		return -1;
	}
	while ((tok = strtok_r(NULL, ":", &save))) {
		if (strncmp(tok, "shape=", 6) == 0) {
			char *d = tok + 6, *x;
			f->fixed = 1;
			while (*d) {
				uint64_t v;
				if (f->ndim == ZR_SHAPE_MAX) {
					zr_warn("--field %s: at most %d dimensions", f->name,
						ZR_SHAPE_MAX);
					return -1;
				}
				x = strchr(d, 'x');
				if (x)
					*x = 0;
				if (parse_u64(d, 1, ZR_RECORD_MAX, "shape", &v) < 0)
					return -1;
				f->shape[f->ndim++] = v;
				d = x ? x + 1 : d + strlen(d);
			}
		} else if (strncmp(tok, "ext=", 4) == 0) {
			f->ext = tok + 4;
		} else if (zr_compress_parse(tok, &f->compress) < 0) {
			zr_warn("--field %s: unknown option '%s' (raw, flate, shape=..., ext=...)",
				f->name, tok);
			return -1;
		}
	}
	return 0;
}

int cmd_create(int argc, char **argv)
{
	static const struct option opts[] = {{"field", required_argument, 0, 'f'},
					     {"chunk-size", required_argument, 0, 'c'},
					     {"format", required_argument, 0, 'F'},
					     ZR_OPT_HELP, ZR_OPT_END};
	zr_field_spec fields[ZR_FIELDS_MAX];
	zr_create_opts co = {0};
	unsigned n = 0;
	uint64_t v;
	int c, rc;

	while ((c = zr_getopt(argc, argv, "h", opts, "create")) != -1) {
		switch (c) {
		case 'f':
			if (n == ZR_FIELDS_MAX) {
				zr_warn("at most %d fields", ZR_FIELDS_MAX);
				return EXIT_USAGE;
			}
			if (parse_field(optarg, &fields[n++]) < 0)
				return EXIT_USAGE;
			break;
		case 'c':
			if (parse_u64(optarg, 1, UINT32_MAX, "--chunk-size", &v) < 0)
				return EXIT_USAGE;
			co.chunk_size = (uint32_t)v;
			break;
		case 'F':
			if (parse_u64(optarg, 1, ZR_FORMAT_VERSION, "--format", &v) < 0)
				return EXIT_USAGE;
			co.version = (unsigned)v;
			break;
		case 'h':
			fputs(help, stdout);
			return 0;
		default:
			return EXIT_USAGE;
		}
	}
	if (optind + 1 != argc || n == 0) {
		zr_warn("create: expected DIR and at least one --field (see 'zr create --help')");
		return EXIT_USAGE;
	}
	rc = zr_create(argv[optind], fields, n, &co);
	if (rc == ZR_EINVAL_SPEC) {
		zr_fail(rc, "create");
		return EXIT_USAGE; /* the fields asked for are malformed */
	}
	if (rc < 0)
		return zr_fail(rc, "create");
	return 0;
}
