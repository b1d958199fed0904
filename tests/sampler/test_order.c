/*
 * Description: orders bound to a dataset (sampler/order.c): every order's
 * batches, epochs and tails; ranks disjoint and covering the epoch with
 * equal step counts; window wrap-around; id ranges; resume equality
 * (a batch computed directly equals the one reached by iterating); state
 * save/restore; fixed outputs (test vectors).
 */
#include "zrsampler.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(order);

static zs_sampler *make(const char *text, uint64_t n)
{
	zs_spec spec;
	zs_sampler *s;
	cr_assert_eq(zs_spec_parse(text, &spec), 0, "'%s': %s", text, zs_errmsg());
	cr_assert_eq(zs_sampler_create(&s, &spec, n), 0, "'%s' n=%llu: %s", text,
		     (unsigned long long)n, zs_errmsg());
	return s;
}

static void expect_batch(zs_sampler *s, uint64_t epoch, uint64_t step, const uint64_t *want,
			 size_t n)
{
	uint64_t got[64];
	cr_assert_eq(zs_batch(s, epoch, step, got), (int64_t)n, "epoch %llu step %llu size",
		     (unsigned long long)epoch, (unsigned long long)step);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(got[i], want[i], "epoch %llu step %llu [%zu]: %llu, want %llu",
			     (unsigned long long)epoch, (unsigned long long)step, i,
			     (unsigned long long)got[i], (unsigned long long)want[i]);
}

Test(order, seq_and_the_three_tail_policies)
{
	zs_sampler *s = make("seq,batch=4", 10);
	cr_assert_eq(zs_steps(s), 2);
	expect_batch(s, 0, 0, (uint64_t[]){0, 1, 2, 3}, 4);
	expect_batch(s, 5, 1, (uint64_t[]){4, 5, 6, 7}, 4);
	cr_assert_eq(zs_batch(s, 0, 2, (uint64_t[4]){0}), ZS_EINVAL_SPEC);
	zs_sampler_destroy(s);

	s = make("seq,batch=4,tail=keep", 10);
	cr_assert_eq(zs_steps(s), 3);
	cr_assert_eq(zs_batch_size(s, 2), 2);
	expect_batch(s, 0, 2, (uint64_t[]){8, 9}, 2);
	zs_sampler_destroy(s);

	s = make("seq,batch=4,tail=pad", 10);
	cr_assert_eq(zs_steps(s), 3);
	expect_batch(s, 0, 2, (uint64_t[]){8, 9, 0, 1}, 4);
	zs_sampler_destroy(s);
}

Test(order, too_few_records_for_a_batch_says_so)
{
	zs_spec spec;
	zs_sampler *s;
	cr_assert_eq(zs_spec_parse("shuffle,batch=64,world=2", &spec), 0);
	cr_assert_eq(zs_sampler_create(&s, &spec, 100), ZS_EINVAL_SPEC);
	cr_assert_not_null(strstr(zs_errmsg(), "no full batch"), "%s", zs_errmsg());
	cr_assert_eq(zs_spec_parse("shuffle,hi=200", &spec), 0);
	cr_assert_eq(zs_sampler_create(&s, &spec, 100), ZS_EINVAL_SPEC);
	cr_assert_not_null(strstr(zs_errmsg(), "beyond the 100 records"), "%s", zs_errmsg());
	cr_assert_eq(zs_spec_parse("shuffle,lo=100", &spec), 0);
	cr_assert_eq(zs_sampler_create(&s, &spec, 100), ZS_EINVAL_SPEC);
}

/* All ids of one epoch over all ranks: each id counted. */
static uint32_t *epoch_counts(const char *text, uint64_t n, uint32_t world, uint64_t epoch,
			      uint64_t *total)
{
	uint32_t *count = calloc(n, sizeof *count);
	uint64_t *ids = malloc(1 << 20);
	uint64_t steps0 = 0;
	*total = 0;
	for (uint32_t r = 0; r < world; r++) {
		char spec[256];
		snprintf(spec, sizeof spec, "%s,rank=%u,world=%u", text, r, world);
		zs_sampler *s = make(spec, n);
		if (r == 0)
			steps0 = zs_steps(s);
		cr_assert_eq(zs_steps(s), steps0, "rank %u has another step count", r);
		for (uint64_t k = 0; k < zs_steps(s); k++) {
			int64_t m = zs_batch(s, epoch, k, ids);
			cr_assert_geq(m, 0);
			for (int64_t i = 0; i < m; i++) {
				cr_assert_lt(ids[i], n);
				count[ids[i]]++;
			}
			*total += (uint64_t)m;
		}
		zs_sampler_destroy(s);
	}
	free(ids);
	return count;
}

static void permutation_per_epoch(const char *text, uint64_t n, uint32_t world)
{
	uint64_t total;
	uint32_t *c = epoch_counts(text, n, world, 3, &total);
	cr_assert_eq(total, n, "%s world %u: %llu ids in the epoch", text, world,
		     (unsigned long long)total);
	for (uint64_t i = 0; i < n; i++)
		cr_assert_eq(c[i], 1, "%s n=%llu world=%u: id %llu appears %u times", text,
			     (unsigned long long)n, world, (unsigned long long)i, c[i]);
	free(c);
}

Test(order, shuffle_and_block_cover_the_epoch_exactly_once)
{
	uint64_t ns[] = {1, 2, 3, 7, 255, 256, 257, 1000, 4097};
	for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
		permutation_per_epoch("shuffle,seed=5,batch=1", ns[k], 1);
		permutation_per_epoch("shuffle,seed=5,batch=3,tail=keep", ns[k], 1);
		permutation_per_epoch("block,seed=5,batch=3,tail=keep,block=16", ns[k], 1);
		permutation_per_epoch("block,seed=5,batch=2,tail=keep,block=1", ns[k], 1);
	}
}

Test(order, ranks_are_disjoint_and_cover_the_epoch)
{
	/* keep: every id exactly once over all ranks */
	permutation_per_epoch("shuffle,seed=9,batch=8,tail=keep", 1001, 4);
	permutation_per_epoch("block,seed=9,batch=8,tail=keep,block=50", 1001, 4);
	permutation_per_epoch("seq,batch=8,tail=keep", 1001, 3);
	permutation_per_epoch("shuffle,seed=9,batch=8,tail=keep", 5, 8); /* ranks get empty tails */
	/* drop: at most once, and exactly steps * batch * world of them */
	uint64_t total;
	uint32_t *c = epoch_counts("shuffle,seed=9,batch=8", 1001, 4, 0, &total);
	cr_assert_eq(total, 1001 / 32 * 32);
	for (uint64_t i = 0; i < 1001; i++)
		cr_assert_leq(c[i], 1);
	free(c);
	/* pad: every id at least once, full batches */
	c = epoch_counts("shuffle,seed=9,batch=8,tail=pad", 1001, 4, 0, &total);
	cr_assert_eq(total, (1001 + 31) / 32 * 32);
	for (uint64_t i = 0; i < 1001; i++)
		cr_assert_geq(c[i], 1);
	free(c);
}

static uint64_t *epoch_order(const char *text, uint64_t n, uint64_t epoch)
{
	zs_sampler *s = make(text, n);
	uint64_t *ids = malloc(n * sizeof *ids), at = 0;
	for (uint64_t k = 0; k < zs_steps(s); k++)
		at += (uint64_t)zs_batch(s, epoch, k, ids + at);
	zs_sampler_destroy(s);
	return ids;
}

static int agree(const uint64_t *a, const uint64_t *b, uint64_t n)
{
	int same = 0;
	for (uint64_t i = 0; i < n; i++)
		same += a[i] == b[i];
	return same;
}

Test(order, epochs_and_seeds_change_the_order)
{
	const char *orders[] = {"shuffle,seed=1,batch=10", "block,seed=1,batch=10,block=100",
				"random,seed=1,batch=10"};
	for (int o = 0; o < 3; o++) {
		uint64_t *e0 = epoch_order(orders[o], 1000, 0), *e1 = epoch_order(orders[o], 1000, 1);
		cr_assert_lt(agree(e0, e1, 1000), 50, "%s: epochs 0 and 1 agree", orders[o]);
		char other[64];
		strcpy(other, orders[o]);
		other[strchr(other, '=') - other + 1] = '2';
		uint64_t *s2 = epoch_order(other, 1000, 0);
		cr_assert_lt(agree(e0, s2, 1000), 50, "%s vs %s agree", orders[o], other);
		free(e0);
		free(e1);
		free(s2);
	}
}

Test(order, block_keeps_batches_within_few_blocks)
{
	/* batches aligned with blocks of 100 ids touch at most 2 blocks each */
	zs_sampler *s = make("block,seed=3,batch=100,block=100,tail=keep", 1050);
	uint64_t ids[100];
	for (uint64_t k = 0; k < zs_steps(s); k++) {
		int64_t m = zs_batch(s, 0, k, ids);
		uint64_t first = ids[0] / 100;
		int blocks = 1;
		for (int64_t i = 1; i < m; i++)
			if (ids[i] / 100 != first && ids[i] / 100 != ids[i - 1] / 100)
				blocks++;
		cr_assert_leq(blocks, 2, "step %llu spans %d blocks", (unsigned long long)k, blocks);
	}
	zs_sampler_destroy(s);
}

Test(order, random_is_in_range_and_uniform)
{
	/* with replacement: a batch may be larger than the range (tail=pad) */
	uint64_t ids[1000];
	int count[20] = {0};
	zs_sampler *s = make("random,seed=4,batch=1000,tail=pad,lo=100,hi=120", 1000);
	for (uint64_t e = 0; e < 100; e++) {
		int64_t m = zs_batch(s, e, 0, ids);
		cr_assert_eq(m, 1000);
		for (int64_t i = 0; i < m; i++) {
			cr_assert(ids[i] >= 100 && ids[i] < 120);
			count[ids[i] - 100]++;
		}
	}
	double expect = 100000 / 20.0, chi2 = 0;
	for (int i = 0; i < 20; i++)
		chi2 += (count[i] - expect) * (count[i] - expect) / expect;
	cr_assert_lt(chi2, 43.82, "chi-square %.2f (19 dof, 0.1%% point 43.82)", chi2);
	zs_sampler_destroy(s);
}

Test(order, window_wraps_around_the_index_space)
{
	zs_sampler *s = make("window,window=4,stride=3", 10);
	cr_assert_eq(zs_steps(s), 4);
	expect_batch(s, 0, 0, (uint64_t[]){0, 1, 2, 3}, 4);
	expect_batch(s, 0, 2, (uint64_t[]){6, 7, 8, 9}, 4);
	expect_batch(s, 0, 3, (uint64_t[]){9, 0, 1, 2}, 4);
	expect_batch(s, 1, 0, (uint64_t[]){2, 3, 4, 5}, 4); /* keeps sliding */
	zs_sampler_destroy(s);
	/* a window larger than the range wraps more than once */
	s = make("window,window=7,lo=5,hi=8", 10);
	expect_batch(s, 0, 0, (uint64_t[]){5, 6, 7, 5, 6, 7, 5}, 7);
	zs_sampler_destroy(s);
	/* ranks take interleaved windows */
	s = make("window,window=2,rank=1,world=2", 10);
	cr_assert_eq(zs_steps(s), 3);
	expect_batch(s, 0, 0, (uint64_t[]){2, 3}, 2);
	expect_batch(s, 0, 1, (uint64_t[]){6, 7}, 2);
	zs_sampler_destroy(s);
}

Test(order, ranges_restrict_every_order)
{
	const char *orders[] = {"seq,batch=7,lo=300,hi=700", "shuffle,seed=2,batch=7,lo=300,hi=700",
				"block,seed=2,batch=7,block=30,lo=300,hi=700",
				"random,seed=2,batch=7,lo=300,hi=700",
				"window,window=7,lo=300,hi=700"};
	uint64_t ids[16];
	for (int o = 0; o < 5; o++) {
		zs_sampler *s = make(orders[o], 1000);
		for (uint64_t k = 0; k < zs_steps(s); k++) {
			int64_t m = zs_batch(s, 2, k, ids);
			for (int64_t i = 0; i < m; i++)
				cr_assert(ids[i] >= 300 && ids[i] < 700, "%s: id %llu", orders[o],
					  (unsigned long long)ids[i]);
		}
		zs_sampler_destroy(s);
	}
}

Test(order, resume_equals_iteration)
{
	const char *orders[] = {"shuffle,seed=11,batch=6,rank=1,world=3,tail=keep",
				"block,seed=11,batch=6,block=20,tail=pad",
				"random,seed=11,batch=6", "window,window=6,stride=5,rank=2,world=3",
				"seq,batch=6"};
	for (int o = 0; o < 5; o++) {
		zs_sampler *s = make(orders[o], 301);
		zs_state st = zs_state_at(s, 0);
		uint64_t a[6], b[6];
		for (uint64_t g = 0; g < 3 * zs_steps(s) + 2; g++) {
			uint64_t epoch = st.epoch, step = st.step;
			int64_t n = zs_next(s, &st, a);
			cr_assert_gt(n, -1);
			/* save and restore in the middle: same continuation */
			uint8_t bytes[32];
			zs_state_save(&st, bytes);
			cr_assert_eq(zs_state_load(&st, bytes), 0);
			cr_assert_eq(zs_batch(s, epoch, step, b), n);
			cr_assert_eq(memcmp(a, b, (size_t)n * 8), 0, "%s: epoch %llu step %llu",
				     orders[o], (unsigned long long)epoch, (unsigned long long)step);
		}
		cr_assert_eq(st.epoch, 3);
		cr_assert_eq(st.step, 2);
		zs_sampler_destroy(s);
	}
}

Test(order, state_is_32_bytes_and_checked)
{
	cr_assert_eq(sizeof(zs_state), 32);
	zs_sampler *s = make("shuffle,seed=77,batch=4,rank=1,world=2", 100);
	zs_state st = zs_state_at(s, 5), back;
	st.step = 3;
	uint8_t b[32];
	zs_state_save(&st, b);
	cr_assert_eq(zs_state_load(&back, b), 0);
	cr_assert_eq(back.seed, 77);
	cr_assert_eq(back.epoch, 5);
	cr_assert_eq(back.step, 3);
	cr_assert_eq(back.rank, 1);
	cr_assert_eq(back.world, 2);
	for (int i = 0; i < 32; i++) {
		b[i] ^= 4;
		cr_assert_eq(zs_state_load(&back, b), ZS_EINVAL_SPEC, "byte %d flipped", i);
		b[i] ^= 4;
	}
	/* a state of another rank is refused */
	zs_sampler *other = make("shuffle,seed=77,batch=4,rank=0,world=2", 100);
	uint64_t ids[4];
	cr_assert_eq(zs_next(other, &st, ids), ZS_EINVAL_SPEC);
	zs_sampler_destroy(other);
	zs_sampler_destroy(s);
}

Test(order, batch_seeds)
{
	zs_sampler *a = make("shuffle,seed=1,batch=4,rank=0,world=2", 100);
	zs_sampler *b = make("shuffle,seed=1,batch=4,rank=1,world=2", 100);
	cr_assert_eq(zs_batch_seed(a, 3, 7), zs_batch_seed(b, 3, 7));
	cr_assert_neq(zs_batch_seed(a, 3, 7), zs_batch_seed(a, 3, 8));
	cr_assert_neq(zs_batch_seed(a, 3, 7), zs_batch_seed(a, 4, 7));
	zs_sampler_destroy(a);
	zs_sampler_destroy(b);
}

/* Outputs fixed by format 1 (spec, n, epoch, step -> ids). */
Test(order, test_vectors)
{
	static const struct {
		const char *spec;
		uint64_t n, epoch, step;
		uint64_t want[8];
	} v[] = {
#include "vectors_order.inc"
	};
	for (size_t k = 0; k < sizeof v / sizeof *v; k++) {
		zs_sampler *s = make(v[k].spec, v[k].n);
		expect_batch(s, v[k].epoch, v[k].step, v[k].want, 8);
		zs_sampler_destroy(s);
	}
}

/* Any part of a batch, alone, is that part of the whole batch: every order,
 * a kept tail, a padded one, ranks, and parts that run past the end. */
Test(order, a_span_is_that_part_of_the_batch)
{
	static const char *specs[] = {
		"seq,batch=7",		"seq,batch=7,tail=pad",	  "shuffle,batch=9,seed=3",
		"shuffle,batch=9,tail=pad,world=3,rank=2",	  "block,batch=8,block=5,seed=1",
		"block,batch=8,block=5,tail=pad,seed=2",	  "random,batch=6,seed=4",
		"window,window=11,stride=4",			  "seq,batch=7,world=2,rank=1",
	};
	uint64_t whole[64], part[64];

	for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) {
		zs_sampler *s = make(specs[k], 50);
		for (uint64_t step = 0; step < zs_steps(s); step++) {
			int64_t n = zs_batch(s, 2, step, whole);
			cr_assert_gt(n, 0);
			for (uint32_t from = 0; from <= (uint32_t)n + 1; from++)
				for (uint32_t count = 0; count <= 4; count++) {
					int64_t got = zs_batch_span(s, 2, step, from, count, part);
					int64_t want = from >= n ? 0
							: (n - from < count ? n - from : count);
					cr_assert_eq(got, want, "%s step %llu [%u, +%u)", specs[k],
						     (unsigned long long)step, from, count);
					cr_assert_arr_eq(part, whole + from, (size_t)got * 8,
							 "%s step %llu [%u, +%u)", specs[k],
							 (unsigned long long)step, from, count);
				}
		}
		cr_assert_eq(zs_batch_span(s, 2, zs_steps(s), 0, 1, part), ZS_EINVAL_SPEC);
		zs_sampler_destroy(s);
	}
}

/* Elastic resume: W1 ranks (batch b1) hand out the first @stop steps of an
 * epoch and save the position after them; W2 ranks (batch b2) go on with
 * from=P. With tail=keep every id of the epoch is handed out exactly once. */
static void resume_once(const char *order, uint64_t n, uint32_t w1, uint32_t b1, uint32_t w2,
			uint32_t b2, uint64_t stop)
{
	uint8_t *seen = calloc(n, 1);
	uint64_t *ids = malloc((size_t)(b1 > b2 ? b1 : b2) * sizeof *ids + 8);
	uint64_t pos = 0;
	char text[128];

	cr_assert(seen && ids);
	for (uint32_t r = 0; r < w1; r++) {
		snprintf(text, sizeof text, "%s,seed=5,batch=%u,world=%u,rank=%u,tail=keep", order, b1,
			 w1, r);
		zs_sampler *s = make(text, n);
		for (uint64_t k = 0; k < stop; k++) {
			int64_t got = zs_batch(s, 3, k, ids);
			cr_assert_geq(got, 0);
			for (int64_t j = 0; j < got; j++)
				seen[ids[j]]++;
		}
		uint64_t p = stop ? zs_position_after(s, stop - 1) : 0;
		cr_assert(r == 0 || p == pos, "ranks disagree on the position");
		pos = p;
		zs_sampler_destroy(s);
	}
	for (uint32_t r = 0; pos < n && r < w2; r++) {
		snprintf(text, sizeof text, "%s,seed=5,batch=%u,world=%u,rank=%u,tail=keep,from=%llu",
			 order, b2, w2, r, (unsigned long long)pos);
		zs_sampler *s = make(text, n);
		for (uint64_t k = 0; k < zs_steps(s); k++) {
			int64_t got = zs_batch(s, 3, k, ids);
			cr_assert_geq(got, 0);
			for (int64_t j = 0; j < got; j++)
				seen[ids[j]]++;
		}
		cr_assert_eq(zs_position_after(s, zs_steps(s) - 1), n);
		zs_sampler_destroy(s);
	}
	for (uint64_t i = 0; i < n; i++)
		cr_assert_eq(seen[i], 1, "%s n=%llu %u x %u -> %u x %u, stop %llu (from=%llu): id %llu "
			     "handed out %u times", order, (unsigned long long)n, w1, b1, w2, b2,
			     (unsigned long long)stop, (unsigned long long)pos,
			     (unsigned long long)i, seen[i]);
	free(seen);
	free(ids);
}

Test(order, resume_on_another_world_size_hands_out_the_epoch_once, .timeout = 120)
{
	static const uint64_t ns[] = {1, 7, 1000, 65537};
	static const uint32_t worlds[][2] = {{8, 6}, {3, 5}, {1, 4}, {4, 1}};
	static const char *orders[] = {"shuffle", "seq", "block,block=64"};

	for (size_t o = 0; o < 3; o++)
		for (size_t i = 0; i < 4; i++)
			for (size_t w = 0; w < 4; w++) {
				uint32_t w1 = worlds[w][0], w2 = worlds[w][1], b1 = 3, b2 = 5;
				uint64_t g = (uint64_t)w1 * b1, steps = (ns[i] + g - 1) / g;
				for (uint64_t stop = 0; stop <= steps; stop++) {
					/* every stopping step for 1000 records; a few others */
					if (ns[i] > 1000 && stop > 2 && stop != steps / 2 &&
					    stop + 1 < steps)
						continue;
					resume_once(orders[o], ns[i], w1, b1, w2, b2, stop);
				}
			}
}

/* A from= batch that is a batch of the original (same position, same batch
 * x world) has its seed; from= beyond the epoch and on window are refused. */
Test(order, from_keeps_seeds_where_batches_coincide)
{
	zs_sampler *a = make("shuffle,seed=9,batch=4,world=2", 100);
	zs_sampler *b = make("shuffle,seed=9,batch=4,world=2,from=24", 100);
	uint64_t x[4], y[4];

	cr_assert_eq(zs_steps(b), zs_steps(a) - 3);
	cr_assert_eq(zs_batch_seed(b, 2, 0), zs_batch_seed(a, 2, 3));
	cr_assert_eq(zs_batch(a, 2, 3, x), 4);
	cr_assert_eq(zs_batch(b, 2, 0, y), 4);
	cr_assert_arr_eq(x, y, sizeof x);
	cr_assert_eq(zs_position_after(b, 0), 32);
	zs_sampler_destroy(a);
	zs_sampler_destroy(b);
	zs_spec spec;
	cr_assert_eq(zs_spec_parse("window,window=4,from=3", &spec), ZS_EINVAL_SPEC);
	cr_assert_eq(zs_spec_parse("seq,from=101", &spec), 0);
	cr_assert_eq(zs_sampler_create(&a, &spec, 100), ZS_EINVAL_SPEC);
	cr_assert_not_null(strstr(zs_errmsg(), "past the epoch"), "%s", zs_errmsg());
}

/* A job that saved its position after an epoch's last step resumes with
 * from= the end (or where what is left makes no full batch, tail=drop):
 * an epoch with no steps, not an error; from=0 of too few records still is. */
Test(order, from_the_end_is_an_empty_epoch)
{
	zs_sampler *s = make("shuffle,seed=9,batch=4,world=2,from=100", 100);
	uint64_t ids[4];

	cr_assert_eq(zs_steps(s), 0);
	cr_assert_eq(zs_batch(s, 0, 0, ids), ZS_EINVAL_SPEC);
	zs_sampler_destroy(s);
	s = make("seq,batch=4,world=2,from=95", 100);
	cr_assert_eq(zs_steps(s), 0);
	zs_sampler_destroy(s);
	s = make("seq,batch=4,world=2,tail=keep,from=95", 100);
	cr_assert_eq(zs_steps(s), 1);
	zs_sampler_destroy(s);
	zs_spec spec;
	cr_assert_eq(zs_spec_parse("seq,batch=8", &spec), 0);
	cr_assert_eq(zs_sampler_create(&s, &spec, 5), ZS_EINVAL_SPEC);
}
