/*
 * Description: rebalance (core/rebalance.c): after modifies and deletes it
 * rewrites only live bytes (utilisation 1.0), keeps every record's contents
 * and missing/empty state, can change the chunk size, refuses read-only
 * handles and uncommitted changes; killed at random instants it leaves the
 * old or the new dataset, complete and verify-clean, never a mixture; it
 * and zr_verify() tell their progress (zr_progress_set()).
 */
#include "helpers.h"
#include "store_i.h"

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>

TestSuite(rebalance, .init = t_setup, .fini = t_cleanup);

#define N 3000

/* Records of @seed, then a third of them rewritten and some deleted; the
 * expected tag of each id (record contents = t_fill(tag, id)) in @tags. */
static void build(zr_compress comp, uint64_t *tags, uint64_t *n_out)
{
	t_create1(t_ds, comp, 256);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	t_append_range(ds, 1, 0, N, 3000);
	cr_assert_eq(zr_commit(ds), 0);
	uint8_t buf[3000];
	uint64_t n = N;
	for (uint64_t id = 0; id < N; id++)
		tags[id] = 1;
	for (uint64_t id = 0; id < N; id += 3) {
		size_t len = t_len(2, id, 3000);
		t_fill(buf, len, 2, id);
		cr_assert_eq(zr_modify(ds, 0, id, (zr_value){buf, len}), 0);
		tags[id] = 2;
	}
	cr_assert_eq(zr_modify(ds, 0, 5, (zr_value){NULL, 0}), 0); /* now missing */
	tags[5] = 0;
	for (uint64_t k = 0; k < 200; k++) {
		uint64_t id = t_mix(k) % n;
		cr_assert_eq(zr_delete(ds, id), 0);
		/* the last record moves into the hole; its tag names its bytes,
		 * which were written for its old id */
		tags[id] = tags[n - 1] >> 8 ? tags[n - 1] : tags[n - 1] | (n - 1) << 8;
		n--;
	}
	cr_assert_eq(zr_commit(ds), 0);
	zr_close(ds);
	*n_out = n;
}

/* Tag layout: low 8 bits = seed (0 = missing), the rest = the id the bytes
 * were written for (0 = this id; a moved record never came from id 0). */
static void check(zr_dataset *ds, const uint64_t *tags, uint64_t n)
{
	cr_assert_eq(zr_length(ds), n, "length %llu, wanted %llu",
		     (unsigned long long)zr_length(ds), (unsigned long long)n);
	for (uint64_t id = 0; id < n; id++) {
		uint64_t seed = tags[id] & 0xff, src = tags[id] >> 8 ? tags[id] >> 8 : id;
		zr_batch *b;
		size_t m;
		cr_assert_eq(zr_gather(ds, 0, &id, 1, &b), 0, "%s", zr_errmsg(ds));
		const zr_slice *s = zr_batch_records(b, &m);
		if (seed == 0) {
			cr_assert_null(s->data, "id %llu should be missing", (unsigned long long)id);
		} else {
			cr_assert_not_null(s->data, "id %llu", (unsigned long long)id);
			cr_assert_eq(s->len, t_len(seed, src, 3000), "id %llu", (unsigned long long)id);
			cr_assert(t_check(s->data, s->len, seed, src), "id %llu",
				  (unsigned long long)id);
		}
		zr_batch_release(b);
	}
}

static void rewrites_live_bytes(zr_compress comp)
{
	static uint64_t tags[N];
	uint64_t n;
	build(comp, tags, &n);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	zr_info before, after;
	cr_assert_eq(zr_info_get(ds, &before), 0);
	cr_assert_lt(before.utilisation, 0.9);
	zr_rebalance_report r;
	cr_assert_eq(zr_rebalance(ds, 0, &r), 0, "%s", zr_errmsg(ds));
	cr_assert_float_eq(r.utilisation_before, before.utilisation, 1e-9);
	cr_assert_float_eq(r.utilisation_after, 1.0, 1e-9);
	cr_assert_lt(r.chunk_bytes_after, r.chunk_bytes_before);
	cr_assert_eq(zr_info_get(ds, &after), 0);
	cr_assert_eq(after.live_bytes, before.live_bytes);
	cr_assert_eq(after.chunk_bytes, after.live_bytes);
	cr_assert_eq(after.chunk_count, (n + 255) / 256);
	check(ds, tags, n); /* the handle reads the new layout */
	/* and can keep writing */
	t_append_range(ds, 9, n, n + 10, 3000);
	cr_assert_eq(zr_commit(ds), 0);
	zr_close(ds);

	ds = t_open(t_ds, ZR_RDONLY);
	cr_assert_eq(zr_length(ds), n + 10);
	t_check_range(ds, 9, n, n + 10, 3000);
	ds->length = n; /* the rebalanced part, as check() wants it */
	check(ds, tags, n);
	ds->length = n + 10;
	cr_assert_eq(zr_verify(ds, NULL, NULL), 0);
	zr_close(ds);
	/* no chunk file is left behind but the live ones */
	char p[400];
	snprintf(p, sizeof p, "%s/chunk/%u.zr", t_ds, after.chunk_count + r.chunks_before + 1);
	cr_assert_neq(access(p, F_OK), 0);
	snprintf(p, sizeof p, "%s/chunk/0.zr", t_ds);
	cr_assert_neq(access(p, F_OK), 0, "old chunk 0 still there");
}

Test(rebalance, rewrites_only_live_bytes_raw, .timeout = T_TIMEOUT(120))
{
	rewrites_live_bytes(ZR_RAW);
}

Test(rebalance, rewrites_only_live_bytes_flate, .timeout = T_TIMEOUT(120))
{
	rewrites_live_bytes(ZR_FLATE);
}

Test(rebalance, changes_the_chunk_size)
{
	static uint64_t tags[N];
	uint64_t n;
	build(ZR_RAW, tags, &n);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	zr_rebalance_report r;
	cr_assert_eq(zr_rebalance(ds, 1000, &r), 0, "%s", zr_errmsg(ds));
	cr_assert_eq(r.chunks_after, (n + 999) / 1000);
	zr_close(ds);
	ds = t_open(t_ds, ZR_RDONLY);
	zr_info in;
	cr_assert_eq(zr_info_get(ds, &in), 0);
	cr_assert_eq(in.chunk_size, 1000);
	check(ds, tags, n);
	zr_close(ds);
}

Test(rebalance, refuses_read_only_and_uncommitted)
{
	t_create1(t_ds, ZR_RAW, 10);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	t_append_range(ds, 1, 0, 30, 100);
	cr_assert_eq(zr_rebalance(ds, 0, NULL), -EBUSY);
	cr_assert_not_null(strstr(zr_errmsg(ds), "commit"), "%s", zr_errmsg(ds));
	cr_assert_eq(zr_commit(ds), 0);
	zr_close(ds);
	ds = t_open(t_ds, ZR_RDONLY);
	cr_assert_eq(zr_rebalance(ds, 0, NULL), -EROFS);
	zr_close(ds);
}

Test(rebalance, empty_dataset)
{
	t_create1(t_ds, ZR_RAW, 10);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	zr_rebalance_report r;
	cr_assert_eq(zr_rebalance(ds, 0, &r), 0, "%s", zr_errmsg(ds));
	cr_assert_eq(r.chunks_after, 0);
	cr_assert_float_eq(r.utilisation_after, 1.0, 1e-9);
	zr_close(ds);
}

Test(rebalance, sigkill_at_random_instants_leaves_old_or_new, .timeout = T_TIMEOUT(300))
{
	static uint64_t tags[N];
	uint64_t n, rng = 4;
	char pristine[400], cmd[1024];
	build(ZR_FLATE, tags, &n);
	snprintf(pristine, sizeof pristine, "%s/pristine", t_dir);
	snprintf(cmd, sizeof cmd, "cp -r '%s' '%s'", t_ds, pristine);
	cr_assert_eq(system(cmd), 0);
	int saw_old = 0, saw_new = 0;
	for (int trial = 0; trial < 40; trial++) {
		snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", t_ds, pristine, t_ds);
		cr_assert_eq(system(cmd), 0);
		int p[2], status;
		cr_assert_eq(pipe(p), 0);
		pid_t pid = fork();
		cr_assert_neq(pid, -1);
		if (pid == 0) {
			zr_dataset *ds;
			close(p[0]);
			if (zr_open(&ds, t_ds, ZR_RDWR) < 0)
				_exit(2);
			if (write(p[1], "s", 1) != 1)
				_exit(3);
			_exit(zr_rebalance(ds, 0, NULL) < 0 ? 4 : 0);
		}
		close(p[1]);
		char c;
		cr_assert_eq(read(p[0], &c, 1), 1);
		close(p[0]);
		/* a rebalance of this dataset takes a few ms: spread the kills */
		for (volatile uint64_t spin = (rng = t_mix(rng)) % 30000000; spin > 0; spin--)
			;
		kill(pid, SIGKILL);
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		cr_assert(!WIFEXITED(status) || WEXITSTATUS(status) == 0, "exit %d",
			  WEXITSTATUS(status));

		zr_dataset *ds = t_open(t_ds, ZR_RDONLY);
		zr_info in;
		cr_assert_eq(zr_info_get(ds, &in), 0);
		if (in.utilisation > 0.999)
			saw_new++;
		else
			saw_old++;
		cr_assert_eq(zr_verify(ds, NULL, NULL), 0, "trial %d", trial);
		check(ds, tags, n);
		zr_close(ds);
		/* a writer finishes or discards what the killed one left */
		ds = t_open(t_ds, ZR_RDWR);
		zr_close(ds);
		ds = t_open(t_ds, ZR_RDONLY);
		check(ds, tags, n);
		zr_close(ds);
	}
	cr_log_info("rebalance kills: %d left the old layout, %d the new", saw_old, saw_new);
	cr_assert_gt(saw_old + saw_new, 0);
}

struct told {
	uint64_t calls, done, total;
	bool backwards;
};

static void tell(void *ctx, uint64_t done, uint64_t total)
{
	struct told *t = ctx;
	t->backwards |= t->calls && done < t->done;
	t->calls++;
	t->done = done;
	t->total = total;
}

/* zr_progress_set(): zr_rebalance() tells the values it copies and
 * zr_verify() those it checks, never going back, ending at the total;
 * unset, nothing is told */
Test(rebalance, tells_its_progress_and_verify_s)
{
	static uint64_t tags[N];
	struct told t = {0};
	uint64_t n;
	build(ZR_RAW, tags, &n);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	zr_progress_set(ds, tell, &t);
	cr_assert_eq(zr_rebalance(ds, 0, NULL), 0, "%s", zr_errmsg(ds));
	cr_assert_eq(t.total, n - 1, "rebalance told a total of %llu values, not %llu",
		     (unsigned long long)t.total, (unsigned long long)(n - 1)); /* one missing */
	cr_assert_eq(t.done, t.total);
	cr_assert_geq(t.calls, 2);
	cr_assert_not(t.backwards);
	t = (struct told){0};
	cr_assert_eq(zr_verify(ds, NULL, NULL), 0);
	cr_assert_eq(t.done, n * zr_field_count(ds));
	cr_assert_eq(t.total, n * zr_field_count(ds));
	cr_assert_not(t.backwards);
	t = (struct told){0};
	zr_progress_set(ds, NULL, NULL);
	cr_assert_eq(zr_verify(ds, NULL, NULL), 0);
	cr_assert_eq(t.calls, 0);
	zr_close(ds);
}
