/*
 * Description: changing records (core/write.c, core/commit.c): modify
 * redirects one entry, move gives one record's entry to another, delete moves the last record into the hole, both
 * through the overlay and the journal for committed records; reserve + put
 * gives parallel writers a deterministic order.
 */
#include "helpers.h"
#include "store_i.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>

TestSuite(edit, .init = t_setup, .fini = t_cleanup);

static void expect(zr_dataset *ds, unsigned field, uint64_t id, const char *want)
{
	zr_batch *b;
	size_t n;
	cr_assert_eq(zr_gather(ds, field, &id, 1, &b), 0, "%s", zr_errmsg(ds));
	const zr_slice *s = zr_batch_records(b, &n);
	if (!want) {
		cr_assert_null(s[0].data, "record %llu should be missing", (unsigned long long)id);
	} else {
		cr_assert_not_null(s[0].data, "record %llu missing", (unsigned long long)id);
		cr_assert_eq(s[0].len, strlen(want), "record %llu: length %llu", (unsigned long long)id,
			     (unsigned long long)s[0].len);
		cr_assert_eq(memcmp(s[0].data, want, s[0].len), 0, "record %llu: '%.*s' != '%s'",
			     (unsigned long long)id, (int)s[0].len, (const char *)s[0].data, want);
	}
	zr_batch_release(b);
}

static void make_abcde(zr_compress c)
{
	zr_field_spec f[2] = {{.name = "s", .dtype = ZR_BYTES, .compress = c},
			      {.name = "n", .dtype = ZR_BYTES}};
	cr_assert_eq(zr_create(t_ds, f, 2, NULL), 0);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	const char *s[] = {"a", "b", "c", "d", "e"}, *n[] = {"0", "1", "2", "3", "4"};
	for (int i = 0; i < 5; i++) {
		zr_value v[2] = {{s[i], 1}, {n[i], 1}};
		cr_assert_eq(zr_append(ds, v, NULL), 0);
	}
	cr_assert_eq(zr_commit(ds), 0);
	zr_close(ds);
}

static void modify_then_reopen(zr_compress c)
{
	make_abcde(c);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	cr_assert_eq(zr_modify(ds, 0, 1, (zr_value){"BBB", 3}), 0);
	cr_assert_eq(zr_modify(ds, 1, 3, (zr_value){NULL, 0}), 0); /* make missing */
	cr_assert_eq(zr_modify(ds, 0, 9, (zr_value){"x", 1}), -ENOENT);
	expect(ds, 0, 1, "BBB"); /* the writer sees its change at once */
	expect(ds, 1, 3, NULL);
	/* another reader sees the committed state until the commit */
	zr_dataset *r = t_open(t_ds, ZR_RDONLY);
	expect(r, 0, 1, "b");
	expect(r, 1, 3, "3");
	zr_close(r);
	cr_assert_eq(zr_commit(ds), 0);
	cr_assert_eq(access("journal", F_OK), -1);
	zr_close(ds);
	ds = t_open(t_ds, ZR_RDONLY);
	expect(ds, 0, 1, "BBB");
	expect(ds, 1, 1, "1");
	expect(ds, 1, 3, NULL);
	expect(ds, 0, 3, "d");
	cr_assert_eq(zr_verify(ds, NULL, NULL), 0);
	zr_info in;
	cr_assert_eq(zr_info_get(ds, &in), 0);
	cr_assert_lt(in.utilisation, 1.0, "the old bytes of record 1 are dead space");
	zr_close(ds);
}

Test(edit, modify_raw)
{
	modify_then_reopen(ZR_RAW);
}

Test(edit, modify_flate)
{
	modify_then_reopen(ZR_FLATE);
}

Test(edit, delete_moves_the_last_record_into_the_hole)
{
	make_abcde(ZR_RAW);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	cr_assert_eq(zr_delete(ds, 1), 0);
	cr_assert_eq(zr_length(ds), 4);
	expect(ds, 0, 1, "e");
	expect(ds, 1, 1, "4");
	cr_assert_eq(zr_delete(ds, 3), 0); /* the last: just shrinks */
	cr_assert_eq(zr_length(ds), 3);
	cr_assert_eq(zr_delete(ds, 3), -ENOENT);
	cr_assert_eq(zr_commit(ds), 0);
	zr_close(ds);
	ds = t_open(t_ds, ZR_RDONLY);
	cr_assert_eq(zr_length(ds), 3);
	expect(ds, 0, 0, "a");
	expect(ds, 0, 1, "e");
	expect(ds, 0, 2, "c");
	cr_assert_eq(zr_verify(ds, NULL, NULL), 0);
	zr_close(ds);
}

static void move_entries(zr_compress c)
{
	make_abcde(c);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	zr_value v[2] = {{"f", 1}, {"5", 1}};
	cr_assert_eq(zr_append(ds, v, NULL), 0); /* 5: not committed yet, beyond high */
	cr_assert_eq(zr_move(ds, 0, 1, 3), 0);     /* committed onto committed */
	cr_assert_eq(zr_move(ds, 0, 5, 0), 0);     /* appended onto committed */
	cr_assert_eq(zr_move(ds, 0, 2, 2), 0);     /* onto itself: nothing */
	cr_assert_eq(zr_move(ds, 0, 1, 6), -ENOENT);
	cr_assert_eq(zr_move(ds, 2, 1, 2), -ENOENT);
	expect(ds, 0, 3, "b");
	expect(ds, 0, 1, NULL);
	expect(ds, 0, 0, "f");
	expect(ds, 0, 5, NULL);
	expect(ds, 0, 2, "c");
	expect(ds, 1, 1, "1"); /* other fields stay */
	zr_dataset *r = t_open(t_ds, ZR_RDONLY); /* a reader of the last commit */
	expect(r, 0, 3, "d");
	expect(r, 0, 1, "b");
	cr_assert_eq(zr_commit(ds), 0);
	expect(r, 0, 3, "d");
	zr_close(r);
	zr_close(ds);
	ds = t_open(t_ds, ZR_RDONLY);
	expect(ds, 0, 3, "b");
	expect(ds, 0, 1, NULL);
	expect(ds, 0, 0, "f");
	expect(ds, 0, 5, NULL);
	cr_assert_eq(zr_verify(ds, NULL, NULL), 0);
	zr_close(ds);
}

Test(edit, move_gives_the_entry_and_leaves_the_source_missing_raw)
{
	move_entries(ZR_RAW);
}

Test(edit, move_gives_the_entry_and_leaves_the_source_missing_flate)
{
	move_entries(ZR_FLATE);
}

Test(edit, move_is_refused_read_only)
{
	make_abcde(ZR_RAW);
	zr_dataset *ds = t_open(t_ds, ZR_RDONLY);
	cr_assert_eq(zr_move(ds, 0, 1, 2), -EROFS);
	zr_close(ds);
}

Test(edit, delete_a_set_in_descending_order)
{
	make_abcde(ZR_RAW);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	/* delete {0, 3}: 3 first (e moves to 3), then 0 (e moves on to 0) */
	cr_assert_eq(zr_delete(ds, 3), 0);
	cr_assert_eq(zr_delete(ds, 0), 0);
	cr_assert_eq(zr_commit(ds), 0);
	zr_close(ds);
	ds = t_open(t_ds, ZR_RDONLY);
	cr_assert_eq(zr_length(ds), 3);
	expect(ds, 0, 0, "e");
	expect(ds, 0, 1, "b");
	expect(ds, 0, 2, "c");
	zr_close(ds);
}

Test(edit, append_after_delete_reuses_the_id_cleanly)
{
	make_abcde(ZR_RAW);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	cr_assert_eq(zr_delete(ds, 4), 0);
	zr_value v[2] = {{"new", 3}, {NULL, 0}};
	uint64_t id;
	cr_assert_eq(zr_append(ds, v, &id), 0);
	cr_assert_eq(id, 4);
	expect(ds, 0, 4, "new");
	expect(ds, 1, 4, NULL); /* not the deleted record's "4" */
	/* a reader of the committed state still sees the old record 4 */
	zr_dataset *r = t_open(t_ds, ZR_RDONLY);
	expect(r, 0, 4, "e");
	zr_close(r);
	cr_assert_eq(zr_commit(ds), 0);
	zr_close(ds);
	ds = t_open(t_ds, ZR_RDONLY);
	expect(ds, 0, 4, "new");
	expect(ds, 1, 4, NULL);
	zr_close(ds);
}

Test(edit, uncommitted_edits_are_discarded)
{
	make_abcde(ZR_RAW);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	cr_assert_eq(zr_modify(ds, 0, 0, (zr_value){"zzz", 3}), 0);
	cr_assert_eq(zr_delete(ds, 2), 0);
	zr_close(ds);
	ds = t_open(t_ds, ZR_RDONLY);
	cr_assert_eq(zr_length(ds), 5);
	expect(ds, 0, 0, "a");
	expect(ds, 0, 2, "c");
	cr_assert_eq(zr_verify(ds, NULL, NULL), 0);
	zr_close(ds);
}

Test(edit, a_batch_keeps_its_bytes_across_a_modify)
{
	make_abcde(ZR_RAW);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	uint64_t id = 2;
	zr_batch *b;
	size_t n;
	cr_assert_eq(zr_gather(ds, 0, &id, 1, &b), 0);
	cr_assert_eq(zr_modify(ds, 0, 2, (zr_value){"CC", 2}), 0);
	cr_assert_eq(zr_commit(ds), 0);
	const zr_slice *s = zr_batch_records(b, &n);
	cr_assert_eq(s[0].len, 1);
	cr_assert_eq(((const char *)s[0].data)[0], 'c');
	zr_batch_release(b);
	zr_close(ds);
}

static int keep_journal_unlinkat(int dirfd, const char *path, int flags)
{
	if (strncmp(path, "journal", 7) == 0)
		return 0; /* as if the crash came before the unlink */
	return unlinkat(dirfd, path, flags);
}

Test(edit, journal_of_the_current_generation_is_replayed)
{
	/* Build the state "meta.json committed, journal not yet applied": commit
	 * a modify while the journal's unlink is suppressed, then put the old
	 * entry back into the table by hand. */
	make_abcde(ZR_RAW);
	char tbl[400], jpath[400];
	snprintf(tbl, sizeof tbl, "%s/s.offset", t_ds);
	uint8_t old_entry[16];
	int fd = open(tbl, O_RDONLY);
	cr_assert_eq(pread(fd, old_entry, 16, 16), 16);
	close(fd);

	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	cr_assert_eq(zr_modify(ds, 0, 1, (zr_value){"XY", 2}), 0);
	zr_sys.unlinkat = keep_journal_unlinkat;
	cr_assert_eq(zr_commit(ds), 0);
	zr_sys_reset();
	snprintf(jpath, sizeof jpath, "%s/journal.%llu", t_ds,
		 (unsigned long long)zr_generation(ds));
	zr_close(ds);
	cr_assert_eq(access(jpath, F_OK), 0, "journal should have been kept");
	fd = open(tbl, O_RDWR);
	cr_assert_eq(pwrite(fd, old_entry, 16, 16), 16);
	close(fd);

	/* a reader overlays the journal in memory, and writes nothing */
	ds = t_open(t_ds, ZR_RDONLY);
	expect(ds, 0, 1, "XY");
	zr_close(ds);
	cr_assert_eq(access(jpath, F_OK), 0);
	/* a writer replays it into the table and removes it */
	ds = t_open(t_ds, ZR_RDWR);
	expect(ds, 0, 1, "XY");
	zr_close(ds);
	cr_assert_eq(access(jpath, F_OK), -1);
	fd = open(tbl, O_RDONLY);
	uint8_t now[16];
	cr_assert_eq(pread(fd, now, 16, 16), 16);
	close(fd);
	cr_assert_neq(memcmp(now, old_entry, 16), 0, "table not updated by the replay");
	ds = t_open(t_ds, ZR_RDONLY);
	expect(ds, 0, 1, "XY");
	cr_assert_eq(zr_verify(ds, NULL, NULL), 0);
	zr_close(ds);
}

Test(edit, journal_of_an_older_generation_is_ignored)
{
	make_abcde(ZR_RAW);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	cr_assert_eq(zr_modify(ds, 0, 1, (zr_value){"XY", 2}), 0);
	zr_sys.unlinkat = keep_journal_unlinkat;
	cr_assert_eq(zr_commit(ds), 0);
	zr_sys_reset();
	/* a later commit moves the generation on: the old journal is stale */
	cr_assert_eq(zr_modify(ds, 0, 2, (zr_value){NULL, 0}), 0);
	zr_value v[2] = {{"f", 1}, {"5", 1}};
	cr_assert_eq(zr_append(ds, v, NULL), 0);
	zr_sys.unlinkat = keep_journal_unlinkat;
	cr_assert_eq(zr_commit(ds), 0);
	zr_sys_reset();
	cr_assert_eq(zr_modify(ds, 0, 3, (zr_value){"Q", 1}), 0);
	zr_close(ds); /* uncommitted: its journal was never written */
	ds = t_open(t_ds, ZR_RDONLY);
	expect(ds, 0, 1, "XY");
	expect(ds, 0, 2, NULL);
	expect(ds, 0, 3, "d");
	zr_close(ds);
}

struct pw {
	zr_dataset *ds;
	uint64_t first, n;
	int rc;
};

static void *put_worker(void *arg)
{
	struct pw *p = arg;
	zr_writer *w;
	uint8_t buf[300];
	p->rc = zr_writer_open(p->ds, &w);
	for (uint64_t id = p->first; id < p->first + p->n && p->rc == 0; id++) {
		size_t n = t_len(21, id, sizeof buf);
		t_fill(buf, n, 21, id);
		zr_value v = {buf, n};
		p->rc = zr_writer_put(w, id, &v);
	}
	zr_writer_close(w);
	return NULL;
}

Test(edit, four_writers_put_reserved_ids_in_order)
{
	t_create1(t_ds, ZR_FLATE, 1000);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	uint64_t first;
	cr_assert_eq(zr_reserve(ds, 20000, &first), 0);
	cr_assert_eq(first, 0);
	struct pw p[4];
	pthread_t th[4];
	for (int i = 0; i < 4; i++) {
		p[i] = (struct pw){ds, (uint64_t)i * 5000, 5000, 0};
		pthread_create(&th[i], NULL, put_worker, &p[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		cr_assert_eq(p[i].rc, 0, "writer %d: %s", i, zr_errmsg(ds));
	}
	zr_writer *extra[5];
	for (int i = 0; i < 4; i++)
		cr_assert_eq(zr_writer_open(ds, &extra[i]), 0);
	cr_assert_eq(zr_writer_open(ds, &extra[4]), -EMFILE);
	for (int i = 0; i < 4; i++)
		zr_writer_close(extra[i]);
	cr_assert_eq(zr_commit(ds), 0);
	zr_close(ds);
	ds = t_open(t_ds, ZR_RDONLY);
	t_check_range(ds, 21, 0, 20000, 300);
	cr_assert_eq(zr_verify(ds, NULL, NULL), 0);
	zr_info in;
	cr_assert_eq(zr_info_get(ds, &in), 0);
	cr_assert_geq(in.chunk_count, 20, "writers must use chunks of their own");
	zr_close(ds);
}

Test(edit, put_outside_the_reservation_is_refused)
{
	t_create1(t_ds, ZR_RAW, 0);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	zr_writer *w;
	cr_assert_eq(zr_writer_open(ds, &w), 0);
	zr_value v = {"x", 1};
	cr_assert_eq(zr_writer_put(w, 0, &v), -ENOENT);
	uint64_t first;
	cr_assert_eq(zr_reserve(ds, 2, &first), 0);
	cr_assert_eq(zr_writer_put(w, 1, &v), 0);
	expect(ds, 0, 0, NULL); /* reserved, not written: missing */
	expect(ds, 0, 1, "x");
	zr_writer_close(w);
	zr_close(ds);
}

Test(edit, a_value_of_a_ragged_field_is_whole_items)
{
	zr_field_spec f[1] = {{.name = "v", .dtype = ZR_I64}}; /* variable shape */
	int64_t two[2] = {7, -7};
	zr_dataset *ds;
	uint64_t id;

	cr_assert_eq(zr_create(t_ds, f, 1, NULL), 0);
	cr_assert_eq(zr_open(&ds, t_ds, ZR_RDWR), 0);
	cr_assert_eq(zr_append(ds, (zr_value[]){{two, 16}}, &id), 0);
	cr_assert_eq(zr_append(ds, (zr_value[]){{two, 0}}, &id), 0, "no items is whole");
	cr_assert_eq(zr_append(ds, (zr_value[]){{"abc", 3}}, &id), -EINVAL);
	cr_assert(strstr(zr_errmsg(ds), "whole 8-byte items") != NULL, "%s", zr_errmsg(ds));
	cr_assert_eq(zr_modify(ds, 0, 0, (zr_value){two, 12}), -EINVAL);
	cr_assert_eq(zr_commit(ds), 0);
	cr_assert_eq(zr_length(ds), 2);
	zr_close(ds);
}
