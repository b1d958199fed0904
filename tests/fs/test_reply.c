/*
 * Description: replies (fs/reply.c) without a mount: every library code
 * maps to one errno; pieces merge only where their bytes follow each other
 * in one file (or in memory) and grow past their first capacity; a reply of
 * pieces sends the same bytes from the mappings (one writev) as read from
 * the files (the core's reader); a reply of one small piece is a copy read
 * from its file, not sent from the mapping; and a chunk shorter than a piece
 * is EIO, wherever it ends.
 */
#include "fs_fixture.h"

#include <fcntl.h>
#include <sys/stat.h>

TestSuite(reply);

Test(reply, every_code_maps_to_one_errno)
{
	cr_assert_eq(zrfs_errno(ZR_ECORRUPT), -EIO);
	cr_assert_eq(zrfs_errno(ZR_EVERSION), -EIO);
	cr_assert_eq(zrfs_errno(ZR_EINVAL_SPEC), -EINVAL);
	cr_assert_eq(zrfs_errno(-ENOENT), -ENOENT);
	cr_assert_eq(zrfs_errno(-ENOMEM), -ENOMEM);
	cr_assert_eq(zrfs_errno(-EFBIG), -EFBIG);
	cr_assert_eq(zrfs_errno(-99999), -EIO);
	cr_assert_eq(zrfs_errno(0), -EIO, "not an error: a caller's mistake, still an errno");
	zrfs_reply_err(NULL, ZR_ECORRUPT);
	cr_assert_eq(t_reply.kind, 'e');
	cr_assert_eq(t_reply.err, EIO, "sent positive, as FUSE wants");
}

Test(reply, pieces_merge_only_where_bytes_follow)
{
	static const char mem[64];
	struct zrfs_pieces p;

	cr_assert_eq(zrfs_pieces_init(&p, 1), 0);
	cr_assert_eq(zrfs_pieces_add(&p, 5, 100, mem, 10), 0);
	cr_assert_eq(zrfs_pieces_add(&p, 5, 110, mem + 10, 10), 0); /* follows: merged */
	cr_assert_eq(p.bv->count, 1);
	cr_assert_eq(p.bv->buf[0].size, 20);
	cr_assert_eq(zrfs_pieces_add(&p, 6, 120, mem + 20, 10), 0);  /* another file */
	cr_assert_eq(zrfs_pieces_add(&p, 6, 140, mem + 30, 10), 0);  /* a gap */
	cr_assert_eq(zrfs_pieces_add(&p, 6, 150, NULL, 10), 0);      /* unmapped */
	cr_assert_eq(zrfs_pieces_add(&p, -1, 0, mem, 4), 0);         /* memory */
	cr_assert_eq(zrfs_pieces_add(&p, -1, 0, mem + 4, 4), 0);     /* follows it */
	cr_assert_eq(zrfs_pieces_add(&p, -1, 0, mem, 4), 0);         /* does not */
	cr_assert_eq(zrfs_pieces_add(&p, -1, 0, mem, 0), 0);         /* nothing */
	cr_assert_eq(p.bv->count, 6);
	cr_assert_eq(zrfs_pieces_size(&p), 20 + 30 + 8 + 4);
	for (int i = 0; i < 3000; i++) /* past the first capacity, many times */
		cr_assert_eq(zrfs_pieces_add(&p, 7, (uint64_t)i * 2, NULL, 1), 0);
	cr_assert_eq(p.bv->count, 3006);
	cr_assert_eq(p.bv->buf[3005].pos, 5998);
	zrfs_pieces_free(&p);
}

Test(reply, slices)
{
	size_t len;
	zrfs_reply_slice(NULL, "abcdef", 6, 4, 3);
	const uint8_t *b = t_bytes(&len);
	cr_assert(len == 3 && memcmp(b, "def", 3) == 0);
	zrfs_reply_slice(NULL, "abcdef", 6, 4, 6);
	t_bytes(&len);
	cr_assert_eq(len, 0);
	zrfs_reply_slice(NULL, "abcdef", 6, 4, 600);
	t_bytes(&len);
	cr_assert_eq(len, 0);
}

/* The pieces of records 1, 7 and 8 (whole) and half of 9, with their
 * mappings or without, and a header in memory between them. */
static void record_pieces(struct zrfs_view *v, struct zrfs_pieces *p, bool mapped, zr_batch **g,
			  uint8_t *want, size_t *want_len)
{
	uint64_t ids[] = {1, 7, 8, 9};
	struct zrfs_row rows[4];
	size_t at = 0;
	cr_assert_eq(zrfs_records_locate(&t_fs, v, 2, ids, 4, rows, g), 0);
	cr_assert_eq(zrfs_pieces_init(p, 1), 0);
	for (int i = 0; i < 4; i++) {
		uint8_t val[64];
		int n = t_value(2, ids[i], val);
		cr_assert_eq(rows[i].len, (uint64_t)n);
		if (i == 3)
			n /= 2;
		cr_assert_eq(zrfs_pieces_add(p, rows[i].fd, rows[i].pos, mapped ? rows[i].mem : NULL,
					     (uint64_t)n), 0);
		memcpy(want + at, val, (size_t)n);
		at += (size_t)n;
		cr_assert_eq(zrfs_pieces_add(p, -1, 0, "--", 2), 0);
		memcpy(want + at, "--", 2);
		at += 2;
	}
	*want_len = at;
}

Test(reply, mapped_and_read_replies_send_the_same_bytes, .init = t_fs_setup,
     .fini = t_fs_teardown)
{
	for (int mapped = 0; mapped < 2; mapped++) {
		struct zrfs_pieces p;
		zr_batch *g;
		uint8_t want[256];
		size_t want_len, len;
		struct zrfs_view *v = zrfs_view_current(&t_fs);
		record_pieces(v, &p, mapped, &g, want, &want_len);
		zrfs_reply_pieces(NULL, &t_fs, v, &p, false);
		const uint8_t *b = t_bytes(&len);
		cr_assert_eq(len, want_len, "%s", mapped ? "mapped" : "read");
		cr_assert_eq(memcmp(b, want, len), 0, "%s", mapped ? "mapped" : "read");
		zrfs_pieces_free(&p);
		zr_batch_release(g);
		zrfs_view_put(v);
	}
}

Test(reply, a_piece_past_the_end_of_its_file_is_eio, .init = t_fs_setup, .fini = t_fs_teardown)
{
	struct zrfs_pieces p;
	zr_record_stat st;
	struct zrfs_view *v = zrfs_view_current(&t_fs);

	cr_assert_eq(zr_stat(v->ds, 2, 9, &st), 0);
	cr_assert_eq(zrfs_pieces_init(&p, 1), 0);
	cr_assert_eq(zrfs_pieces_add(&p, st.fd, UINT64_C(1) << 30, NULL, 100), 0);
	zrfs_reply_pieces(NULL, &t_fs, v, &p, false);
	cr_assert_eq(t_reply.kind, 'e');
	cr_assert_eq(t_reply.err, EIO);
	zrfs_pieces_free(&p);
	zrfs_view_put(v);
}

Test(reply, one_small_piece_is_a_copy_read_from_its_file, .init = t_fs_setup,
     .fini = t_fs_teardown)
{
	struct zrfs_view *v = zrfs_view_current(&t_fs);
	uint64_t id = 7;
	struct zrfs_row row;
	struct zrfs_pieces p;
	uint8_t val[64];
	zr_batch *g;
	size_t len;
	int n = t_value(2, id, val);

	cr_assert_eq(zrfs_records_locate(&t_fs, v, 2, &id, 1, &row, &g), 0);
	cr_assert(row.mem != NULL && row.len == (uint64_t)n);
	cr_assert_eq(zrfs_pieces_init(&p, 1), 0);
	cr_assert_eq(zrfs_pieces_add(&p, row.fd, row.pos, row.mem, row.len), 0);
	zrfs_reply_pieces(NULL, &t_fs, v, &p, false);
	const uint8_t *b = t_bytes(&len);
	cr_assert(len == (size_t)n && memcmp(b, val, len) == 0);
	cr_assert_neq(t_reply.from, row.mem, "sent from the mapping");
	zrfs_pieces_free(&p);
	zr_batch_release(g);
	zrfs_view_put(v);
}

Test(reply, a_piece_its_chunk_ends_inside_is_eio, .init = t_fs_setup, .fini = t_fs_teardown)
{
	struct zrfs_pieces p;
	zr_record_stat rs;
	struct stat st;
	struct zrfs_view *v = zrfs_view_current(&t_fs);

	cr_assert_eq(zr_stat(v->ds, 2, 9, &rs), 0);
	cr_assert_eq(fstat(rs.fd, &st), 0);
	cr_assert_geq(st.st_size, 10);
	cr_assert_eq(zrfs_pieces_init(&p, 1), 0);
	cr_assert_eq(zrfs_pieces_add(&p, rs.fd, (uint64_t)st.st_size - 10, NULL, 100), 0);
	zrfs_reply_pieces(NULL, &t_fs, v, &p, false);
	cr_assert_eq(t_reply.kind, 'e');
	cr_assert_eq(t_reply.err, EIO);
	zrfs_pieces_free(&p);
	zrfs_view_put(v);
}
