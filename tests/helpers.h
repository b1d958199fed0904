/*
 * helpers.h - shared helpers for the Criterion tests (prefix t_).
 *
 * Every test works in a fresh directory under /tmp, removed by t_cleanup().
 * Record contents are a pure function of (seed, id), so any reader can check
 * any record without keeping a copy.
 */
#ifndef ZR_TEST_HELPERS_H
#define ZR_TEST_HELPERS_H

#include "zrecord.h"

#include <criterion/criterion.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Time limits for slow tests; a valgrind build scales them. */
#ifndef T_TIMEOUT_SCALE
#define T_TIMEOUT_SCALE 1
#endif
#define T_TIMEOUT(s) ((s) * T_TIMEOUT_SCALE)

static char t_dir[256];  /* the test's scratch directory */
static char t_ds[300];   /* a dataset path inside it */

static inline int t_rm_entry(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)flag, (void)f;
	return remove(p);
}

static inline void t_rmrf(const char *path)
{
	nftw(path, t_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static inline void t_setup(void)
{
	snprintf(t_dir, sizeof t_dir, "/tmp/zrtest-XXXXXX");
	cr_assert_not_null(mkdtemp(t_dir), "mkdtemp failed");
	snprintf(t_ds, sizeof t_ds, "%s/ds", t_dir);
}

static inline void t_cleanup(void)
{
	if (t_dir[0])
		t_rmrf(t_dir);
}

static inline uint64_t t_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* Length of record @id under @seed: 0..max-1, a few lengths 0 on purpose. */
static inline size_t t_len(uint64_t seed, uint64_t id, size_t max)
{
	return (size_t)(t_mix(seed * 1000003 + id) % max);
}

/* Fill @p with the bytes of record @id under @seed (compressible half). */
static inline void t_fill(void *p, size_t n, uint64_t seed, uint64_t id)
{
	uint8_t *b = p;
	uint64_t s = t_mix(seed ^ (id << 20));

	for (size_t i = 0; i < n; i++) {
		if (i % 8 == 0)
			s = t_mix(s);
		b[i] = (i & 64) ? (uint8_t)('a' + (s >> (8 * (i % 8))) % 4) : (uint8_t)(s >> (8 * (i % 8)));
	}
}

/* Does @p hold record @id under @seed? */
static inline int t_check(const void *p, size_t n, uint64_t seed, uint64_t id)
{
	uint8_t *want = malloc(n ? n : 1);
	int ok;

	t_fill(want, n, seed, id);
	ok = n == 0 || memcmp(p, want, n) == 0;
	free(want);
	return ok;
}

/* One-field or two-field datasets used all over the tests. */
static inline void t_create1(const char *dir, zr_compress c, uint32_t chunk_size)
{
	zr_field_spec f = {.name = "data", .dtype = ZR_BYTES, .compress = c};
	zr_create_opts o = {.chunk_size = chunk_size};
	int rc = zr_create(dir, &f, 1, &o);
	cr_assert_eq(rc, 0, "zr_create: %s", zr_errmsg(NULL));
}

static inline zr_dataset *t_open(const char *dir, unsigned flags)
{
	zr_dataset *ds = NULL;
	int rc = zr_open(&ds, dir, flags);
	cr_assert_eq(rc, 0, "zr_open(%s): %d %s", dir, rc, zr_errmsg(NULL));
	return ds;
}

/* Append records [from, to) of @seed with lengths t_len(seed, id, max). */
static inline void t_append_range(zr_dataset *ds, uint64_t seed, uint64_t from, uint64_t to,
				  size_t max)
{
	uint8_t *buf = malloc(max);
	for (uint64_t id = from; id < to; id++) {
		size_t n = t_len(seed, id, max);
		uint64_t got;
		t_fill(buf, n, seed, id);
		zr_value v = {buf, n};
		int rc = zr_append(ds, &v, &got);
		cr_assert_eq(rc, 0, "append %llu: %s", (unsigned long long)id, zr_errmsg(ds));
		cr_assert_eq(got, id);
	}
	free(buf);
}

/* Check records [from, to) of field 0 against @seed, through zr_gather. */
static inline void t_check_range(zr_dataset *ds, uint64_t seed, uint64_t from, uint64_t to,
				 size_t max)
{
	for (uint64_t id = from; id < to; id++) {
		zr_batch *b;
		size_t n;
		int rc = zr_gather(ds, 0, &id, 1, &b);
		cr_assert_eq(rc, 0, "gather %llu: %s", (unsigned long long)id, zr_errmsg(ds));
		const zr_slice *s = zr_batch_records(b, &n);
		cr_assert_eq(n, 1);
		cr_assert_not_null(s[0].data, "record %llu missing", (unsigned long long)id);
		cr_assert_eq(s[0].len, t_len(seed, id, max), "record %llu length",
			     (unsigned long long)id);
		cr_assert(t_check(s[0].data, s[0].len, seed, id), "record %llu bytes differ",
			  (unsigned long long)id);
		zr_batch_release(b);
	}
}

static inline off_t t_file_size(const char *dir, const char *rel)
{
	char p[512];
	struct stat st;
	snprintf(p, sizeof p, "%s/%s", dir, rel);
	return stat(p, &st) == 0 ? st.st_size : -1;
}

#endif
