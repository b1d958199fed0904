/*
 * Description: the one table of inode numbers the kernel holds
 * (fs/inodes.c): a number is held from its first hand to the FORGET of its
 * last lookup, never below 0; the reference its subtree took with each hand
 * is let go exactly once (at once for a number held already, at the last
 * FORGET for the one the table keeps), also by many threads at once; a pin
 * shows its view until the last FORGET; a record's numbers, every version
 * and its twin in tree/, are one family; an adopted number tells its new
 * subtree; the root is never counted.
 */
#include "fs_fixture.h"

#include <pthread.h>

TestSuite(inodes, .init = t_fs_setup, .fini = t_fs_teardown);

/* A subtree that counts the references let go, per number (low bits). */
static atomic_uint let_go_calls[256];

static void count_let_go(struct zrfs *fs, fuse_ino_t ino)
{
	(void)fs;
	atomic_fetch_add(&let_go_calls[ino & 255], 1);
}

static const struct zrfs_subtree counting = {.name = "counting", .let_go = count_let_go};
static const struct zrfs_subtree other = {.name = "other", .let_go = count_let_go};

#define N1 (ZRFS_INO_BY_CLASS | 1)
#define N2 (ZRFS_INO_BY_CLASS | 2)

Test(inodes, a_number_is_held_from_its_first_hand_to_its_last_forget)
{
	cr_assert(!zrfs_inode_held(&t_fs, N1));
	cr_assert_eq(zrfs_inode_hand(&t_fs, N1, &counting), 0);
	cr_assert_eq(zrfs_inode_hand(&t_fs, N1, &counting), 0);
	cr_assert_eq(zrfs_inode_hand(&t_fs, N1, &counting), 0);
	cr_assert_eq(let_go_calls[1], 2, "the references of lookups of a number held go at once");
	cr_assert(zrfs_inode_held(&t_fs, N1));
	cr_assert_eq(zrfs_inodes_held(&t_fs), 1);
	cr_assert(!zrfs_inode_forget(&t_fs, N1, 2));
	cr_assert(zrfs_inode_held(&t_fs, N1));
	cr_assert_eq(let_go_calls[1], 2);
	cr_assert(zrfs_inode_forget(&t_fs, N1, 1), "the last lookup forgotten");
	cr_assert_eq(let_go_calls[1], 3, "the reference kept goes with the last FORGET");
	cr_assert(!zrfs_inode_held(&t_fs, N1));
	cr_assert_eq(zrfs_inodes_held(&t_fs), 0);
	/* a FORGET of more than was handed, or of a number never handed */
	cr_assert_eq(zrfs_inode_hand(&t_fs, N2, &counting), 0);
	cr_assert(zrfs_inode_forget(&t_fs, N2, 5));
	cr_assert(!zrfs_inode_forget(&t_fs, N2, 1), "a count below 0");
	cr_assert_eq(let_go_calls[2], 1);
	cr_assert_eq(zrfs_inodes_held(&t_fs), 0);
}

Test(inodes, the_root_is_never_counted)
{
	cr_assert_eq(zrfs_inode_hand(&t_fs, ZRFS_INO_ROOT, &counting), 0);
	cr_assert(!zrfs_inode_held(&t_fs, ZRFS_INO_ROOT));
	cr_assert_eq(let_go_calls[ZRFS_INO_ROOT], 1);
	cr_assert(!zrfs_inode_forget(&t_fs, ZRFS_INO_ROOT, 1));
}

Test(inodes, a_pin_shows_its_view_until_the_last_forget)
{
	struct zrfs_view *v = zrfs_view_current(&t_fs), *got;
	unsigned refs = atomic_load(&v->refs);

	cr_assert_eq(zrfs_inode_pin(&t_fs, N1, v), 0, "a number not held shows nothing");
	cr_assert_null(zrfs_inode_view(&t_fs, N1));
	zrfs_inode_hand(&t_fs, N1, NULL);
	zrfs_inode_hand(&t_fs, N1, NULL);
	cr_assert(!zrfs_inode_pinned(&t_fs, N1));
	cr_assert_eq(zrfs_inode_pin(&t_fs, N1, v), 1);
	cr_assert_eq(zrfs_inode_pin(&t_fs, N1, v), 0, "the first pin stays");
	cr_assert(zrfs_inode_pinned(&t_fs, N1));
	cr_assert_eq(atomic_load(&v->refs), refs + 1);
	cr_assert_eq(got = zrfs_inode_view(&t_fs, N1), v);
	zrfs_view_put(got);
	cr_assert(!zrfs_inode_forget(&t_fs, N1, 1));
	cr_assert_eq(zrfs_inode_view(&t_fs, N1), v, "a lookup still held keeps the pin");
	zrfs_view_put(v);
	cr_assert(zrfs_inode_forget(&t_fs, N1, 1));
	cr_assert_eq(atomic_load(&v->refs), refs, "the last FORGET lets the view go");
	/* taken back: the number is held, and shows no view of its own */
	zrfs_inode_hand(&t_fs, N2, NULL);
	zrfs_inode_pin(&t_fs, N2, v);
	cr_assert(zrfs_inode_unpin(&t_fs, N2));
	cr_assert(!zrfs_inode_unpin(&t_fs, N2));
	cr_assert(zrfs_inode_held(&t_fs, N2));
	cr_assert_eq(atomic_load(&v->refs), refs);
	zrfs_inode_forget(&t_fs, N2, 1);
	zrfs_view_put(v);
}

Test(inodes, a_records_numbers_are_one_family)
{
	fuse_ino_t v3 = zrfs_rec_ino(1, 7, 3);

	zrfs_inode_hand(&t_fs, v3, NULL);
	cr_assert(zrfs_inode_family_held(&t_fs, zrfs_rec_ino(1, 7, 0)));
	cr_assert(zrfs_inode_family_held(&t_fs, zrfs_rec_text_ino(zrfs_rec_ino(1, 7, 200))));
	cr_assert(!zrfs_inode_family_held(&t_fs, zrfs_rec_ino(1, 8, 3)), "another record");
	cr_assert(!zrfs_inode_family_held(&t_fs, zrfs_rec_ino(2, 7, 3)), "another field");
	cr_assert(!zrfs_inode_held(&t_fs, zrfs_rec_ino(1, 7, 0)), "another number");
	zrfs_inode_forget(&t_fs, v3, 1);
	zrfs_inode_hand(&t_fs, zrfs_rec_text_ino(v3), NULL);
	cr_assert(zrfs_inode_family_held(&t_fs, v3), "the twin in tree/");
	zrfs_inode_forget(&t_fs, zrfs_rec_text_ino(v3), 1);
	cr_assert(!zrfs_inode_family_held(&t_fs, v3));
}

Test(inodes, an_adopted_number_tells_its_new_subtree)
{
	cr_assert(!zrfs_inode_adopt(&t_fs, N1, &other), "a number not held");
	zrfs_inode_hand(&t_fs, N1, NULL);
	cr_assert(zrfs_inode_adopt(&t_fs, N1, &other));
	cr_assert(zrfs_inode_forget(&t_fs, N1, 1));
	cr_assert_eq(let_go_calls[1], 1);
}

/* Threads hand and forget the same few numbers at once: every reference
 * is let go once, and nothing is held at the end. */
#define THREADS 4
#define ROUNDS 20000

static atomic_uint failed;

static void *hand_and_forget(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;

	for (int i = 0; i < ROUNDS; i++) {
		fuse_ino_t ino = ZRFS_INO_BY_CLASS | (rand_r(&seed) % 8);
		if (zrfs_inode_hand(&t_fs, ino, &counting) < 0)
			atomic_fetch_add(&failed, 1);
		if (rand_r(&seed) % 2) { /* a second lookup, forgotten first */
			zrfs_inode_hand(&t_fs, ino, &counting);
			zrfs_inode_forget(&t_fs, ino, 1);
		}
		zrfs_inode_forget(&t_fs, ino, 1);
	}
	return NULL;
}

Test(inodes, counts_hold_under_threads)
{
	pthread_t t[THREADS];
	unsigned total = 0;

	for (uintptr_t i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, hand_and_forget, (void *)(i + 1));
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(failed, 0);
	cr_assert_eq(zrfs_inodes_held(&t_fs), 0);
	for (int i = 0; i < 8; i++)
		total += let_go_calls[i];
	/* one reference per hand: ROUNDS, and about half as many more */
	cr_assert_geq(total, THREADS * ROUNDS);
	unsigned seeds_extra = 0;
	for (uintptr_t i = 0; i < THREADS; i++) {
		unsigned seed = (unsigned)(i + 1);
		for (int r = 0; r < ROUNDS; r++) {
			(void)(rand_r(&seed) % 8);
			seeds_extra += rand_r(&seed) % 2;
		}
	}
	cr_assert_eq(total, THREADS * ROUNDS + seeds_extra, "a reference let go twice, or never");
}
