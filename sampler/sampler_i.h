/*
 * sampler_i.h - internals of libzrsampler shared between its source files.
 *
 * Every pseudo-random value of the library comes from zs_mix64(), the
 * SplitMix64 finaliser: outputs are a pure function of their inputs, so the
 * same (spec, n, epoch, step) gives the same ids on every platform. Changing
 * any constant here changes every order: format 1 fixes them.
 */
#ifndef ZS_SAMPLER_I_H
#define ZS_SAMPLER_I_H

#include "zrsampler.h"

#include <stdarg.h>
#include <stdbool.h>

#define ZS_GOLDEN UINT64_C(0x9e3779b97f4a7c15)

/* Domain tags: keys derived for different purposes never coincide. */
enum zs_tag {
	ZS_TAG_SHUFFLE = 1,
	ZS_TAG_BLOCKS = 2,
	ZS_TAG_IN_BLOCK = 3,
	ZS_TAG_RANDOM = 4,
	ZS_TAG_BATCH_SEED = 5,
	ZS_TAG_STATE = 6,
};

static inline uint64_t zs_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* A key from (a, b): not symmetric, every bit of both matters. */
static inline uint64_t zs_hash2(uint64_t a, uint64_t b)
{
	return zs_mix64(a ^ zs_mix64(b + ZS_GOLDEN));
}

/* The key of (seed, tag, epoch). */
static inline uint64_t zs_key(uint64_t seed, enum zs_tag tag, uint64_t epoch)
{
	return zs_hash2(zs_hash2(seed, (uint64_t)tag), epoch);
}

struct zs_sampler {
	zs_spec spec;        /* hi resolved */
	uint64_t m;          /* hi - lo */
	uint64_t g;          /* batch * world: positions per step of an epoch */
	uint64_t steps;      /* per epoch, per rank */
	uint64_t full_steps; /* steps whose batches are full (all but a kept tail) */
	uint64_t nblocks;    /* block order */
	uint64_t last_block; /* ids in the last block (1..block) */
};

/* out[j] = perm(first + j mod n) + add for j < count: zs_perm_at, faster. */
void zs_perm_span(const zs_perm *p, uint64_t first, uint32_t count, uint64_t add, uint64_t *out);

int zs_err(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif /* ZS_SAMPLER_I_H */
