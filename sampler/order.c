/*
 * order.c - orders bound to a dataset: steps, batches, states.
 *
 * Every batch is computed from its coordinates alone: (epoch, step, rank)
 * give the batch's positions in the epoch's order (zrsampler.h explains the
 * layout of steps and ranks), and each position maps to an id through the
 * order's permutation in O(1). So resuming at any step costs nothing and no
 * memory grows with the dataset.
 *
 * Sections: create, positions, orders, batches, states.
 */
#include "sampler_i.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned __int128 u128;

/* ---- create ---- */

int zs_sampler_create(zs_sampler **out, const zs_spec *spec, uint64_t n)
{
	zs_sampler *s;
	zs_spec sp = *spec;
	char name[ZS_SPEC_MAX + 1];

	*out = NULL;
	if (zs_spec_format(spec, name, sizeof name) < 0)
		return ZS_EINVAL_SPEC;
	if (n > ZS_INDEX_MAX)
		return zs_err(ZS_EINVAL_SPEC, "%llu records: more than a sampler indexes",
			      (unsigned long long)n);
	if (sp.hi == 0)
		sp.hi = n;
	if (sp.hi > n)
		return zs_err(ZS_EINVAL_SPEC, "%s: hi=%llu is beyond the %llu records", name,
			      (unsigned long long)sp.hi, (unsigned long long)n);
	if (sp.lo >= sp.hi)
		return zs_err(ZS_EINVAL_SPEC, "%s: no records in [%llu, %llu)", name,
			      (unsigned long long)sp.lo, (unsigned long long)sp.hi);
	s = calloc(1, sizeof *s);
	if (!s)
		return zs_err(-ENOMEM, "out of memory");
	s->spec = sp;
	s->m = sp.hi - sp.lo;
	s->g = (uint64_t)sp.batch * sp.world;
	if (sp.order == ZS_WINDOW) {
		u128 per = (u128)sp.stride * sp.world;
		s->steps = (uint64_t)((s->m + per - 1) / per);
		s->full_steps = s->steps;
	} else {
		/* from= the end (a job saved its position after the last
		 * step): an epoch with no steps left, not an error */
		if (sp.from > s->m) {
			uint64_t m = s->m;
			free(s);
			return zs_err(ZS_EINVAL_SPEC, "%s: from=%llu is past the epoch's %llu positions",
				      name, (unsigned long long)sp.from, (unsigned long long)m);
		}
		uint64_t left = s->m - sp.from;
		s->full_steps = left / s->g;
		s->steps = sp.tail == ZS_DROP ? s->full_steps : (left + s->g - 1) / s->g;
	}
	if (s->steps == 0 && sp.from == 0) { /* (with from=: what is left makes none) */
		free(s);
		return zs_err(ZS_EINVAL_SPEC,
			      "%s: %llu record%s no full batch of %u for %u rank%s (use tail=keep or "
			      "tail=pad)",
			      name, (unsigned long long)(sp.hi - sp.lo),
			      sp.hi - sp.lo == 1 ? " makes" : "s make", sp.batch, sp.world,
			      sp.world == 1 ? "" : "s");
	}
	if (sp.order == ZS_BLOCK) {
		s->nblocks = (s->m + sp.block - 1) / sp.block;
		s->last_block = s->m - (s->nblocks - 1) * sp.block;
	}
	*out = s;
	return 0;
}

void zs_sampler_destroy(zs_sampler *s)
{
	free(s);
}

const zs_spec *zs_sampler_spec(const zs_sampler *s)
{
	return &s->spec;
}

uint64_t zs_steps(const zs_sampler *s)
{
	return s->steps;
}

/* ---- positions: where this rank's batch lies in the epoch's order ---- */

/* First position and size of (step, rank) within the epoch. */
static void slice(const zs_sampler *s, uint64_t step, uint64_t *first, uint32_t *size)
{
	uint32_t r = s->spec.rank, w = s->spec.world;

	uint64_t at = s->spec.from + step * s->g; /* the global batch's first position */

	if (step < s->full_steps || s->spec.tail != ZS_KEEP) {
		*first = at + (uint64_t)r * s->spec.batch;
		*size = s->spec.batch;
		return;
	}
	/* the kept tail: rem positions in near-equal contiguous parts */
	uint64_t rem = s->m - at, q = rem / w, extra = rem % w;
	*first = at + r * q + (r < extra ? r : extra);
	*size = (uint32_t)(q + (r < extra));
}

uint32_t zs_batch_size(const zs_sampler *s, uint64_t step)
{
	uint64_t first;
	uint32_t size;

	if (step >= s->steps)
		return 0;
	slice(s, step, &first, &size);
	return size;
}

uint32_t zs_batch_max(const zs_sampler *s)
{
	return s->spec.batch;
}

/* ---- orders ---- */

/* Block order: the epoch's positions run through the blocks in permuted
 * order; the one short block (the last, when block does not divide M) sits
 * wherever the block permutation put it. */
struct block_order {
	zs_perm outer;
	uint64_t short_at;   /* place of the short block in the permuted order */
	uint64_t key_inner;
};

static void block_begin(const zs_sampler *s, uint64_t epoch, struct block_order *bo)
{
	zs_perm_init(&bo->outer, s->nblocks, zs_key(s->spec.seed, ZS_TAG_BLOCKS, epoch));
	bo->short_at = zs_perm_index(&bo->outer, s->nblocks - 1);
	bo->key_inner = zs_key(s->spec.seed, ZS_TAG_IN_BLOCK, epoch);
}

/* Position @pos -> place @j in the block order and offset @off in that block. */
static void block_place(const zs_sampler *s, const struct block_order *bo, uint64_t pos,
			uint64_t *j, uint64_t *off)
{
	uint64_t bsz = s->spec.block, edge = bo->short_at * bsz;

	if (pos < edge) {
		*j = pos / bsz;
		*off = pos % bsz;
	} else if (pos < edge + s->last_block) {
		*j = bo->short_at;
		*off = pos - edge;
	} else {
		uint64_t q = pos - edge - s->last_block;
		*j = bo->short_at + 1 + q / bsz;
		*off = q % bsz;
	}
}

/* ids of positions [first, first + size) (mod M), one block segment at a time. */
static void block_ids(const zs_sampler *s, uint64_t epoch, uint64_t first, uint32_t size,
		      uint64_t *ids)
{
	struct block_order bo;
	uint64_t pos = first % s->m;

	block_begin(s, epoch, &bo);
	for (uint32_t done = 0; done < size;) {
		uint64_t j, off, b, bsize, run;
		zs_perm inner;
		block_place(s, &bo, pos, &j, &off);
		b = zs_perm_at(&bo.outer, j);
		bsize = b == s->nblocks - 1 ? s->last_block : s->spec.block;
		run = bsize - off;
		if (run > size - done)
			run = size - done;
		if (run > s->m - pos)
			run = s->m - pos; /* the epoch's order ends here (tail=pad wraps) */
		zs_perm_init(&inner, bsize, zs_hash2(bo.key_inner, b));
		zs_perm_span(&inner, off, (uint32_t)run, s->spec.lo + b * s->spec.block, ids + done);
		done += (uint32_t)run;
		pos = pos + run == s->m ? 0 : pos + run;
	}
}

/* ---- batches ---- */

int64_t zs_batch(const zs_sampler *s, uint64_t epoch, uint64_t step, uint64_t *ids)
{
	return zs_batch_span(s, epoch, step, 0, UINT32_MAX, ids);
}

int64_t zs_batch_span(const zs_sampler *s, uint64_t epoch, uint64_t step, uint32_t from,
		      uint32_t count, uint64_t *ids)
{
	const zs_spec *sp = &s->spec;
	uint64_t first, m = s->m, lo = sp->lo;
	uint32_t size;

	if (step >= s->steps)
		return zs_err(ZS_EINVAL_SPEC, "step %llu: an epoch has %llu steps",
			      (unsigned long long)step, (unsigned long long)s->steps);
	if (epoch > ZS_EPOCH_MAX)
		return zs_err(ZS_EINVAL_SPEC, "epoch %llu is beyond %llu", (unsigned long long)epoch,
			      (unsigned long long)ZS_EPOCH_MAX);
	if (sp->order == ZS_WINDOW) {
		u128 k = ((u128)epoch * s->steps + step) * sp->world + sp->rank;
		uint64_t start = (uint64_t)(k % m * sp->stride % m);
		size = from < sp->window ? (uint32_t)(sp->window - from) : 0;
		size = size < count ? size : count;
		for (uint64_t j = 0; j < size; j++)
			ids[j] = lo + (uint64_t)(((u128)start + from + j) % m);
		return size;
	}
	slice(s, step, &first, &size);
	/* positions [from, from + count) of the batch's */
	size = from < size ? size - from : 0;
	size = size < count ? size : count;
	first += from;
	switch (sp->order) {
	case ZS_SEQ:
		for (uint32_t j = 0; j < size; j++)
			ids[j] = lo + (first + j) % m;
		break;
	case ZS_SHUFFLE: {
		zs_perm p;
		zs_perm_init(&p, m, zs_key(sp->seed, ZS_TAG_SHUFFLE, epoch));
		zs_perm_span(&p, first, size, lo, ids);
		break;
	}
	case ZS_BLOCK:
		block_ids(s, epoch, first, size, ids);
		break;
	case ZS_RANDOM: {
		uint64_t key = zs_key(sp->seed, ZS_TAG_RANDOM, epoch);
		for (uint32_t j = 0; j < size; j++)
			ids[j] = lo + (uint64_t)(((u128)zs_hash2(key, first + j) * m) >> 64);
		break;
	}
	case ZS_WINDOW:
		break;
	}
	return size;
}

uint64_t zs_batch_seed(const zs_sampler *s, uint64_t epoch, uint64_t step)
{
	uint64_t at = s->spec.from + step * s->g;
	/* step k of a spec without from= starts at k * G: k, as ever; a batch
	 * of a from= spec that starts where one of G would, that one's */
	uint64_t which = at % s->g == 0 ? at / s->g : UINT64_C(1) << 63 | at;

	return zs_hash2(zs_key(s->spec.seed, ZS_TAG_BATCH_SEED, epoch), which);
}

uint64_t zs_position_after(const zs_sampler *s, uint64_t step)
{
	uint64_t end;

	if (s->spec.order == ZS_WINDOW || step >= s->steps)
		return s->m;
	end = s->spec.from + (step + 1) * s->g;
	return end < s->m ? end : s->m;
}

/* ---- states ---- */

zs_state zs_state_at(const zs_sampler *s, uint64_t epoch)
{
	return (zs_state){.seed = s->spec.seed,
			  .epoch = epoch,
			  .step = 0,
			  .rank = (uint16_t)s->spec.rank,
			  .world = (uint16_t)s->spec.world};
}

int64_t zs_next(const zs_sampler *s, zs_state *st, uint64_t *ids)
{
	int64_t n;

	if (st->seed != s->spec.seed || st->rank != s->spec.rank || st->world != s->spec.world)
		return zs_err(ZS_EINVAL_SPEC, "the state belongs to another spec (seed, rank or world differ)");
	n = zs_batch(s, st->epoch, st->step, ids);
	if (n < 0)
		return n;
	if (++st->step == s->steps) {
		st->step = 0;
		st->epoch++;
	}
	return n;
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint32_t state_check(const uint8_t *p)
{
	uint64_t h = zs_key(0, ZS_TAG_STATE, 0);

	for (int i = 0; i < 28; i += 4)
		h = zs_hash2(h, (uint64_t)p[i] | (uint64_t)p[i + 1] << 8 | (uint64_t)p[i + 2] << 16 |
					(uint64_t)p[i + 3] << 24);
	return (uint32_t)h;
}

void zs_state_save(const zs_state *st, uint8_t out[32])
{
	uint32_t c;

	put64(out, st->seed);
	put64(out + 8, st->epoch);
	put64(out + 16, st->step);
	out[24] = (uint8_t)st->rank;
	out[25] = (uint8_t)(st->rank >> 8);
	out[26] = (uint8_t)st->world;
	out[27] = (uint8_t)(st->world >> 8);
	c = state_check(out);
	for (int i = 0; i < 4; i++)
		out[28 + i] = (uint8_t)(c >> (8 * i));
}

int zs_state_load(zs_state *st, const uint8_t in[32])
{
	uint32_t c = (uint32_t)in[28] | (uint32_t)in[29] << 8 | (uint32_t)in[30] << 16 |
		     (uint32_t)in[31] << 24;

	if (c != state_check(in))
		return zs_err(ZS_EINVAL_SPEC, "saved state: check word does not match (damaged bytes)");
	st->seed = get64(in);
	st->epoch = get64(in + 8);
	st->step = get64(in + 16);
	st->rank = (uint16_t)(in[24] | in[25] << 8);
	st->world = (uint16_t)(in[26] | in[27] << 8);
	st->check = c;
	if (st->world == 0 || st->rank >= st->world)
		return zs_err(ZS_EINVAL_SPEC, "saved state: rank %u of world %u", st->rank, st->world);
	return 0;
}
