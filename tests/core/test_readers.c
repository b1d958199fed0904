/*
 * Description: readers and writers of one dataset (core/readers.c,
 * core/changes.c, the protocol of FORMAT.md "Readers and writers"): an open
 * read-only handle reads the committed state it opened, byte for byte,
 * while a writer modifies, deletes, appends (into ids an older state still
 * has), commits, restarts and rebalances; journals wait for older readers
 * and are applied once they are gone; handles opened while commits land
 * always hold one whole committed state; the change log names what changed
 * between two generations, survives compaction for the readers that need
 * it, and says so when it cannot answer.
 */
#include "helpers.h"
#include "store_i.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <dirent.h>
#include <stdatomic.h>

TestSuite(readers, .init = t_setup, .fini = t_cleanup);

#define SEED 1000
#define MAXLEN 300

/* The model: record i holds the bytes of tag tags[i] (t_fill under SEED). */
struct model {
	uint64_t *tags;
	uint64_t n;
};

static struct model model_copy(const struct model *m)
{
	struct model c = {malloc((m->n + 1) * sizeof *c.tags), m->n};
	cr_assert_not_null(c.tags);
	memcpy(c.tags, m->tags, m->n * sizeof *c.tags);
	return c;
}

static zr_value value_of(uint64_t tag, uint8_t *buf)
{
	size_t n = t_len(SEED, tag, MAXLEN);
	t_fill(buf, n, SEED, tag);
	return (zr_value){buf, n};
}

/* Whether @ds holds exactly @m; a reason in @why if not. */
static bool holds(zr_dataset *ds, const struct model *m, char *why, size_t cap)
{
	if (zr_length(ds) != m->n) {
		snprintf(why, cap, "length %llu, want %llu", (unsigned long long)zr_length(ds),
			 (unsigned long long)m->n);
		return false;
	}
	for (uint64_t id = 0; id < m->n; id++) {
		zr_batch *b;
		size_t k;
		if (zr_gather(ds, 0, &id, 1, &b) < 0) {
			snprintf(why, cap, "gather %llu: %s", (unsigned long long)id, zr_errmsg(ds));
			return false;
		}
		const zr_slice *s = zr_batch_records(b, &k);
		bool ok = s[0].data && s[0].len == t_len(SEED, m->tags[id], MAXLEN) &&
			  t_check(s[0].data, s[0].len, SEED, m->tags[id]);
		zr_batch_release(b);
		if (!ok) {
			snprintf(why, cap, "record %llu is not tag %llu", (unsigned long long)id,
				 (unsigned long long)m->tags[id]);
			return false;
		}
	}
	return true;
}

static void expect_holds(zr_dataset *ds, const struct model *m, const char *what)
{
	char why[256];
	cr_assert(holds(ds, m, why, sizeof why), "%s: %s", what, why);
}

/* One round of edits on writer @w and model @m: modifies, deletes (the last
 * record takes the hole), appends; tags from *next. */
static void edit_round(zr_dataset *w, struct model *m, uint64_t *rng, uint64_t *next)
{
	uint8_t buf[MAXLEN];
	for (int k = 0; k < 3 && m->n; k++) {
		uint64_t id = (*rng = t_mix(*rng)) % m->n, tag = (*next)++;
		cr_assert_eq(zr_modify(w, 0, id, value_of(tag, buf)), 0, "%s", zr_errmsg(w));
		m->tags[id] = tag;
	}
	for (int k = 0; k < 2 && m->n > 1; k++) {
		uint64_t id = (*rng = t_mix(*rng)) % m->n;
		cr_assert_eq(zr_delete(w, id), 0, "%s", zr_errmsg(w));
		m->tags[id] = m->tags[--m->n];
	}
	int appends = (int)((*rng = t_mix(*rng)) % 4);
	for (int k = 0; k < appends; k++) {
		uint64_t tag = (*next)++;
		zr_value v = value_of(tag, buf);
		cr_assert_eq(zr_append(w, &v, NULL), 0, "%s", zr_errmsg(w));
		m->tags = realloc(m->tags, (m->n + 1) * sizeof *m->tags);
		m->tags[m->n++] = tag;
	}
}

/* A dataset of @n records tagged 0 .. n-1, committed; the model of it. */
static struct model make(zr_compress comp, uint64_t n)
{
	struct model m = {malloc((n + 1) * sizeof *m.tags), 0};
	uint8_t buf[MAXLEN];
	t_create1(t_ds, comp, 50);
	zr_dataset *w = t_open(t_ds, ZR_RDWR);
	for (; m.n < n; m.n++) {
		zr_value v = value_of(m.n, buf);
		cr_assert_eq(zr_append(w, &v, NULL), 0);
		m.tags[m.n] = m.n;
	}
	cr_assert_eq(zr_commit(w), 0);
	zr_close(w);
	return m;
}

/* Open a reader: from nothing, or reopened from @prev (NULL: zr_open). */
static zr_dataset *open_reader(zr_dataset *prev)
{
	zr_dataset *r = NULL;
	if (!prev)
		return t_open(t_ds, ZR_RDONLY);
	cr_assert_eq(zr_reopen(prev, &r), 0, "%s", zr_errmsg(NULL));
	return r;
}

static void readers_keep_their_states(zr_compress comp, bool reopen)
{
	struct model m = make(comp, 200);
	struct {
		zr_dataset *r;
		struct model m;
	} held[40];
	uint64_t rng = 1, next = 200;
	int nheld = 0;
	zr_dataset *w = t_open(t_ds, ZR_RDWR);

	for (int round = 0; round < 40; round++) {
		zr_dataset *prev = NULL;
		for (int i = nheld - 1; reopen && i >= 0 && !prev; i--)
			prev = held[i].r;
		held[nheld].r = open_reader(prev);
		held[nheld++].m = model_copy(&m);
		edit_round(w, &m, &rng, &next);
		cr_assert_eq(zr_commit(w), 0, "%s", zr_errmsg(w));
		if (round % 10 == 9) {
			cr_assert_eq(zr_rebalance(w, round % 20 == 9 ? 37 : 0, NULL), 0, "%s",
				     zr_errmsg(w));
		}
		if (round % 7 == 6) { /* a writer restarts: what it knew is in meta.json */
			zr_close(w);
			w = t_open(t_ds, ZR_RDWR);
		}
		if (round % 5 == 4) /* some readers leave */
			for (int i = 0; i < nheld; i += 3) {
				zr_close(held[i].r);
				held[i].r = NULL;
			}
		for (int i = 0; i < nheld; i++)
			if (held[i].r)
				expect_holds(held[i].r, &held[i].m, "an open reader");
	}
	zr_close(w);
	for (int i = 0; i < nheld; i++) {
		zr_close(held[i].r);
		free(held[i].m.tags);
	}
	zr_dataset *r = t_open(t_ds, ZR_RDONLY);
	expect_holds(r, &m, "the last state");
	cr_assert_eq(zr_verify(r, NULL, NULL), 0);
	zr_close(r);
	free(m.tags);
}

Test(readers, open_readers_keep_their_states_raw)
{
	readers_keep_their_states(ZR_RAW, false);
}

Test(readers, open_readers_keep_their_states_flate)
{
	readers_keep_their_states(ZR_FLATE, false);
}

Test(readers, reopened_readers_keep_their_states)
{
	readers_keep_their_states(ZR_RAW, true);
}

static int open_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	cr_assert_not_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

Test(readers, reopen_shares_the_chunk_files)
{
	struct model m = make(ZR_RAW, 1000); /* 20 chunks of 50 records */
	zr_dataset *r[10];
	uint8_t buf[MAXLEN];
	zr_dataset *w = t_open(t_ds, ZR_RDWR);
	zr_value v0 = value_of(5000, buf); /* the writer opens a fresh chunk */
	cr_assert_eq(zr_append(w, &v0, NULL), 0);
	cr_assert_eq(zr_commit(w), 0);
	r[0] = t_open(t_ds, ZR_RDONLY);
	int one = open_fds();
	for (int i = 1; i < 10; i++) {
		zr_value v = value_of(5000 + (uint64_t)i, buf);
		cr_assert_eq(zr_append(w, &v, NULL), 0);
		cr_assert_eq(zr_commit(w), 0);
		cr_assert_eq(zr_reopen(r[i - 1], &r[i]), 0, "%s", zr_errmsg(NULL));
		cr_assert_eq(zr_generation(r[i]), zr_generation(r[i - 1]) + 1);
		cr_assert_eq(zr_length(r[i]), 1001 + (uint64_t)i);
	}
	/* each handle: the directory, chunk/, readers, one table; not the 21 chunks */
	int all = open_fds();
	cr_assert_leq(all - one, 9 * 4 + 2, "%d descriptors for 9 more handles", all - one);
	zr_close(w);
	for (int i = 0; i < 10; i++) /* any order: the chunks go with the last */
		zr_close(r[(i * 7) % 10]);
	free(m.tags);
}

static bool exists(const char *name)
{
	char p[512];
	snprintf(p, sizeof p, "%s/%s", t_ds, name);
	return access(p, F_OK) == 0;
}

/* Entry @id of the table as it lies in the file. */
static void table_entry(uint64_t id, uint8_t out[16])
{
	char p[512];
	snprintf(p, sizeof p, "%s/data.offset", t_ds);
	int fd = open(p, O_RDONLY);
	cr_assert_eq(pread(fd, out, 16, (off_t)(16 * id)), 16);
	close(fd);
}

Test(readers, journals_wait_for_older_readers)
{
	struct model m = make(ZR_RAW, 10);
	uint8_t buf[MAXLEN], before[16], now[16];
	table_entry(3, before);

	zr_dataset *r1 = t_open(t_ds, ZR_RDONLY); /* generation 1 */
	struct model m1 = model_copy(&m);
	zr_dataset *w = t_open(t_ds, ZR_RDWR);
	cr_assert_eq(zr_modify(w, 0, 3, value_of(100, buf)), 0);
	m.tags[3] = 100;
	cr_assert_eq(zr_commit(w), 0); /* generation 2 */
	cr_assert(exists("journal.2"), "a reader holds generation 1: the journal stays");
	table_entry(3, now);
	cr_assert_eq(memcmp(before, now, 16), 0, "the table is not changed under a reader");
	expect_holds(r1, &m1, "the reader of generation 1");
	zr_dataset *r2 = t_open(t_ds, ZR_RDONLY);
	expect_holds(r2, &m, "a reader of generation 2");

	/* the last records go and come back with other bytes: ids the reader
	 * of generation 1 still has are written through the journal too */
	for (int k = 0; k < 3; k++)
		cr_assert_eq(zr_delete(w, zr_length(w) - 1), 0);
	uint64_t tag = 200;
	for (int k = 0; k < 3; k++, tag++) {
		zr_value v = value_of(tag, buf);
		cr_assert_eq(zr_append(w, &v, NULL), 0);
		m.tags[7 + k] = tag;
	}
	cr_assert_eq(zr_commit(w), 0); /* generation 3 */
	zr_close(w);
	w = t_open(t_ds, ZR_RDWR); /* a new writer still knows */
	cr_assert_eq(zr_modify(w, 0, 8, value_of(300, buf)), 0);
	m.tags[8] = 300;
	cr_assert_eq(zr_commit(w), 0); /* generation 4 */
	expect_holds(r1, &m1, "the reader of generation 1, after deletes and appends");
	cr_assert(exists("journal.4") && exists("journal.2"), "held generations keep theirs");
	cr_assert(!exists("journal.3"), "nobody holds generation 3");

	zr_close(r1);
	zr_close(r2);
	cr_assert_eq(zr_modify(w, 0, 5, value_of(400, buf)), 0);
	m.tags[5] = 400;
	cr_assert_eq(zr_commit(w), 0); /* generation 5: no older readers */
	cr_assert(!exists("journal.5") && !exists("journal.4") && !exists("journal.2"),
		  "applied: no journal is left");
	table_entry(3, now);
	cr_assert_neq(memcmp(before, now, 16), 0, "the table holds the change");
	zr_close(w);
	zr_dataset *r = t_open(t_ds, ZR_RDONLY);
	expect_holds(r, &m, "the last state");
	cr_assert_eq(zr_verify(r, NULL, NULL), 0);
	zr_close(r);
	free(m.tags);
	free(m1.tags);
}

/* Entries in the journal of the writer's last commit (0: none). */
static uint64_t journal_entries(zr_dataset *w)
{
	char p[512];
	struct stat st;
	snprintf(p, sizeof p, "%s/journal.%llu", t_ds, (unsigned long long)zr_generation(w));
	return stat(p, &st) < 0 ? 0 : ((uint64_t)st.st_size - 28) / 32;
}

/* @rounds commits of 8 modifies each on @w, with what a mount holds: a
 * snapshot of the last commit (*cur) and of the one before (*prev), as a
 * request in flight does; zr_settle after each commit if @settle. The most
 * entries a journal had. */
static uint64_t mount_rounds(zr_dataset *w, struct model *m, zr_dataset **prev,
			     zr_dataset **cur, int rounds, bool settle, uint64_t *rng,
			     uint64_t *next, int *settled)
{
	uint8_t buf[MAXLEN];
	uint64_t most = 0;
	for (int round = 0; round < rounds; round++) {
		for (int k = 0; k < 8; k++) {
			uint64_t id = (*rng = t_mix(*rng)) % m->n, tag = (*next)++;
			cr_assert_eq(zr_modify(w, 0, id, value_of(tag, buf)), 0, "%s", zr_errmsg(w));
			m->tags[id] = tag;
		}
		cr_assert_eq(zr_commit(w), 0, "%s", zr_errmsg(w));
		zr_close(*prev);
		*prev = *cur;
		cr_assert_eq(zr_snapshot(w, *prev, cur), 0, "%s", zr_errmsg(w));
		if (settle) {
			int rc = zr_settle(w);
			cr_assert_geq(rc, 0, "%s", zr_errmsg(w));
			*settled += rc;
		}
		uint64_t n = journal_entries(w);
		most = n > most ? n : most;
	}
	return most;
}

Test(readers, a_writer_that_keeps_its_last_state_settles_between_commits)
{
	struct model m = make(ZR_RAW, 3000);
	uint64_t rng = 7, next = 3000;
	int settled = 0;
	zr_dataset *w = t_open(t_ds, ZR_RDWR);
	zr_dataset *prev = NULL, *cur = t_open(t_ds, ZR_RDONLY);

	/* a commit always finds the state before held: without zr_settle,
	 * every journal holds every change so far */
	uint64_t most = mount_rounds(w, &m, &prev, &cur, 200, false, &rng, &next, &settled);
	cr_assert_geq(most, 1200, "without settling: %llu entries", (unsigned long long)most);
	/* with it, once past 1,024 entries, what every held state has goes
	 * into the tables: a reader of an older state holds back only what
	 * came after it, and reads its own state all along */
	zr_dataset *old = t_open(t_ds, ZR_RDONLY);
	struct model old_m = model_copy(&m);
	mount_rounds(w, &m, &prev, &cur, 100, true, &rng, &next, &settled);
	cr_assert_gt(settled, 0, "what the older reader has too is settled");
	expect_holds(old, &old_m, "the reader of the older state");
	zr_close(old);
	mount_rounds(w, &m, &prev, &cur, 200, true, &rng, &next, &settled);
	most = mount_rounds(w, &m, &prev, &cur, 200, true, &rng, &next, &settled);
	cr_assert_leq(most, 1024 + 16, "settled: at most %llu entries", (unsigned long long)most);
	expect_holds(cur, &m, "the last snapshot");
	zr_close(w);
	zr_dataset *r = t_open(t_ds, ZR_RDONLY);
	expect_holds(r, &m, "the last state, opened");
	cr_assert_eq(zr_verify(r, NULL, NULL), 0);
	zr_close(r);
	zr_close(prev);
	zr_close(cur);
	free(old_m.tags);
	free(m.tags);
}

/* ---- a reader meeting a rebalance's switch ---- */

static int keep_new_tables_renameat(int od, const char *op, int nd, const char *np)
{
	size_t n = strlen(op);
	if (n > 11 && strcmp(op + n - 11, ".offset.new") == 0) {
		errno = EIO;
		return -1;
	}
	return renameat(od, op, nd, np);
}

static int (*real_openat)(int, const char *, int, mode_t);

/* The writer's switch, done by the reader's own open of the new table: as
 * if the rename landed between reading the manifest and opening the file. */
static int switching_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	size_t n = strlen(path);
	if (n > 11 && strcmp(path + n - 11, ".offset.new") == 0) {
		char to[256];
		snprintf(to, sizeof to, "%.*s", (int)(n - 4), path);
		cr_assert_eq(renameat(dirfd, path, dirfd, to), 0);
	}
	return real_openat(dirfd, path, flags, mode);
}

Test(readers, a_table_renamed_into_place_while_a_reader_opens_it)
{
	struct model m = make(ZR_RAW, 120);
	uint64_t rng = 3, next = 120;
	zr_dataset *w = t_open(t_ds, ZR_RDWR);
	edit_round(w, &m, &rng, &next);
	cr_assert_eq(zr_commit(w), 0, "%s", zr_errmsg(w));
	/* the rebalance reaches its commit point and stops before step 2 */
	zr_sys.renameat = keep_new_tables_renameat;
	int rc = zr_rebalance(w, 0, NULL);
	zr_sys_reset();
	cr_assert_lt(rc, 0, "the switch was to stop at its first rename");
	zr_close(w);
	cr_assert(exists("rebalance.json") && exists("data.offset.new"));

	real_openat = zr_sys.openat;
	zr_sys.openat = switching_openat;
	zr_dataset *r = NULL;
	rc = zr_open(&r, t_ds, ZR_RDONLY);
	zr_sys_reset();
	cr_assert_eq(rc, 0, "%s", zr_errmsg(NULL));
	cr_assert(!exists("data.offset.new"), "the table was renamed during the open");
	expect_holds(r, &m, "a reader whose new table moved while it opened it");
	zr_close(r);
	free(m.tags);
}

/* ---- readers opened while commits land ---- */

#define ROUNDS 150

struct race {
	pthread_mutex_t lock;
	struct model states[ROUNDS + 40]; /* by generation, set before the commit */
	atomic_bool done;
	atomic_int opened, bad;
	char why[400];
};

static void *race_reader(void *arg)
{
	struct race *x = arg;

	while (!atomic_load(&x->done) && !atomic_load(&x->bad)) {
		zr_dataset *r;
		char why[256];
		if (zr_open(&r, t_ds, ZR_RDONLY) < 0) {
			snprintf(x->why, sizeof x->why, "open: %s", zr_errmsg(NULL));
			atomic_store(&x->bad, 1);
			break;
		}
		uint64_t g = zr_generation(r);
		pthread_mutex_lock(&x->lock);
		struct model m = g < ROUNDS + 40 ? model_copy(&x->states[g]) : (struct model){0};
		pthread_mutex_unlock(&x->lock);
		if (!m.tags || !holds(r, &m, why, sizeof why)) {
			snprintf(x->why, sizeof x->why, "generation %llu: %s", (unsigned long long)g,
				 m.tags ? why : "unknown");
			atomic_store(&x->bad, 1);
		}
		free(m.tags);
		zr_close(r);
		atomic_fetch_add(&x->opened, 1);
	}
	return NULL;
}

Test(readers, handles_opened_during_commits_hold_one_whole_state, .timeout = T_TIMEOUT(240))
{
	static struct race x;
	struct model m = make(ZR_RAW, 150);
	uint64_t rng = 7, next = 150;
	pthread_t th[2];

	pthread_mutex_init(&x.lock, NULL);
	x.states[1] = model_copy(&m);
	zr_dataset *w = t_open(t_ds, ZR_RDWR);
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, race_reader, &x);
	for (int round = 0; round < ROUNDS && !atomic_load(&x.bad); round++) {
		uint64_t g = zr_generation(w) + 1;
		if (round % 40 == 39) {
			pthread_mutex_lock(&x.lock);
			x.states[g] = model_copy(&m);
			pthread_mutex_unlock(&x.lock);
			cr_assert_eq(zr_rebalance(w, 0, NULL), 0, "%s", zr_errmsg(w));
			continue;
		}
		edit_round(w, &m, &rng, &next);
		pthread_mutex_lock(&x.lock);
		x.states[g] = model_copy(&m);
		pthread_mutex_unlock(&x.lock);
		cr_assert_eq(zr_commit(w), 0, "%s", zr_errmsg(w));
	}
	atomic_store(&x.done, true);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	cr_assert_eq(atomic_load(&x.bad), 0, "a reader saw no whole state: %s", x.why);
	cr_assert_gt(atomic_load(&x.opened), 20, "the readers barely ran");
	zr_close(w);
	for (int g = 0; g < ROUNDS + 40; g++)
		free(x.states[g].tags);
	free(m.tags);
}

/* ---- the change log ---- */

struct seen {
	uint64_t ids[4096];
	size_t n;
};

static void note(void *ctx, unsigned field, uint64_t id)
{
	struct seen *s = ctx;
	cr_assert_eq(field, 0);
	if (s->n < 4096)
		s->ids[s->n++] = id;
}

static bool saw(const struct seen *s, uint64_t id)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->ids[i] == id)
			return true;
	return false;
}

Test(readers, changes_name_what_changed_since_a_generation)
{
	struct model m = make(ZR_RAW, 100); /* generation 1 */
	uint8_t buf[MAXLEN];
	zr_dataset *w = t_open(t_ds, ZR_RDWR);
	cr_assert_eq(zr_modify(w, 0, 5, value_of(500, buf)), 0);
	cr_assert_eq(zr_modify(w, 0, 17, value_of(501, buf)), 0);
	cr_assert_eq(zr_commit(w), 0); /* 2 */
	cr_assert_eq(zr_delete(w, 40), 0); /* record 99 takes id 40 */
	cr_assert_eq(zr_commit(w), 0); /* 3 */
	for (int k = 0; k < 5; k++) {
		zr_value v = value_of(600 + (uint64_t)k, buf);
		cr_assert_eq(zr_append(w, &v, NULL), 0);
	}
	cr_assert_eq(zr_commit(w), 0); /* 4: new ids, nothing an older state has */
	zr_close(w);

	zr_dataset *r = t_open(t_ds, ZR_RDONLY);
	struct seen s = {.n = 0};
	cr_assert_eq(zr_generation(r), 4);
	cr_assert_eq(zr_changes(r, 1, note, &s), 0, "%s", zr_errmsg(r));
	cr_assert(saw(&s, 5) && saw(&s, 17) && saw(&s, 40));
	cr_assert_eq(s.n, 3, "exactly the records that changed (%zu)", s.n);
	s.n = 0;
	cr_assert_eq(zr_changes(r, 2, note, &s), 0);
	cr_assert(s.n == 1 && saw(&s, 40));
	s.n = 0;
	cr_assert_eq(zr_changes(r, 3, note, &s), 0);
	cr_assert_eq(s.n, 0, "appends are told by the length");
	cr_assert_eq(zr_changes(r, 4, note, &s), 0);
	cr_assert_eq(zr_changes(r, 5, note, &s), -EINVAL);
	cr_assert_eq(zr_changes(r, 0, note, &s), -ESTALE, "the log starts after generation 1");
	zr_close(r);

	char p[512];
	snprintf(p, sizeof p, "%s/changes", t_ds);
	cr_assert_eq(unlink(p), 0);
	r = t_open(t_ds, ZR_RDONLY);
	cr_assert_eq(zr_changes(r, 3, note, &s), -ESTALE, "no log: anything may have changed");
	zr_close(r);
	free(m.tags);
}

/* A commit tells its writer what it changed, as the change log says it
 * to a reader afterwards. */
Test(readers, a_commit_tells_the_records_it_changed)
{
	struct model m = make(ZR_RAW, 100); /* generation 1 */
	uint8_t buf[MAXLEN];
	struct seen told = {.n = 0}, logged = {.n = 0};
	zr_dataset *w = t_open(t_ds, ZR_RDWR), *r;
	cr_assert_eq(zr_modify(w, 0, 5, value_of(500, buf)), 0);
	cr_assert_eq(zr_modify(w, 0, 17, value_of(501, buf)), 0);
	cr_assert_eq(zr_delete(w, 40), 0); /* record 99 takes id 40 */
	zr_value v = value_of(600, buf); /* at id 99 again: changed, for the older state */
	cr_assert_eq(zr_append(w, &v, NULL), 0);
	cr_assert_eq(zr_commit_changes(w, note, &told), 0, "%s", zr_errmsg(w));
	cr_assert(saw(&told, 5) && saw(&told, 17) && saw(&told, 40) && saw(&told, 99));
	cr_assert_eq(told.n, 4, "exactly the records an older state has that changed (%zu)",
		     told.n);
	r = t_open(t_ds, ZR_RDONLY);
	cr_assert_eq(zr_changes(r, 1, note, &logged), 0);
	cr_assert_eq(logged.n, told.n, "the log says what the commit told");
	for (size_t i = 0; i < told.n; i++)
		cr_assert(saw(&logged, told.ids[i]));
	zr_close(r);
	/* new ids only, and no commit at all: nothing told */
	told.n = 0;
	cr_assert_eq(zr_append(w, &v, NULL), 0);
	cr_assert_eq(zr_commit_changes(w, note, &told), 0);
	cr_assert_eq(zr_commit_changes(w, note, &told), 0);
	cr_assert_eq(told.n, 0);
	zr_close(w);
	free(m.tags);
}

/* A snapshot of the writer made just after its commit reads what a reader
 * opening the dataset then reads, and keeps its state as any reader does,
 * whether the writer kept its journal for an older reader or settled. */
static void snapshot_reads_the_commit(zr_compress comp)
{
	struct model m = make(comp, 200), held_m = model_copy(&m);
	uint64_t rng = 7, next = 200;
	zr_dataset *w = t_open(t_ds, ZR_RDWR), *held = t_open(t_ds, ZR_RDONLY), *s, *r;
	uint8_t buf[MAXLEN];

	for (int round = 0; round < 24; round++) {
		edit_round(w, &m, &rng, &next);
		cr_assert_eq(zr_commit(w), 0, "%s", zr_errmsg(w));
		cr_assert_eq(zr_snapshot(w, held, &s), 0, "%s", zr_errmsg(w));
		cr_assert_eq(zr_reopen(held, &r), 0, "%s", zr_errmsg(NULL));
		cr_assert_eq(zr_generation(s), zr_generation(r));
		expect_holds(s, &m, "the snapshot");
		expect_holds(r, &m, "a reader opened after the commit");
		expect_holds(held, &held_m, "a reader of an older state");
		zr_close(r);
		if (round % 3 == 2) { /* the older state let go: the next commit settles */
			zr_close(held);
			free(held_m.tags);
			held = s;
			held_m = model_copy(&m);
		} else {
			zr_close(s);
		}
	}
	cr_assert_eq(zr_snapshot(held, NULL, &s), -EINVAL, "a read-only handle");
	cr_assert_eq(zr_snapshot(w, w, &s), -EINVAL, "a writer's chunks");
	cr_assert_eq(zr_modify(w, 0, 0, value_of(9999, buf)), 0);
	cr_assert_eq(zr_snapshot(w, held, &s), -EBUSY, "changes not committed");
	cr_assert_null(s);
	zr_close(held);
	zr_close(w);
	free(m.tags);
	free(held_m.tags);
}

Test(readers, a_snapshot_of_the_writer_reads_the_commit_raw)
{
	snapshot_reads_the_commit(ZR_RAW);
}

Test(readers, a_snapshot_of_the_writer_reads_the_commit_flate)
{
	snapshot_reads_the_commit(ZR_FLATE);
}

Test(readers, compaction_keeps_what_held_generations_need_within_half_the_bound)
{
	struct model m = make(ZR_RAW, 50); /* generation 1 */
	uint8_t buf[MAXLEN];
	zr_changes_max = 16 + 24 * 30; /* a few commits' worth */
	zr_dataset *w = t_open(t_ds, ZR_RDWR);
	cr_assert_eq(zr_modify(w, 0, 1, value_of(700, buf)), 0);
	cr_assert_eq(zr_commit(w), 0); /* 2 */
	zr_dataset *held = t_open(t_ds, ZR_RDONLY);
	char p[512];
	struct stat st;
	struct seen s = {.n = 0};
	zr_dataset *r;
	snprintf(p, sizeof p, "%s/changes", t_ds);
	for (int g = 3; g < 8; g++) { /* 21 records: within the bound */
		for (uint64_t id = 10; id < 14; id++)
			cr_assert_eq(zr_modify(w, 0, id + (uint64_t)g % 3, value_of(800, buf)), 0);
		cr_assert_eq(zr_commit(w), 0);
	}
	r = t_open(t_ds, ZR_RDONLY);
	cr_assert_eq(zr_changes(r, 2, note, &s), 0, "the held generation's changes are kept");
	cr_assert(saw(&s, 10) && saw(&s, 15) && !saw(&s, 1));
	zr_close(r);
	/* held for ever: the log is kept within its bound all the same, the
	 * held generation's changes given up (its reader compares instead) */
	for (int g = 8; g < 80; g++) {
		for (uint64_t id = 10; id < 14; id++)
			cr_assert_eq(zr_modify(w, 0, id + (uint64_t)g % 3, value_of(800, buf)), 0);
		cr_assert_eq(zr_commit(w), 0);
		cr_assert_eq(stat(p, &st), 0);
		cr_assert_leq((uint64_t)st.st_size, zr_changes_max, "generation %d: %lld bytes", g,
			      (long long)st.st_size);
	}
	r = t_open(t_ds, ZR_RDONLY);
	cr_assert_eq(zr_changes(r, 2, note, &s), -ESTALE, "past the bound: compare");
	s.n = 0;
	cr_assert_eq(zr_changes(r, zr_generation(r) - 3, note, &s), 0, "recent ones are kept");
	cr_assert(saw(&s, 10) && saw(&s, 13));
	cr_assert_eq(zr_changes(r, 1, note, &s), -ESTALE, "nobody holds generation 1");
	zr_close(held);
	zr_close(r);
	for (int g = 0; g < 20; g++) {
		cr_assert_eq(zr_modify(w, 0, 20, value_of(900, buf)), 0);
		cr_assert_eq(zr_commit(w), 0);
	}
	cr_assert_eq(stat(p, &st), 0);
	cr_assert_leq(st.st_size, 16 + 24 * 31, "compacted when nobody holds old states");
	r = t_open(t_ds, ZR_RDONLY);
	cr_assert_eq(zr_changes(r, 2, note, &s), -ESTALE);
	cr_assert_eq(zr_changes(r, zr_generation(r) - 1, note, &s), 0);
	zr_close(r);
	zr_close(w);
	zr_changes_max = 4u << 20;
	free(m.tags);
}

/* ---- the writer's lock seen across machines ---- */

/* A writer on another machine sharing the dataset (GlusterFS) does not see
 * this machine's flock: it sees the exclusive lock on the writer's byte of
 * DATASET/readers, taken here the way such a writer takes it. */
Test(readers, a_writer_elsewhere_is_refused)
{
	t_create1(t_ds, ZR_RAW, 50);
	char p[512];
	snprintf(p, sizeof p, "%s/readers", t_ds);
	int fd = open(p, O_RDWR);
	cr_assert_geq(fd, 0);
	struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = INT64_MAX - 1,
			  .l_len = 1};
	cr_assert_eq(fcntl(fd, F_OFD_SETLK, &l), 0);
	zr_dataset *w = NULL;
	cr_assert_eq(zr_open(&w, t_ds, ZR_RDWR), -EBUSY);
	cr_assert_not_null(strstr(zr_errmsg(NULL), "another writer has the dataset open (on another machine"),
			   "%s", zr_errmsg(NULL));
	zr_dataset *r = t_open(t_ds, ZR_RDONLY); /* readers are not writers */
	zr_close(r);
	close(fd);
	w = t_open(t_ds, ZR_RDWR);
	/* and a writer holds it: another such writer would be refused */
	fd = open(p, O_RDWR);
	l.l_type = F_WRLCK;
	cr_assert_eq(fcntl(fd, F_OFD_SETLK, &l), -1);
	cr_assert(errno == EAGAIN || errno == EACCES, "%s", strerror(errno));
	close(fd);
	zr_close(w);
}
