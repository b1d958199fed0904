/*
 * fuzz_spec.c - libFuzzer target: sampler specs (sampler/spec.c) and the
 * samplers they make. A spec that parses prints canonically, the canonical
 * form parses to the same spec, and is a safe file name; a sampler over a
 * small N returns ids below N for its first and last steps (and has none
 * only where from= leaves none).
 */
#include "zrsampler.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char text[ZS_SPEC_MAX + 2], canon[ZS_SPEC_MAX + 1];
	zs_spec s, again;
	zs_sampler *smp;

	if (size > ZS_SPEC_MAX + 1)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	if (zs_spec_parse(text, &s) < 0)
		return 0;
	if (zs_spec_format(&s, canon, sizeof canon) < 0 || zs_spec_parse(canon, &again) < 0 ||
	    memcmp(&s, &again, sizeof s) != 0 || strchr(canon, '/') || canon[0] == '.')
		abort();
	uint64_t n = 1 + (size * 7919) % 5000;
	if (s.batch > 4096 || zs_sampler_create(&smp, &s, n) < 0)
		return 0;
	uint64_t *ids = malloc((zs_batch_max(smp) + 1) * sizeof *ids);
	uint64_t steps = zs_steps(smp), probe[2] = {0, steps - 1};
	/* no steps only where from= left none (an epoch resumed at its end):
	 * then there is no batch to get */
	if (steps == 0 && (s.from == 0 || (ids && zs_batch(smp, 0, 0, ids) >= 0)))
		abort();
	for (int i = 0; i < 2 && ids && steps; i++) {
		int64_t got = zs_batch(smp, size % 5, probe[i], ids);
		if (got < 0 || (uint64_t)got > zs_batch_max(smp))
			abort();
		for (int64_t j = 0; j < got; j++)
			if (ids[j] >= n)
				abort();
	}
	free(ids);
	zs_sampler_destroy(smp);
	return 0;
}
