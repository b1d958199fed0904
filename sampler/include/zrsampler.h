/**
 * @file zrsampler.h
 * @brief libzrsampler: which record ids make up batch k of epoch e for rank r.
 *
 * Index orders over [lo, hi) computed in O(1) memory and O(batch) time per
 * batch: no state proportional to the number of records, no replay of
 * earlier batches, no communication between ranks that share a seed.
 *
 * Orders (zs_order):
 *  - seq      lo, lo+1, ..., hi-1 every epoch;
 *  - shuffle  a permutation of the range per epoch (keyed Feistel network
 *             with cycle walking), without replacement;
 *  - block    a two-level shuffle: blocks of `block` consecutive ids in a
 *             permuted order, ids permuted within each block;
 *  - random   ids drawn uniformly with replacement;
 *  - window   `window` consecutive ids starting `stride` further each step,
 *             wrapping from hi-1 to lo (a circular index space).
 *
 * Epochs and ranks: for seq, shuffle, block and random, an epoch is one
 * pass of M = hi - lo positions. Step k of an epoch covers the positions
 * [k*G, (k+1)*G) of that epoch's order, G = batch * world, and rank r takes
 * the r-th slice of `batch` of them; so within an epoch the ranks' ids are
 * disjoint and every rank has the same number of steps. The last, partial
 * global batch (M mod G positions) follows the tail policy:
 *  - drop (default): it is not used; every batch has exactly `batch` ids;
 *  - keep: it is split among the ranks into contiguous parts whose sizes
 *          differ by at most one (a rank's last batch may be short, or empty
 *          when fewer positions than ranks remain);
 *  - pad:  it is completed with positions from the start of the same epoch's
 *          order, so every batch is full and a few ids repeat.
 * With from=P, step k covers positions [P + k*G, P + (k+1)*G) instead (the
 * epoch's remaining M - P positions, tail policy as above): a job that
 * handed out positions [0, P) on one world size resumes on another and
 * every position is handed out once (tail=keep). P = M (a job that stopped
 * after the last step) makes an epoch of no steps, as does a rest that
 * makes no full batch under tail=drop; P > M is refused.
 * For window, step k of rank r is the window starting at
 * lo + ((e * S + k) * world + r) * stride mod M, where S = steps per epoch =
 * ceil(M / (stride * world)) (at least 1): consecutive epochs keep sliding.
 *
 * All functions are thread-safe: a zs_sampler is immutable once created.
 * Results are identical on every platform and release of format 1.
 */
#ifndef ZRSAMPLER_H
#define ZRSAMPLER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(ZS_BUILDING_LIBRARY)
#define ZS_API __attribute__((visibility("default")))
#else
#define ZS_API
#endif

/** Malformed or out-of-range specification (see zs_errmsg()). */
#define ZS_EINVAL_SPEC (-30900)

/** Longest spec string accepted or produced, without the NUL. */
#define ZS_SPEC_MAX 255
/** Bounds of spec numbers. */
#define ZS_BATCH_MAX (UINT32_C(1) << 24)
#define ZS_WORLD_MAX 65535u
#define ZS_INDEX_MAX (UINT64_C(1) << 48)   /**< bound of lo, hi, window, stride, block, N */
#define ZS_EPOCH_MAX (UINT64_C(1) << 40)
/** Feistel rounds of the shuffle (a property of the format: never changes). */
#define ZS_ROUNDS 6

typedef enum zs_order { ZS_SEQ, ZS_WINDOW, ZS_RANDOM, ZS_SHUFFLE, ZS_BLOCK } zs_order;
typedef enum zs_tail { ZS_DROP, ZS_KEEP, ZS_PAD } zs_tail;

/**
 * A parsed spec. Zero-initialise, then set fields; zs_spec_parse() fills
 * every field (defaults for the keys not given).
 */
typedef struct zs_spec {
	zs_order order;
	uint64_t seed;     /**< default 0 */
	uint32_t batch;    /**< ids per batch, 1..ZS_BATCH_MAX; default 1 (window: = window) */
	uint32_t rank;     /**< 0..world-1, default 0 */
	uint32_t world;    /**< 1..ZS_WORLD_MAX, default 1 */
	uint64_t lo, hi;   /**< id range [lo, hi); hi 0 = the dataset's length */
	zs_tail tail;      /**< default ZS_DROP */
	uint64_t window;   /**< window: ids per window */
	uint64_t stride;   /**< window: step between windows; default = window */
	uint64_t block;    /**< block: ids per block, default 4096 */
	uint64_t from;     /**< the position of the epoch's order step 0 starts at (a resume
			    *   on another world size); not for window; default 0 */
} zs_spec;

/**
 * Parse a spec: `ORDER[,KEY=VALUE]...` with ORDER one of seq, window,
 * random, shuffle, block and KEY one of seed, batch, rank, world, lo, hi,
 * tail (drop|keep|pad), window, stride, block, from. Numbers are decimal without
 * leading zeros. Keys may come in any order, at most once each, and only
 * where they mean something (window/stride for window, block for block).
 * Only a-z, 0-9, ',' and '=' can appear, so a spec is a safe file name.
 * @param[in] s   the text (need not be canonical)
 * @param[out] out the spec, valid only on success
 * @return 0, or ZS_EINVAL_SPEC with the reason in zs_errmsg()
 */
ZS_API int zs_spec_parse(const char *s, zs_spec *out);

/**
 * Print @p spec canonically: the order, then the keys that differ from
 * their defaults in the fixed order seed, batch, rank, world, lo, hi, tail,
 * window, stride, block. parse(format(x)) == x, and two specs that parse to
 * the same zs_spec format identically.
 * @return the length written (< cap), or ZS_EINVAL_SPEC if @p spec is
 *         invalid, or -ENOBUFS if @p cap is too small (ZS_SPEC_MAX + 1 is enough)
 */
ZS_API int zs_spec_format(const zs_spec *spec, char *buf, size_t cap);

/**
 * Whether the @p len bytes at @p name are one of the spec's KEYs (seed,
 * batch, rank, ...): for callers that must tell a spec's KEY=VALUE pieces
 * from other options of a comma-separated list.
 * @return 1 or 0
 */
ZS_API int zs_spec_is_key(const char *name, size_t len);

/** The message of the last failing call in this thread (static buffer). */
ZS_API const char *zs_errmsg(void);

/** An order bound to a dataset length; immutable, O(1) in size. */
typedef struct zs_sampler zs_sampler;

/**
 * Bind @p spec to a dataset of @p n records (hi = 0 becomes n; hi > n or an
 * empty range is an error).
 * @param[out] out the sampler; free with zs_sampler_destroy()
 * @return 0, ZS_EINVAL_SPEC, or -ENOMEM
 */
ZS_API int zs_sampler_create(zs_sampler **out, const zs_spec *spec, uint64_t n);
ZS_API void zs_sampler_destroy(zs_sampler *s);
/** The spec, with hi resolved. */
ZS_API const zs_spec *zs_sampler_spec(const zs_sampler *s);

/** Batches (steps) per epoch for each rank; the same for every rank. */
ZS_API uint64_t zs_steps(const zs_sampler *s);
/** Ids in batch @p step of every epoch for this rank (batch sizes do not depend on the epoch). */
ZS_API uint32_t zs_batch_size(const zs_sampler *s, uint64_t step);
/** The largest zs_batch_size() of any step: a buffer of this many ids always suffices. */
ZS_API uint32_t zs_batch_max(const zs_sampler *s);

/**
 * The ids of batch @p step of epoch @p epoch for this sampler's rank, in
 * order, computed directly in O(batch) time.
 * @param[out] ids at least zs_batch_size(s, step) entries
 * @return the number of ids written, or ZS_EINVAL_SPEC if step >= zs_steps()
 *         or epoch > ZS_EPOCH_MAX
 */
ZS_API int64_t zs_batch(const zs_sampler *s, uint64_t epoch, uint64_t step, uint64_t *ids);
/**
 * Ids @p from .. @p from + @p count - 1 of batch @p step of @p epoch (as
 * zs_batch() gives them, cut to the batch), in O(@p count) time: a part of
 * a batch without the rest.
 * @param[out] ids at least @p count entries
 * @return the number written, or ZS_EINVAL_SPEC as zs_batch()
 */
ZS_API int64_t zs_batch_span(const zs_sampler *s, uint64_t epoch, uint64_t step, uint32_t from,
			     uint32_t count, uint64_t *ids);

/** Seed for augmenting batch @p step of @p epoch: equal on every rank, a function of (seed,
 *  epoch, the batch's first position in the epoch's order, batch x world), so a batch of a
 *  from= spec that is a batch of the original has the original's seed. */
ZS_API uint64_t zs_batch_seed(const zs_sampler *s, uint64_t epoch, uint64_t step);
/** The position of the epoch's order after step @p step of every rank (at most the epoch's
 *  length): what a job saves to resume with from= on any world size, every position before
 *  it handed out. */
ZS_API uint64_t zs_position_after(const zs_sampler *s, uint64_t step);

/** Where a training loop is: 32 bytes, saved and restored as such. */
typedef struct zs_state {
	uint64_t seed;
	uint64_t epoch;
	uint64_t step;    /**< the next batch to read */
	uint16_t rank;
	uint16_t world;
	uint32_t check;   /**< set by zs_state_save(); guards zs_state_load() */
} zs_state;

/** The state at the start of epoch @p epoch. */
ZS_API zs_state zs_state_at(const zs_sampler *s, uint64_t epoch);
/**
 * Write the ids of the batch at @p st into @p ids and advance @p st to the
 * next batch (into the next epoch after the last step).
 * @return the number of ids, or ZS_EINVAL_SPEC if @p st does not belong to
 *         this sampler (seed, rank or world differ) or is out of range
 */
ZS_API int64_t zs_next(const zs_sampler *s, zs_state *st, uint64_t *ids);
/** Serialise @p st into 32 little-endian bytes, with a check word. */
ZS_API void zs_state_save(const zs_state *st, uint8_t out[32]);
/** Restore a state saved by zs_state_save(). @return 0 or ZS_EINVAL_SPEC (damaged bytes). */
ZS_API int zs_state_load(zs_state *st, const uint8_t in[32]);

/* ---- the permutation itself, for tools and tests ---- */

/** A keyed pseudo-random permutation of [0, n), O(1) in size. */
typedef struct zs_perm {
	uint64_t n;
	unsigned bits_lo, bits_hi;       /**< the two halves of the Feistel network */
	uint64_t keys[ZS_ROUNDS];
} zs_perm;

/** Key a permutation of [0, n) (n >= 1) from a 64-bit key. */
ZS_API void zs_perm_init(zs_perm *p, uint64_t n, uint64_t key);
/** The element at position @p i < n. Expected cost: under 2 network passes. */
ZS_API uint64_t zs_perm_at(const zs_perm *p, uint64_t i);
/** The position of element @p x < n: zs_perm_at(p, zs_perm_index(p, x)) == x. */
ZS_API uint64_t zs_perm_index(const zs_perm *p, uint64_t x);

#ifdef __cplusplus
}
#endif
#endif /* ZRSAMPLER_H */
