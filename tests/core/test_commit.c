/*
 * Description: durability (core/commit.c): a writer killed with SIGKILL at
 * random instants leaves a dataset that opens, verifies clean and holds
 * exactly a committed state; failing system calls (ENOSPC, EIO) during
 * appends and commits leave the last commit intact and the handle usable.
 *
 * The crash trials replay one deterministic workload in the parent: round r
 * appends, modifies and deletes records chosen by a PRNG seeded with r, then
 * commits. The child reports each round before and after its commit through
 * a pipe, so after the kill the parent knows the dataset must equal the state
 * after round c (the last one reported committed) or c + 1 (commit in flight).
 */
#include "helpers.h"
#include "store_i.h"

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>

TestSuite(commit, .init = t_setup, .fini = t_cleanup);

#define ROUNDS 40
#define MAXLEN 2000

/* The model: record i of the dataset holds the bytes of tag tags[i]. */
struct model {
	uint64_t *tags;
	uint64_t n, cap;
};

static void model_push(struct model *m, uint64_t tag)
{
	if (m->n == m->cap) {
		m->cap = m->cap ? m->cap * 2 : 256;
		m->tags = realloc(m->tags, m->cap * sizeof *m->tags);
		cr_assert_not_null(m->tags);
	}
	m->tags[m->n++] = tag;
}

/* One round of the workload, applied to the model and, if @ds, the dataset. */
static void round_apply(struct model *m, zr_dataset *ds, unsigned r, uint8_t *buf)
{
	uint64_t s = t_mix(r + 7);
	unsigned appends = 5 + (unsigned)(s % 40), modifies = r % 3, deletes = r % 4 == 3;

	for (unsigned j = 0; j < appends; j++) {
		uint64_t tag = (uint64_t)r << 16 | j;
		size_t n = t_len(tag, 0, MAXLEN);
		model_push(m, tag);
		if (ds) {
			t_fill(buf, n, tag, 0);
			zr_value v = {buf, n};
			if (zr_append(ds, &v, NULL) < 0)
				_exit(3);
		}
	}
	for (unsigned j = 0; j < modifies; j++) {
		uint64_t id = (s = t_mix(s)) % m->n, tag = (uint64_t)r << 16 | (0x8000 + j);
		size_t n = t_len(tag, 0, MAXLEN);
		m->tags[id] = tag;
		if (ds) {
			t_fill(buf, n, tag, 0);
			if (zr_modify(ds, 0, id, (zr_value){buf, n}) < 0)
				_exit(4);
		}
	}
	for (unsigned j = 0; j < deletes; j++) {
		uint64_t id = (s = t_mix(s)) % m->n;
		m->tags[id] = m->tags[m->n - 1];
		m->n--;
		if (ds && zr_delete(ds, id) < 0)
			_exit(5);
	}
}

static void child(int fd, int rounds)
{
	struct model m = {0};
	uint8_t *buf = malloc(MAXLEN);
	zr_dataset *ds;

	if (!buf || zr_open(&ds, t_ds, ZR_RDWR) < 0)
		_exit(2);
	for (int r = 0; r < rounds; r++) {
		int32_t msg = -(r + 1); /* round r about to commit */
		round_apply(&m, ds, (unsigned)r, buf);
		if (write(fd, &msg, sizeof msg) != sizeof msg)
			_exit(6);
		if (zr_commit(ds) < 0)
			_exit(7);
		msg = r + 1; /* round r committed */
		if (write(fd, &msg, sizeof msg) != sizeof msg)
			_exit(6);
	}
	zr_close(ds);
	_exit(0);
}

static bool equals_model(zr_dataset *ds, const struct model *m)
{
	if (zr_length(ds) != m->n)
		return false;
	for (uint64_t id = 0; id < m->n; id++) {
		zr_batch *b;
		size_t n;
		if (zr_gather(ds, 0, &id, 1, &b) < 0)
			return false;
		const zr_slice *s = zr_batch_records(b, &n);
		bool ok = s->data && s->len == t_len(m->tags[id], 0, MAXLEN) &&
			  t_check(s->data, s->len, m->tags[id], 0);
		zr_batch_release(b);
		if (!ok)
			return false;
	}
	return true;
}

static void problem(void *ctx, const char *field, uint64_t id, const char *reason)
{
	(void)ctx;
	cr_log_error("verify: field %s id %llu: %s", field ? field : "-", (unsigned long long)id,
		     reason);
}

/* Kill a writer @trials times; every time, check the reopened dataset. */
static void crash_trials(zr_compress comp, int trials, unsigned flags)
{
	uint64_t rng = 12345 + comp;
	t_create1(t_ds, comp, 64);
	for (int t = 0; t < trials; t++) {
		int p[2], committed = 0, pending = 0, status;
		int32_t msg;
		cr_assert_eq(pipe(p), 0);
		/* the child starts from the empty dataset each trial */
		t_rmrf(t_ds);
		t_create1(t_ds, comp, 64);
		pid_t pid = fork();
		cr_assert_neq(pid, -1);
		if (pid == 0) {
			close(p[0]);
			child(p[1], ROUNDS);
		}
		close(p[1]);
		/* let it run to a random round, then a random moment inside it */
		int target = (int)((rng = t_mix(rng)) % ROUNDS);
		while (read(p[0], &msg, sizeof msg) == sizeof msg) {
			if (msg < 0)
				pending = -msg;
			else
				committed = msg;
			if (committed >= target)
				break;
		}
		for (volatile uint64_t spin = (rng = t_mix(rng)) % 2000000; spin > 0; spin--)
			;
		kill(pid, SIGKILL);
		/* drain what it managed to say before dying */
		while (read(p[0], &msg, sizeof msg) == sizeof msg) {
			if (msg < 0)
				pending = -msg;
			else
				committed = msg;
		}
		close(p[0]);
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		cr_assert(!WIFEXITED(status) || WEXITSTATUS(status) == 0,
			  "trial %d: the writer failed on its own (exit %d)", t, WEXITSTATUS(status));

		zr_dataset *ds = t_open(t_ds, flags);
		cr_assert_eq(zr_verify(ds, problem, NULL), 0, "trial %d: not verify-clean", t);
		struct model m = {0};
		for (int r = 0; r < committed; r++)
			round_apply(&m, NULL, (unsigned)r, NULL);
		bool ok = equals_model(ds, &m);
		if (!ok && pending > committed) {
			round_apply(&m, NULL, (unsigned)committed, NULL);
			ok = equals_model(ds, &m);
		}
		cr_assert(ok, "trial %d: dataset (length %llu) is not the state after round %d%s", t,
			  (unsigned long long)zr_length(ds), committed,
			  pending > committed ? " or the next" : "");
		free(m.tags);
		zr_close(ds);
	}
}

Test(commit, sigkill_during_edits_raw_reopen_rdwr, .timeout = T_TIMEOUT(300))
{
	crash_trials(ZR_RAW, 60, ZR_RDWR);
}

Test(commit, sigkill_during_edits_flate_reopen_rdonly, .timeout = T_TIMEOUT(300))
{
	crash_trials(ZR_FLATE, 60, ZR_RDONLY);
}

/* ---- fault injection ---- */

static int fail_errno;
static int fail_after; /* calls to let through before failing */

static ssize_t failing_pwrite(int fd, const void *buf, size_t n, off_t off)
{
	if (fail_after-- <= 0) {
		errno = fail_errno;
		return -1;
	}
	return pwrite(fd, buf, n, off);
}

static int failing_fdatasync(int fd)
{
	if (fail_after-- <= 0) {
		errno = fail_errno;
		return -1;
	}
	return fdatasync(fd);
}

static int failing_renameat(int a, const char *b, int c, const char *d)
{
	if (fail_after-- <= 0) {
		errno = fail_errno;
		return -1;
	}
	return renameat(a, b, c, d);
}

static void committed_base(zr_compress comp)
{
	t_create1(t_ds, comp, 100);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	t_append_range(ds, 3, 0, 250, 5000);
	cr_assert_eq(zr_commit(ds), 0);
	zr_close(ds);
}

static void reopen_holds_base(void)
{
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	cr_assert_eq(zr_verify(ds, problem, NULL), 0);
	t_check_range(ds, 3, 0, 250, 5000);
	/* and the dataset is still writable */
	t_append_range(ds, 3, 250, 300, 5000);
	cr_assert_eq(zr_commit(ds), 0);
	zr_close(ds);
	ds = t_open(t_ds, ZR_RDONLY);
	t_check_range(ds, 3, 0, 300, 5000);
	cr_assert_eq(zr_verify(ds, NULL, NULL), 0);
	zr_close(ds);
}

Test(commit, enospc_while_appending_keeps_the_last_commit)
{
	committed_base(ZR_RAW);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	uint8_t buf[4000];
	t_fill(buf, sizeof buf, 9, 9);
	fail_errno = ENOSPC;
	fail_after = 30;
	zr_sys.pwrite = failing_pwrite;
	int rc = 0;
	for (int i = 0; i < 100 && rc == 0; i++)
		rc = zr_append(ds, &(zr_value){buf, sizeof buf}, NULL);
	zr_sys_reset();
	cr_assert_eq(rc, -ENOSPC, "append should fail with ENOSPC, got %d", rc);
	cr_assert(strstr(zr_errmsg(ds), "chunk/"), "message names the chunk: %s", zr_errmsg(ds));
	zr_close(ds); /* without commit */
	reopen_holds_base();
}

Test(commit, a_failed_append_gives_its_id_back_and_the_handle_goes_on)
{
	committed_base(ZR_RAW);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	uint8_t buf[4000];
	t_fill(buf, sizeof buf, 9, 9);
	fail_errno = ENOSPC;
	fail_after = 0;
	zr_sys.pwrite = failing_pwrite;
	int rc = zr_append(ds, &(zr_value){buf, sizeof buf}, NULL);
	zr_sys_reset();
	cr_assert_eq(rc, -ENOSPC, "append should fail with ENOSPC, got %d", rc);
	cr_assert_eq(zr_length(ds), 250, "the failed record stays out: length %llu",
		     (unsigned long long)zr_length(ds));
	/* room again: the next append takes the id, the commit holds no hole */
	t_append_range(ds, 3, 250, 260, 5000);
	cr_assert_eq(zr_commit(ds), 0);
	zr_close(ds);
	ds = t_open(t_ds, ZR_RDONLY);
	cr_assert_eq(zr_length(ds), 260);
	t_check_range(ds, 3, 0, 260, 5000);
	cr_assert_eq(zr_verify(ds, problem, NULL), 0);
	zr_close(ds);
}

static void commit_fault(void (*inject)(void), int err)
{
	committed_base(ZR_FLATE);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	t_append_range(ds, 3, 250, 260, 5000);
	uint8_t b[10] = "modified!";
	cr_assert_eq(zr_modify(ds, 0, 7, (zr_value){b, sizeof b}), 0);
	cr_assert_eq(zr_delete(ds, 3), 0);
	fail_errno = err;
	fail_after = 0;
	inject();
	int rc = zr_commit(ds);
	zr_sys_reset();
	cr_assert_eq(rc, -err, "commit should fail with %d, got %d (%s)", -err, rc, zr_errmsg(ds));
	zr_close(ds);
	ds = t_open(t_ds, ZR_RDONLY);
	cr_assert_eq(zr_length(ds), 250);
	zr_close(ds);
	reopen_holds_base();
}

static void inject_fdatasync(void)
{
	zr_sys.fdatasync = failing_fdatasync;
}

static void inject_pwrite(void)
{
	zr_sys.pwrite = failing_pwrite;
}

static void inject_renameat(void)
{
	zr_sys.renameat = failing_renameat;
}

Test(commit, eio_on_fdatasync_fails_the_commit_and_keeps_the_last)
{
	commit_fault(inject_fdatasync, EIO);
}

Test(commit, enospc_writing_the_journal_keeps_the_last_commit)
{
	commit_fault(inject_pwrite, ENOSPC);
}

Test(commit, failed_rename_of_meta_keeps_the_last_commit)
{
	commit_fault(inject_renameat, EIO);
}

/* What a commit flushed, in order: a table's fd for its fdatasync, -1 for
 * the rename of meta.json (the commit point). */
static int flushed[64], nflushed;

static int noting_fdatasync(int fd)
{
	if (nflushed < 64)
		flushed[nflushed++] = fd;
	return fdatasync(fd);
}

static int noting_renameat(int a, const char *b, int c, const char *d)
{
	if (strcmp(d, "meta.json") == 0 && nflushed < 64)
		flushed[nflushed++] = -1;
	return renameat(a, b, c, d);
}

/* How many of @ds's tables were flushed before the commit point. */
static unsigned tables_flushed_before_commit(zr_dataset *ds)
{
	unsigned n = 0;
	for (int i = 0; i < nflushed && flushed[i] != -1; i++)
		for (unsigned f = 0; f < ds->nfields; f++)
			n += flushed[i] == ds->fields[f].fd;
	return n;
}

Test(commit, a_commit_flushes_the_tables_written_since_the_last_and_only_those)
{
	committed_base(ZR_RAW);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	zr_dataset *r = t_open(t_ds, ZR_RDONLY); /* an older state: no settling */
	uint8_t b[10] = "modified!";

	zr_sys.fdatasync = noting_fdatasync;
	zr_sys.renameat = noting_renameat;
	t_append_range(ds, 3, 250, 251, 5000); /* new entries, in the tables */
	nflushed = 0;
	cr_assert_eq(zr_commit(ds), 0, "%s", zr_errmsg(ds));
	cr_assert_eq(tables_flushed_before_commit(ds), ds->nfields,
		     "appended: every table flushed before meta.json");
	cr_assert_eq(zr_modify(ds, 0, 7, (zr_value){b, sizeof b}), 0); /* journalled */
	nflushed = 0;
	cr_assert_eq(zr_commit(ds), 0, "%s", zr_errmsg(ds));
	cr_assert_eq(tables_flushed_before_commit(ds), 0, "a modify writes no table");
	cr_assert_eq(zr_delete(ds, 250), 0); /* the last: its entries are cut */
	t_append_range(ds, 3, 250, 251, 5000); /* into an id committed before: journalled */
	nflushed = 0;
	cr_assert_eq(zr_commit(ds), 0, "%s", zr_errmsg(ds));
	cr_assert_eq(tables_flushed_before_commit(ds), 0, "an append below high: journalled");
	t_append_range(ds, 3, 251, 252, 5000);
	nflushed = 0;
	cr_assert_eq(zr_commit(ds), 0, "%s", zr_errmsg(ds));
	cr_assert_eq(tables_flushed_before_commit(ds), ds->nfields, "an append past high");
	zr_sys_reset();
	zr_close(r);
	zr_close(ds);
	ds = t_open(t_ds, ZR_RDONLY);
	cr_assert_eq(zr_length(ds), 252);
	cr_assert_eq(zr_verify(ds, problem, NULL), 0);
	zr_close(ds);
}

Test(commit, commit_with_nothing_changed_is_a_no_op)
{
	committed_base(ZR_RAW);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	zr_info a, b;
	cr_assert_eq(zr_info_get(ds, &a), 0);
	cr_assert_eq(zr_commit(ds), 0);
	cr_assert_eq(zr_info_get(ds, &b), 0);
	cr_assert_eq(a.generation, b.generation);
	zr_close(ds);
}

Test(commit, generation_counts_commits)
{
	committed_base(ZR_RAW);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	zr_info a, b;
	cr_assert_eq(zr_info_get(ds, &a), 0);
	t_append_range(ds, 3, 250, 251, 5000);
	cr_assert_eq(zr_commit(ds), 0);
	cr_assert_eq(zr_info_get(ds, &b), 0);
	cr_assert_eq(b.generation, a.generation + 1);
	zr_close(ds);
}
