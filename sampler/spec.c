/*
 * spec.c - the textual form of a sampler spec: parse, validate, print.
 *
 * Grammar: ORDER *("," KEY "=" VALUE). The same text names batch directories
 * in the filesystem, so the alphabet is a-z 0-9 ',' '=' only (no '/', no
 * '.', no spaces), the length is bounded by ZS_SPEC_MAX, every number is
 * decimal without leading zeros and range-checked, and each key may appear
 * once. Printing is canonical: defaults are left out and keys come in one
 * fixed order, so one spec has one name.
 */
#include "sampler_i.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char errmsg[256];

int zs_err(int code, const char *fmt, ...)
{
	char buf[sizeof errmsg];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	memcpy(errmsg, buf, sizeof buf);
	return code;
}

const char *zs_errmsg(void)
{
	return errmsg;
}

static const char *const order_names[] = {
	[ZS_SEQ] = "seq", [ZS_WINDOW] = "window", [ZS_RANDOM] = "random",
	[ZS_SHUFFLE] = "shuffle", [ZS_BLOCK] = "block",
};
static const char *const tail_names[] = {[ZS_DROP] = "drop", [ZS_KEEP] = "keep", [ZS_PAD] = "pad"};

#define BLOCK_DEFAULT 4096

enum key {
	K_SEED, K_BATCH, K_RANK, K_WORLD, K_LO, K_HI, K_TAIL, K_WINDOW, K_STRIDE, K_BLOCK, K_FROM,
	K_COUNT
};
static const char *const key_names[K_COUNT] = {
	"seed", "batch", "rank", "world", "lo", "hi", "tail", "window", "stride", "block", "from",
};

static const char *lookup(const char *const *names, size_t n, const char *s, size_t len, int *out)
{
	for (size_t i = 0; i < n; i++)
		if (names[i] && strlen(names[i]) == len && memcmp(names[i], s, len) == 0) {
			*out = (int)i;
			return names[i];
		}
	return NULL;
}

int zs_spec_is_key(const char *name, size_t len)
{
	int k;

	return lookup(key_names, K_COUNT, name, len, &k) != NULL;
}

/* A decimal number in [lo, hi] without sign or leading zeros. */
static int number(const char *key, const char *s, size_t len, uint64_t lo, uint64_t hi,
		  uint64_t *out)
{
	uint64_t v = 0;

	if (len == 0 || (len > 1 && s[0] == '0'))
		return zs_err(ZS_EINVAL_SPEC, "%s: '%.*s' is not a decimal number without leading zeros",
			      key, (int)len, s);
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return zs_err(ZS_EINVAL_SPEC, "%s: '%.*s' is not a number", key, (int)len, s);
		if (v > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
			return zs_err(ZS_EINVAL_SPEC, "%s: '%.*s' is out of range %llu..%llu", key,
				      (int)len, s, (unsigned long long)lo, (unsigned long long)hi);
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v < lo || v > hi)
		return zs_err(ZS_EINVAL_SPEC, "%s: %llu is out of range %llu..%llu", key,
			      (unsigned long long)v, (unsigned long long)lo, (unsigned long long)hi);
	*out = v;
	return 0;
}

/* Cross-field rules, shared by parse, format and zs_sampler_create(). */
static int validate(const zs_spec *s)
{
	if ((unsigned)s->order > ZS_BLOCK || (unsigned)s->tail > ZS_PAD)
		return zs_err(ZS_EINVAL_SPEC, "unknown order or tail policy");
	if (s->world < 1 || s->world > ZS_WORLD_MAX)
		return zs_err(ZS_EINVAL_SPEC, "world: %u is out of range 1..%u", s->world,
			      ZS_WORLD_MAX);
	if (s->rank >= s->world)
		return zs_err(ZS_EINVAL_SPEC, "rank %u is not below world %u", s->rank, s->world);
	if (s->lo > ZS_INDEX_MAX || s->hi > ZS_INDEX_MAX)
		return zs_err(ZS_EINVAL_SPEC, "lo and hi must not exceed %llu",
			      (unsigned long long)ZS_INDEX_MAX);
	if (s->hi && s->lo >= s->hi)
		return zs_err(ZS_EINVAL_SPEC, "the range lo=%llu..hi=%llu is empty",
			      (unsigned long long)s->lo, (unsigned long long)s->hi);
	if (s->order == ZS_WINDOW) {
		if (s->window < 1 || s->window > ZS_BATCH_MAX)
			return zs_err(ZS_EINVAL_SPEC, "window: needs window=W with W in 1..%u",
				      ZS_BATCH_MAX);
		if (s->stride < 1 || s->stride > ZS_INDEX_MAX)
			return zs_err(ZS_EINVAL_SPEC, "stride: out of range 1..%llu",
				      (unsigned long long)ZS_INDEX_MAX);
		if (s->batch != s->window || s->tail != ZS_DROP)
			return zs_err(ZS_EINVAL_SPEC,
				      "window: a batch is one window (no batch= or tail=)");
		if (s->from)
			return zs_err(ZS_EINVAL_SPEC,
				      "window: windows slide on, epoch after epoch: there is no "
				      "position to start from (start at a step of an epoch)");
	} else if (s->window || s->stride) {
		return zs_err(ZS_EINVAL_SPEC, "window= and stride= belong to the window order");
	}
	if (s->from > ZS_INDEX_MAX)
		return zs_err(ZS_EINVAL_SPEC, "from must not exceed %llu",
			      (unsigned long long)ZS_INDEX_MAX);
	if (s->batch < 1 || s->batch > ZS_BATCH_MAX)
		return zs_err(ZS_EINVAL_SPEC, "batch: %u is out of range 1..%u", s->batch,
			      ZS_BATCH_MAX);
	if (s->order == ZS_BLOCK) {
		if (s->block < 1 || s->block > ZS_INDEX_MAX)
			return zs_err(ZS_EINVAL_SPEC, "block: out of range 1..%llu",
				      (unsigned long long)ZS_INDEX_MAX);
	} else if (s->block) {
		return zs_err(ZS_EINVAL_SPEC, "block= belongs to the block order");
	}
	return 0;
}

int zs_spec_parse(const char *text, zs_spec *out)
{
	zs_spec s = {.batch = 1, .world = 1};
	uint64_t v[K_COUNT] = {0};
	bool given[K_COUNT] = {false};
	const char *p = text, *end;
	size_t len;
	int order, tail = ZS_DROP;

	if (!text)
		return zs_err(ZS_EINVAL_SPEC, "no spec");
	len = strlen(text);
	if (len == 0 || len > ZS_SPEC_MAX)
		return zs_err(ZS_EINVAL_SPEC, "a spec is 1..%d characters", ZS_SPEC_MAX);
	for (size_t i = 0; i < len; i++) {
		char c = text[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == ',' || c == '='))
			return zs_err(ZS_EINVAL_SPEC,
				      "character %zu ('%c') is not one of a-z 0-9 , =", i + 1,
				      c >= 0x20 && c < 0x7f ? c : '?');
	}
	end = strchr(p, ',');
	if (!end)
		end = p + len;
	if (!lookup(order_names, 5, p, (size_t)(end - p), &order))
		return zs_err(ZS_EINVAL_SPEC,
			      "unknown order '%.*s' (seq, window, random, shuffle, block)",
			      (int)(end - p), p);
	s.order = (zs_order)order;
	while (*end) {
		const char *item = end + 1, *eq;
		int k;
		end = strchr(item, ',');
		if (!end)
			end = item + strlen(item);
		eq = memchr(item, '=', (size_t)(end - item));
		if (!eq)
			return zs_err(ZS_EINVAL_SPEC, "'%.*s' is not KEY=VALUE", (int)(end - item),
				      item);
		if (!lookup(key_names, K_COUNT, item, (size_t)(eq - item), &k))
			return zs_err(ZS_EINVAL_SPEC,
				      "unknown key '%.*s' (seed batch rank world lo hi tail window stride block)",
				      (int)(eq - item), item);
		if (given[k])
			return zs_err(ZS_EINVAL_SPEC, "%s is given twice", key_names[k]);
		given[k] = true;
		eq++;
		if (k == K_TAIL) {
			if (!lookup(tail_names, 3, eq, (size_t)(end - eq), &tail))
				return zs_err(ZS_EINVAL_SPEC, "tail: '%.*s' is not drop, keep or pad",
					      (int)(end - eq), eq);
			continue;
		}
		uint64_t hi = k == K_SEED ? UINT64_MAX
			      : k == K_BATCH ? ZS_BATCH_MAX
			      : k == K_WORLD ? ZS_WORLD_MAX
			      : k == K_RANK ? ZS_WORLD_MAX - 1
			      : k == K_WINDOW ? ZS_BATCH_MAX
					      : ZS_INDEX_MAX;
		uint64_t lo = (k == K_SEED || k == K_RANK || k == K_LO || k == K_FROM) ? 0 : 1;
		int rc = number(key_names[k], eq, (size_t)(end - eq), lo, hi, &v[k]);
		if (rc < 0)
			return rc;
	}
	s.seed = v[K_SEED];
	if (given[K_BATCH])
		s.batch = (uint32_t)v[K_BATCH];
	s.rank = (uint32_t)v[K_RANK];
	if (given[K_WORLD])
		s.world = (uint32_t)v[K_WORLD];
	s.lo = v[K_LO];
	s.hi = v[K_HI];
	s.tail = (zs_tail)tail;
	s.window = v[K_WINDOW];
	s.stride = given[K_STRIDE] ? v[K_STRIDE] : v[K_WINDOW];
	s.block = v[K_BLOCK];
	s.from = v[K_FROM];
	if (s.order == ZS_WINDOW) {
		if (given[K_BATCH] || given[K_TAIL])
			return zs_err(ZS_EINVAL_SPEC,
				      "window: a batch is one window (no batch= or tail=)");
		s.batch = (uint32_t)s.window;
	}
	if (s.order == ZS_BLOCK && !given[K_BLOCK])
		s.block = BLOCK_DEFAULT;
	if (validate(&s) < 0)
		return ZS_EINVAL_SPEC;
	*out = s;
	return 0;
}

int zs_spec_format(const zs_spec *s, char *buf, size_t cap)
{
	char tmp[ZS_SPEC_MAX + 64];
	size_t n;

	if (validate(s) < 0)
		return ZS_EINVAL_SPEC;
	n = (size_t)snprintf(tmp, sizeof tmp, "%s", order_names[s->order]);
#define ADD(cond, fmt, val)                                                                        \
	if (cond)                                                                                  \
		n += (size_t)snprintf(tmp + n, sizeof tmp - n, fmt, val)
	ADD(s->seed, ",seed=%llu", (unsigned long long)s->seed);
	ADD(s->order != ZS_WINDOW && s->batch != 1, ",batch=%u", s->batch);
	ADD(s->rank, ",rank=%u", s->rank);
	ADD(s->world != 1, ",world=%u", s->world);
	ADD(s->lo, ",lo=%llu", (unsigned long long)s->lo);
	ADD(s->hi, ",hi=%llu", (unsigned long long)s->hi);
	ADD(s->tail != ZS_DROP, ",tail=%s", tail_names[s->tail]);
	ADD(s->order == ZS_WINDOW, ",window=%llu", (unsigned long long)s->window);
	ADD(s->order == ZS_WINDOW && s->stride != s->window, ",stride=%llu",
	    (unsigned long long)s->stride);
	ADD(s->order == ZS_BLOCK && s->block != BLOCK_DEFAULT, ",block=%llu",
	    (unsigned long long)s->block);
	ADD(s->from, ",from=%llu", (unsigned long long)s->from);
#undef ADD
	if (n > ZS_SPEC_MAX)
		return zs_err(ZS_EINVAL_SPEC, "the spec is longer than %d characters", ZS_SPEC_MAX);
	if (n >= cap)
		return zs_err(-ENOBUFS, "buffer of %zu bytes is too small for the spec", cap);
	memcpy(buf, tmp, n + 1);
	return (int)n;
}
