/*
 * Description: the keyed permutation (sampler/feistel.c): a bijection of
 * [0, n) for every n tried (1, 2, 3, 7, 2^k - 1, 2^k, 2^k + 1, 10^6 + 3),
 * inverted exactly by zs_perm_index, different for different keys, with
 * fixed outputs (test vectors) and a uniform position for any element.
 */
#include "sampler_i.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

TestSuite(feistel);

static void is_permutation(uint64_t n, uint64_t key)
{
	zs_perm p;
	uint8_t *seen = calloc(n, 1);
	cr_assert_not_null(seen);
	zs_perm_init(&p, n, key);
	for (uint64_t i = 0; i < n; i++) {
		uint64_t x = zs_perm_at(&p, i);
		cr_assert_lt(x, n, "n=%llu: position %llu gives %llu", (unsigned long long)n,
			     (unsigned long long)i, (unsigned long long)x);
		cr_assert_eq(seen[x], 0, "n=%llu: %llu appears twice", (unsigned long long)n,
			     (unsigned long long)x);
		seen[x] = 1;
		cr_assert_eq(zs_perm_index(&p, x), i, "n=%llu: inverse of %llu",
			     (unsigned long long)n, (unsigned long long)x);
	}
	free(seen);
}

Test(feistel, bijection_for_small_and_awkward_n)
{
	for (uint64_t n = 1; n <= 300; n++)
		is_permutation(n, n * 7919);
	for (unsigned k = 9; k <= 20; k++) {
		uint64_t p2 = UINT64_C(1) << k;
		is_permutation(p2 - 1, k);
		is_permutation(p2, k);
		is_permutation(p2 + 1, k);
	}
}

Test(feistel, bijection_for_a_million_and_three, .timeout = 60)
{
	is_permutation(1000003, 42);
}

Test(feistel, large_n_stays_in_range_and_inverts)
{
	uint64_t ns[] = {UINT64_C(1) << 40, (UINT64_C(1) << 48) - 3, 999999999989ULL};
	for (size_t k = 0; k < 3; k++) {
		zs_perm p;
		zs_perm_init(&p, ns[k], 5);
		for (uint64_t i = 0; i < 20000; i++) {
			uint64_t pos = i * 2654435761ULL % ns[k], x = zs_perm_at(&p, pos);
			cr_assert_lt(x, ns[k]);
			cr_assert_eq(zs_perm_index(&p, x), pos);
		}
	}
}

Test(feistel, keys_give_different_orders)
{
	zs_perm a, b;
	int same = 0;
	zs_perm_init(&a, 1000, 1);
	zs_perm_init(&b, 1000, 2);
	for (uint64_t i = 0; i < 1000; i++)
		same += zs_perm_at(&a, i) == zs_perm_at(&b, i);
	cr_assert_lt(same, 10, "%d of 1000 positions agree", same);
	/* and no key is the identity */
	zs_perm_init(&a, 1000, 0);
	same = 0;
	for (uint64_t i = 0; i < 1000; i++)
		same += zs_perm_at(&a, i) == i;
	cr_assert_lt(same, 10);
}

/* Outputs fixed by format 1: a change here changes every shuffle. */
Test(feistel, test_vectors)
{
	static const struct {
		uint64_t n, key;
		uint64_t want[8];
	} v[] = {
#include "vectors_feistel.inc"
	};
	for (size_t k = 0; k < sizeof v / sizeof *v; k++) {
		zs_perm p;
		zs_perm_init(&p, v[k].n, v[k].key);
		for (uint64_t i = 0; i < 8 && i < v[k].n; i++)
			cr_assert_eq(zs_perm_at(&p, i), v[k].want[i],
				     "n=%llu key=%llu position %llu: %llu, want %llu",
				     (unsigned long long)v[k].n, (unsigned long long)v[k].key,
				     (unsigned long long)i,
				     (unsigned long long)zs_perm_at(&p, i),
				     (unsigned long long)v[k].want[i]);
	}
}

/* Chi-square: over many keys, element 0 lands in each of n positions
 * equally often (n = 10, 9 degrees of freedom; 27.88 is the 0.1% point). */
Test(feistel, position_of_an_element_is_uniform)
{
	const int n = 10, trials = 50000;
	int count[10] = {0};
	for (int t = 0; t < trials; t++) {
		zs_perm p;
		zs_perm_init(&p, n, zs_mix64((uint64_t)t));
		count[zs_perm_index(&p, 0)]++;
	}
	double expect = (double)trials / n, chi2 = 0;
	for (int i = 0; i < n; i++)
		chi2 += (count[i] - expect) * (count[i] - expect) / expect;
	cr_assert_lt(chi2, 27.88, "chi-square %.2f", chi2);
	/* and pairs: element 0 before element 1 about half the time */
	int before = 0;
	for (int t = 0; t < trials; t++) {
		zs_perm p;
		zs_perm_init(&p, 1000, zs_mix64((uint64_t)t + 99));
		before += zs_perm_index(&p, 0) < zs_perm_index(&p, 1);
	}
	cr_assert_lt(abs(before - trials / 2), 4 * 112, "0 before 1 in %d of %d", before, trials);
}
