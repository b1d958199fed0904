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

static inline uint64_t network(const zs_perm *p, uint64_t x)
{
	unsigned wa = p->bits_hi, wb = p->bits_lo;
	uint64_t a = x >> wb, b = x & mask(wb);

	for (int r = 0; r < ZS_ROUNDS; r++) {
		uint64_t t = a ^ (zs_mix64(b ^ p->keys[r]) & mask(wa));
		unsigned w = wa;
		a = b;
		b = t;
		wa = wb;
		wb = w;
	}
	return a << wb | b;
}

static inline uint64_t network_inverse(const zs_perm *p, uint64_t x)
{
	unsigned wa = p->bits_hi, wb = p->bits_lo;
	uint64_t a = x >> wb, b = x & mask(wb);

	for (int r = ZS_ROUNDS - 1; r >= 0; r--) {
		/* (a, b) = (B, A ^ F(B)) of the round's input (A, B) */
		uint64_t pa = b ^ (zs_mix64(a ^ p->keys[r]) & mask(wb));
		unsigned w = wa;
		b = a;
		a = pa;
		wa = wb;
		wb = w;
	}
	return a << wb | b;
}

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
