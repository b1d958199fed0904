/*
 * feistel.c - a keyed permutation of [0, n) in O(1) memory.
 *
 * A Feistel network permutes the b-bit integers, b = ceil(log2 n) (at least
 * 2). The input splits into a high part of ceil(b/2) bits and a low part of
 * floor(b/2); each round replaces (A, B) by (B, A ^ F(B)), F truncated to
 * A's width, so the halves swap widths every round and are back in place
 * after the even number of rounds (ZS_ROUNDS = 6). Every round is invertible,
 * hence the network is a permutation of [0, 2^b); the round function is the
 * SplitMix64 finaliser of the half xor a round key.
 *
 * Cycle walking restricts it to [0, n): apply the network again until the
 * value falls below n. Since 2^b < 2n, the expected number of passes is
 * below 2, and walking the inverse network gives the inverse permutation.
 */
#include "sampler_i.h"

static inline uint64_t mask(unsigned bits)
{
	return bits >= 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
}

void zs_perm_init(zs_perm *p, uint64_t n, uint64_t key)
{
	unsigned b = 2;

	while (b < 64 && (UINT64_C(1) << b) < n)
		b++;
	p->n = n;
	p->bits_lo = b / 2;
	p->bits_hi = b - b / 2;
	for (int r = 0; r < ZS_ROUNDS; r++)
		p->keys[r] = zs_mix64(key += ZS_GOLDEN);
}

/* Round r: the half that is not updated, xor round key r, through the
 * SplitMix64 finaliser, truncated to the width of the half it updates.
 * Alternating updates of A and B are the textbook (A, B) -> (B, A ^ F(B))
 * rounds without the swaps, so widths stay put. */
#define ROUND(dst, src, r, m) dst ^= zs_mix64((src) ^ p->keys[r]) & (m)

static inline uint64_t network(const zs_perm *p, uint64_t x)
{
	uint64_t ml = mask(p->bits_lo), mh = mask(p->bits_hi);
	uint64_t a = x >> p->bits_lo, b = x & ml;

	ROUND(a, b, 0, mh);
	ROUND(b, a, 1, ml);
	ROUND(a, b, 2, mh);
	ROUND(b, a, 3, ml);
	ROUND(a, b, 4, mh);
	ROUND(b, a, 5, ml);
	return a << p->bits_lo | b;
}

static inline uint64_t network_inverse(const zs_perm *p, uint64_t x)
{
	uint64_t ml = mask(p->bits_lo), mh = mask(p->bits_hi);
	uint64_t a = x >> p->bits_lo, b = x & ml;

	ROUND(b, a, 5, ml);
	ROUND(a, b, 4, mh);
	ROUND(b, a, 3, ml);
	ROUND(a, b, 2, mh);
	ROUND(b, a, 1, ml);
	ROUND(a, b, 0, mh);
	return a << p->bits_lo | b;
}

_Static_assert(ZS_ROUNDS == 6, "network() spells out six rounds");

uint64_t zs_perm_at(const zs_perm *p, uint64_t i)
{
	uint64_t x = i;

	if (p->n <= 1)
		return 0;
	do
		x = network(p, x);
	while (x >= p->n);
	return x;
}

/* One network pass over v[0..k), in place: a loop without branches over
 * independent values, which the compiler turns into SIMD code where the
 * CPU has 64-bit vector multiplies (one clone per ISA, chosen at load time). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
static void pass(const zs_perm *p, uint64_t *v, uint32_t k)
{
	for (uint32_t i = 0; i < k; i++)
		v[i] = network(p, v[i]);
}

/* Positions first, first+1, ... (mod n): a pass over all of them, then
 * passes over the ones that must walk on (>= n), gathered without branches,
 * until none is left. Expected work: 2^b / n passes per position. */
void zs_perm_span(const zs_perm *p, uint64_t first, uint32_t count, uint64_t add, uint64_t *out)
{
	enum { CHUNK = 256 };
	uint64_t n = p->n, pos = n > 1 ? first % n : 0, v[CHUNK];
	uint32_t idx[CHUNK];

	if (n <= 1) {
		for (uint32_t j = 0; j < count; j++)
			out[j] = add;
		return;
	}
	for (uint32_t j = 0; j < count;) {
		uint32_t k = count - j < CHUNK ? count - j : CHUNK, w = 0;
		for (uint32_t i = 0; i < k; i++) {
			v[i] = pos;
			pos = pos + 1 == n ? 0 : pos + 1;
		}
		pass(p, v, k);
		for (uint32_t i = 0; i < k; i++) {
			out[j + i] = v[i] + add; /* final unless it walks on */
			v[w] = v[i];
			idx[w] = j + i;
			w += v[i] >= n;
		}
		while (w > 0) {
			uint32_t left = 0;
			pass(p, v, w);
			for (uint32_t i = 0; i < w; i++) {
				out[idx[i]] = v[i] + add;
				v[left] = v[i];
				idx[left] = idx[i];
				left += v[i] >= n;
			}
			w = left;
		}
		j += k;
	}
}

uint64_t zs_perm_index(const zs_perm *p, uint64_t x)
{
	uint64_t i = x;

	if (p->n <= 1)
		return 0;
	do
		i = network_inverse(p, i);
	while (i >= p->n);
	return i;
}
