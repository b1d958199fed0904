/*
 * sample.c - zr sample: print a sampler's batches, one per line.
 */
#include "zr_i.h"
#include "zrsampler.h"

#include <stdlib.h>
#include <string.h>

static const char help[] =
	"usage: zr sample SPEC --n N [--epoch E] [--steps A:B] [--json]\n"
	"\n"
	"Print the record ids of batches A..B-1 (default: all) of epoch E (default 0)\n"
	"of the order SPEC over N records, one batch per line, ids separated by\n"
	"spaces. The first line, on stderr, is the canonical spec and the number of\n"
	"steps per epoch.\n"
	"  --json   print one JSON object instead, a batch a line: {\"spec\" (the\n"
	"           canonical one), \"records\", \"epoch\", \"steps\" (per epoch),\n"
	"           \"first\" (A), \"batches\": [[ID...]...]}\n"
	"\n"
	"SPEC is ORDER[,KEY=VALUE...]: ORDER one of seq, window, random, shuffle,\n"
	"block; KEYs seed, batch, rank, world, lo, hi, tail (drop|keep|pad),\n"
	"from (the position an epoch's steps start at: resuming on other ranks;\n"
	"not for window), window, stride (window order), block (block order).\n"
	"Example:\n"
	"  zr sample shuffle,seed=42,batch=4,world=2,rank=1 --n 20 --steps 0:2\n";

/* "A:B", "A:" or ":B", with 0 <= A <= B <= max. */
static int parse_steps(const char *s, uint64_t max, uint64_t *a, uint64_t *b)
{
	const char *colon = strchr(s, ':');
	char head[32];

	if (!colon || (size_t)(colon - s) >= sizeof head) {
		zr_warn("--steps: '%s' is not A:B", s);
		return -1;
	}
	memcpy(head, s, (size_t)(colon - s));
	head[colon - s] = 0;
	*a = 0;
	*b = max;
	if (head[0] && parse_u64(head, 0, max, "--steps", a) < 0)
		return -1;
	if (colon[1] && parse_u64(colon + 1, 0, max, "--steps", b) < 0)
		return -1;
	if (*a > *b) {
		zr_warn("--steps: %s is an empty range (A:B runs from step A to B-1; A <= B)", s);
		return -1;
	}
	return 0;
}

int cmd_sample(int argc, char **argv)
{
	const char *spec_text = NULL, *steps = NULL;
	uint64_t n = 0, epoch = 0, a, b;
	bool have_n = false;
	char canon[ZS_SPEC_MAX + 1];
	zs_spec spec;
	zs_sampler *s;

	static const struct option opts[] = {{"n", required_argument, 0, 'n'},
					     {"epoch", required_argument, 0, 'e'},
					     {"steps", required_argument, 0, 's'},
					     {"json", no_argument, 0, 'j'}, ZR_OPT_HELP, ZR_OPT_END};
	bool json = false;
	int c;

	while ((c = zr_getopt(argc, argv, "h", opts, "sample")) != -1) {
		if (c == 'n' && parse_u64(optarg, 1, ZS_INDEX_MAX, "--n", &n) < 0)
			return EXIT_USAGE;
		else if (c == 'n')
			have_n = true;
		else if (c == 'e' && parse_u64(optarg, 0, ZS_EPOCH_MAX, "--epoch", &epoch) < 0)
			return EXIT_USAGE;
		else if (c == 's')
			steps = optarg;
		else if (c == 'j')
			json = true;
		else if (c == 'h' || c == '?')
			return c == 'h' ? (fputs(help, stdout), 0) : EXIT_USAGE;
	}
	if (!zr_operands(argc, "sample", 1, 1, "SPEC") || !have_n) {
		if (!have_n)
			zr_warn("sample: expected SPEC and --n N (see 'zr sample --help')");
		return EXIT_USAGE;
	}
	spec_text = argv[optind];
	if (zs_spec_parse(spec_text, &spec) < 0) {
		zr_warn("sample: spec '%s': %s", spec_text, zs_errmsg());
		return EXIT_USAGE;
	}
	if (zs_sampler_create(&s, &spec, n) < 0) {
		zr_warn("sample: %s", zs_errmsg());
		return EXIT_USAGE;
	}
	if (steps ? parse_steps(steps, zs_steps(s), &a, &b) < 0 : (a = 0, b = zs_steps(s), 0)) {
		zs_sampler_destroy(s);
		return EXIT_USAGE;
	}
	zs_spec_format(&spec, canon, sizeof canon);
	if (json) {
		fputs("{\"spec\":", stdout);
		zr_json_put(json_string(canon), "");
		printf(",\"records\":%llu,\"epoch\":%llu,\"steps\":%llu,\"first\":%llu,"
		       "\"batches\":[",
		       (unsigned long long)n, (unsigned long long)epoch,
		       (unsigned long long)zs_steps(s), (unsigned long long)a);
	} else {
		fprintf(stderr, "%s: %llu steps per epoch\n", canon, (unsigned long long)zs_steps(s));
	}
	uint64_t *ids = malloc((size_t)zs_batch_max(s) * sizeof *ids);
	if (!ids) {
		zr_warn("sample: out of memory");
		zs_sampler_destroy(s);
		return 1;
	}
	for (uint64_t k = a; k < b; k++) {
		int64_t m = zs_batch(s, epoch, k, ids);
		const char *sep = json ? "," : " ";
		fputs(json ? (k > a ? ",\n[" : "\n[") : "", stdout);
		for (int64_t i = 0; i < m; i++)
			printf("%s%llu", i ? sep : "", (unsigned long long)ids[i]);
		fputs(json ? "]" : "\n", stdout);
	}
	if (json)
		fputs(b > a ? "\n]}\n" : "]}\n", stdout);
	free(ids);
	zs_sampler_destroy(s);
	if (fflush(stdout) != 0) {
		zr_warn("sample: write to stdout failed");
		return 1;
	}
	return 0;
}
