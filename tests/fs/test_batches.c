/*
 * Description: /.batches without a mount (fs/batches.c): names parse only
 * in their canonical form, every node's inode number decodes back to the
 * node (owned by this subtree alone, with the right type), step files have
 * named kinds that list in a fixed order, and the listings of each level;
 * the tables of specs and epochs give back what the kernel and every lookup
 * have let go of, and only that, and what was made of an epoch given back
 * is not its slot's next epoch's; a step shows one view while the kernel
 * holds a file of it or it is among the latest pinned.
 */
#include "fs_fixture.h"
#include "batch_i.h"
#include "zrsampler.h"

TestSuite(batches, .init = t_fs_setup, .fini = t_fs_teardown);

#define SPEC "seq,batch=4,tail=keep" /* 10 records: steps of 4, 4, 2 */

static const struct zrfs_subtree *const B = &zrfs_batches;

static fuse_ino_t step_dir(const char *spec, const char *epoch, const char *step)
{
	int rc;
	fuse_ino_t top = t_lookup(B, ZRFS_INO_ROOT, ".batches", &rc);
	cr_assert_eq(rc, 0);
	fuse_ino_t s = t_lookup(B, top, spec, &rc);
	cr_assert_eq(rc, 0, "spec %s: %d", spec, rc);
	fuse_ino_t e = t_lookup(B, s, epoch, &rc);
	cr_assert_eq(rc, 0, "%s: %d", epoch, rc);
	fuse_ino_t k = t_lookup(B, e, step, &rc);
	cr_assert_eq(rc, 0, "step %s: %d", step, rc);
	return k;
}

/* The type of @ino by its attributes, asserting it is owned here only. */
static mode_t type_of(fuse_ino_t ino)
{
	struct stat st;
	cr_assert(B->owns(&t_fs, ino), "inode %llx is not owned by .batches",
		  (unsigned long long)ino);
	cr_assert(!zrfs_fields.owns(&t_fs, ino) && !zrfs_byclass.owns(&t_fs, ino),
		  "inode %llx has two owners", (unsigned long long)ino);
	cr_assert_eq(t_attr(B, ino, &st), 0, "attr of %llx", (unsigned long long)ino);
	cr_assert_eq(st.st_ino, ino);
	return st.st_mode & S_IFMT;
}

Test(batches, each_level_decodes_to_its_node)
{
	int rc;
	fuse_ino_t top = t_lookup(B, ZRFS_INO_ROOT, ".batches", &rc);
	cr_assert_eq(top, ZRFS_INO_BATCHES);
	cr_assert_eq(type_of(top), S_IFDIR);
	fuse_ino_t spec = t_lookup(B, top, SPEC, &rc);
	cr_assert_eq(type_of(spec), S_IFDIR);
	cr_assert_eq(t_lookup(B, top, SPEC, &rc), spec, "a spec keeps its inode");
	fuse_ino_t e0 = t_lookup(B, spec, "epoch-0", &rc), e7 = t_lookup(B, spec, "epoch-7", &rc);
	cr_assert_neq(e0, e7);
	cr_assert_eq(type_of(e7), S_IFDIR);
	cr_assert_eq(t_lookup(B, spec, "epoch-7", &rc), e7);

	fuse_ino_t k2 = step_dir(SPEC, "epoch-7", "2");
	cr_assert_eq(type_of(k2), S_IFDIR);
	/* every file of the step: its own inode, a regular file */
	static const char *const files[] = {"ids", "info.json", "x", "x.offsets", "x.npy",
					    "y", "y.offsets", "y.npy", "v", "v.offsets"};
	fuse_ino_t seen[10];
	for (int i = 0; i < 10; i++) {
		seen[i] = t_lookup(B, k2, files[i], &rc);
		cr_assert_eq(rc, 0, "%s", files[i]);
		cr_assert_eq(type_of(seen[i]), S_IFREG, "%s", files[i]);
		for (int j = 0; j < i; j++)
			cr_assert_neq(seen[i], seen[j], "%s and %s share an inode", files[i], files[j]);
		/* the same name in another step or epoch is another file */
		cr_assert_neq(seen[i], t_lookup(B, step_dir(SPEC, "epoch-7", "1"), files[i], &rc));
		cr_assert_neq(seen[i], t_lookup(B, step_dir(SPEC, "epoch-0", "2"), files[i], &rc));
	}
	/* sizes that follow from the batch alone: step 2 holds 2 ids */
	struct stat st;
	cr_assert_eq(t_attr(B, seen[0], &st), 0);
	cr_assert_eq(st.st_size, 2 * 8);
	cr_assert_eq(t_attr(B, seen[3], &st), 0);
	cr_assert_eq(st.st_size, 3 * 8);
}

Test(batches, names_that_are_not_canonical_or_in_range_are_enoent)
{
	int rc;
	fuse_ino_t top = t_lookup(B, ZRFS_INO_ROOT, ".batches", &rc);
	fuse_ino_t spec = t_lookup(B, top, SPEC, &rc);
	fuse_ino_t k0 = step_dir(SPEC, "epoch-0", "0");

	cr_assert_eq(t_lookup(B, ZRFS_INO_ROOT, "batches", &rc), 0);
	cr_assert_eq(rc, -ENOENT);
	static const char *const bad_specs[] = {"nosuch", "seq,batch=0", "seq,batch=04",
						"seq,hi=11", "Seq", ""};
	for (size_t i = 0; i < sizeof bad_specs / sizeof *bad_specs; i++) {
		t_lookup(B, top, bad_specs[i], &rc);
		cr_assert_eq(rc, -ENOENT, "spec '%s'", bad_specs[i]);
	}
	static const char *const bad_epochs[] = {"epoch-", "epoch-01", "epoch-x", "epoch--1",
						 "epoch-1099511627777", "epoch-99999999999999999999",
						 "epoch0", "0"};
	for (size_t i = 0; i < sizeof bad_epochs / sizeof *bad_epochs; i++) {
		t_lookup(B, spec, bad_epochs[i], &rc);
		cr_assert_eq(rc, -ENOENT, "'%s'", bad_epochs[i]);
	}
	fuse_ino_t e0 = t_lookup(B, spec, "epoch-0", &rc);
	static const char *const bad_steps[] = {"3", "02", "-1", "1.0", "", "epoch-0"};
	for (size_t i = 0; i < sizeof bad_steps / sizeof *bad_steps; i++) {
		t_lookup(B, e0, bad_steps[i], &rc);
		cr_assert_eq(rc, -ENOENT, "step '%s'", bad_steps[i]);
	}
	/* v has no fixed shape: no v.npy; no such field; no other suffix */
	static const char *const bad_files[] = {"v.npy", "z", "x.npz", "x.offsets.npy", "xx",
						"ids.npy", "info"};
	for (size_t i = 0; i < sizeof bad_files / sizeof *bad_files; i++) {
		t_lookup(B, k0, bad_files[i], &rc);
		cr_assert_eq(rc, -ENOENT, "file '%s'", bad_files[i]);
	}
	/* a file is not a directory */
	fuse_ino_t ids = t_lookup(B, k0, "ids", &rc);
	t_lookup(B, ids, "x", &rc);
	cr_assert_eq(rc, -ENOTDIR);
}

Test(batches, numbers_that_name_no_node_are_enoent)
{
	struct stat st;
	int rc;
	fuse_ino_t k0 = step_dir(SPEC, "epoch-0", "0");
	fuse_ino_t ids = t_lookup(B, k0, "ids", &rc);

	/* a slot, spec, step or kind nobody looked up */
	cr_assert_eq(t_attr(B, ZRFS_INO_EPOCH | 999, &st), -ENOENT);
	cr_assert_eq(t_attr(B, ZRFS_INO_SPEC + 999, &st), -ENOENT);
	cr_assert_eq(t_attr(B, k0 + (UINT64_C(3) << 10), &st), -ENOENT, "step 3 of 3");
	cr_assert_eq(t_attr(B, ids + 1000, &st), -ENOENT, "no such kind");
	/* x.npy's kind exists, v.npy's (no fixed shape) does not */
	fuse_ino_t xnpy = t_lookup(B, k0, "x.npy", &rc), v = t_lookup(B, k0, "v", &rc);
	cr_assert_eq(t_attr(B, xnpy, &st), 0);
	cr_assert_eq(t_attr(B, v + 2, &st), -ENOENT, "v's .npy kind");
}

/* Every entry of directory @dir, names joined by ' ', with positions that
 * resume where they say. */
static void listing(fuse_ino_t dir, char *out, size_t cap)
{
	struct zrfs_dirent d;
	uint64_t pos = 2;
	size_t at = 0;
	int rc;

	out[0] = 0;
	while ((rc = t_entry(B, dir, pos, &d)) == 1) {
		cr_assert_geq(d.pos, pos);
		at += (size_t)snprintf(out + at, cap - at, "%s%s", at ? " " : "", d.name);
		/* what lookup gives for the name is what the listing says */
		int lrc;
		cr_assert_eq(t_lookup(B, dir, d.name, &lrc), d.ino, "%s", d.name);
		pos = d.pos + 1;
	}
	cr_assert_eq(rc, 0);
}

Test(batches, listings_of_each_level)
{
	char names[1024];
	int rc;

	t_fs_close();
	t_fs_open(t_ds, "seq,batch=4:shuffle,seed=2,batch=3");
	listing(ZRFS_INO_BATCHES, names, sizeof names);
	cr_assert_str_eq(names, "seq,batch=4 shuffle,seed=2,batch=3 shuffle,batch=256,tail=keep",
			 "the -o batches specs, then the default");
	/* a spec looked up is not listed */
	t_lookup(B, ZRFS_INO_BATCHES, SPEC, &rc);
	listing(ZRFS_INO_BATCHES, names, sizeof names);
	cr_assert_null(strstr(names, "tail=keep,"));
	fuse_ino_t spec = t_lookup(B, ZRFS_INO_BATCHES, SPEC, &rc);
	listing(spec, names, sizeof names);
	cr_assert_str_eq(names, "epoch-0");
	listing(t_lookup(B, spec, "epoch-3", &rc), names, sizeof names);
	cr_assert_str_eq(names, "0 1 2");
	listing(step_dir(SPEC, "epoch-3", "1"), names, sizeof names);
	cr_assert_str_eq(names, "ids info.json x x.offsets x.npy y y.offsets y.npy v v.offsets");
	/* the root holds .batches only, at position 2 */
	struct zrfs_dirent d;
	cr_assert_eq(t_entry(B, ZRFS_INO_ROOT, 2, &d), 1);
	cr_assert_str_eq(d.name, ".batches");
	cr_assert_eq(t_entry(B, ZRFS_INO_ROOT, 3, &d), 0);
	/* a file has no entries */
	fuse_ino_t ids = t_lookup(B, step_dir(SPEC, "epoch-3", "1"), "ids", &rc);
	cr_assert_eq(t_entry(B, ids, 2, &d), -ENOTDIR);
}

Test(batches, reads_of_directories_and_unknown_nodes_fail)
{
	t_read(B, step_dir(SPEC, "epoch-0", "0"), 4096, 0);
	cr_assert_eq(t_reply.kind, 'e');
	cr_assert_eq(t_reply.err, EISDIR);
	t_read(B, ZRFS_INO_EPOCH | 999, 4096, 0);
	cr_assert_eq(t_reply.err, ENOENT);
}

/* ---- the tables ---- */

/* @name in @parent as dispatch.c looks it up: the number is handed to the
 * kernel (counted: it holds it until its FORGET) or let go. */
static fuse_ino_t found(fuse_ino_t parent, const char *name, bool handed)
{
	int rc;
	fuse_ino_t ino = t_lookup(B, parent, name, &rc);
	cr_assert_eq(rc, 0, "%s: %d", name, rc);
	if (handed)
		cr_assert_eq(zrfs_inode_hand(&t_fs, ino, B), 0);
	else
		B->let_go(&t_fs, ino);
	return ino;
}

/* PREFIX<k>SUFFIX in @parent for k in [@first, @last], nothing holding
 * them: the table past half. */
static void look_up_many(fuse_ino_t parent, const char *prefix, const char *suffix,
			 unsigned first, unsigned last)
{
	char name[64];
	for (unsigned k = first; k <= last; k++) {
		snprintf(name, sizeof name, "%s%u%s", prefix, k, suffix);
		found(parent, name, false);
	}
}

/* A pass asks the oldest back; the next gives back what nothing holds. */
static void two_passes(void)
{
	zrfs_prefetch_pass_now(&t_fs);
	zrfs_prefetch_pass_now(&t_fs);
}

static bool exists(fuse_ino_t ino)
{
	struct stat st;
	return t_attr(B, ino, &st) == 0;
}

Test(batches, specs_are_given_back_once_the_kernel_and_every_lookup_let_go)
{
	int rc;
	fuse_ino_t held = found(ZRFS_INO_BATCHES, "shuffle,seed=1,batch=4", true);
	fuse_ino_t let_go = found(ZRFS_INO_BATCHES, "shuffle,seed=2,batch=4", false);
	fuse_ino_t transit = t_lookup(B, ZRFS_INO_BATCHES, "shuffle,seed=3,batch=4", &rc);
	/* past half the table, newer ones that nothing holds */
	look_up_many(ZRFS_INO_BATCHES, "shuffle,seed=", ",batch=4", 4, SPECS_MAX / 2 + 7);
	two_passes();
	cr_assert(!exists(let_go), "a spec nothing holds was not given back");
	cr_assert(exists(held), "a spec the kernel holds was given back");
	cr_assert(exists(transit), "a spec a lookup found was given back before its reply");
	/* the kernel forgets it, the lookup's number is not handed: both go */
	zrfs_inode_forget(&t_fs, held, 1);
	B->let_go(&t_fs, transit);
	two_passes();
	cr_assert(!exists(held) && !exists(transit));
	/* the listed ones stay; a spec looked up again works, in a new entry */
	cr_assert(exists(ZRFS_INO_SPEC), "the listed default spec was given back");
	fuse_ino_t again = found(ZRFS_INO_BATCHES, "shuffle,seed=2,batch=4", false);
	cr_assert(exists(again));
	fuse_ino_t e = found(again, "epoch-1", false);
	cr_assert(exists(found(e, "1", false)));
}

/* The view the ids of step 0 of epoch @epoch of seq,batch=4 show; the
 * step and its file are handed to the kernel (*@ids: the file's number). */
static struct zrfs_view *step_view(unsigned epoch, fuse_ino_t *step, fuse_ino_t *ids)
{
	char name[32];
	snprintf(name, sizeof name, "epoch-%u", epoch);
	fuse_ino_t e = found(found(ZRFS_INO_BATCHES, "seq,batch=4", true), name, true);
	*step = found(e, "0", true);
	*ids = found(*step, "ids", true);
	return t_view_of(B, *ids);
}

/* The kernel forgets a step it was handed once, and its ids. */
static void forget_step(fuse_ino_t step, fuse_ino_t ids)
{
	cr_assert(zrfs_inode_forget(&t_fs, ids, 1));
	cr_assert(zrfs_inode_forget(&t_fs, step, 1));
}

/* Step 0 of epochs @first .. @first + 63 pinned, each in a state of its
 * own: every step held before shows a state past the 64 held. */
static void pin_64_newer(unsigned first)
{
	fuse_ino_t step, ids;
	for (unsigned k = first; k < first + 64; k++) {
		t_refresh();
		zrfs_view_put(step_view(k, &step, &ids));
	}
}

Test(batches, an_epoch_given_back_leaves_nothing_of_its_steps_to_the_next_in_its_slot)
{
	char name[64];
	size_t n_shuffled, n_seq, n;
	fuse_ino_t seq = found(ZRFS_INO_BATCHES, "seq,batch=4", true);
	fuse_ino_t shuffled = found(ZRFS_INO_BATCHES, "shuffle,seed=3,batch=4", true);
	/* step 0 of a shuffled epoch: y is flate, its batch assembled and cached */
	fuse_ino_t e = found(shuffled, "epoch-0", false);
	uint32_t slot = ino_slot(e);
	uint8_t *a = t_read_all(B, found(found(e, "0", false), "y", false), 4096, &n_shuffled);
	/* what a seq epoch's step 0 holds, from another slot */
	fuse_ino_t other = found(seq, "epoch-0", true);
	uint8_t *want = t_read_all(B, found(found(other, "0", false), "y", false), 4096, &n_seq);
	cr_assert(n_seq != n_shuffled || memcmp(a, want, n_seq) != 0);
	/* past half the table, newer ones that nothing holds */
	look_up_many(seq, "epoch-", "", 1, SLOTS_MAX / 2);
	two_passes();
	/* its step, among the latest pinned, holds it (given back and opened
	 * again, it would be ordered and shown anew): pushed out, it goes */
	cr_assert(exists(e), "an epoch whose step is among the latest was given back");
	pin_64_newer(2000000);
	two_passes();
	cr_assert(!exists(e), "an epoch nothing holds was not given back");
	cr_assert(exists(other), "an epoch the kernel holds was given back");
	/* new epochs until one takes the slot again: its step 0 is its own */
	for (unsigned k = 0; k < SLOTS_MAX; k++) {
		snprintf(name, sizeof name, "epoch-%u", 1000000 + k);
		if (ino_slot(e = found(seq, name, false)) == slot)
			break;
	}
	cr_assert_eq(ino_slot(e), slot);
	uint8_t *got = t_read_all(B, found(found(e, "0", false), "y", false), 4096, &n);
	cr_assert(n == n_seq && memcmp(got, want, n) == 0,
		  "an epoch in a slot given back reads what its last epoch made");
	free(a);
	free(want);
	free(got);
}

Test(batches, the_latest_steps_keep_their_views_when_the_kernel_forgets_them)
{
	fuse_ino_t step, ids;
	struct zrfs_view *first = step_view(0, &step, &ids), *v;
	t_refresh();
	/* the kernel forgets the step of itself: looked up again, it shows the
	 * view of its first lookup (the ids, then the data, read in turn) */
	forget_step(step, ids);
	v = step_view(0, &step, &ids);
	cr_assert_eq(v, first, "a step the kernel forgot changed views between its files");
	zrfs_view_put(v);
	/* the kernel forgets it again, and 64 newer steps are pinned: it goes */
	forget_step(step, ids);
	pin_64_newer(1);
	v = step_view(0, &step, &ids);
	cr_assert_neq(v, first, "a step long forgotten kept its view");
	zrfs_view_put(v);
	/* looked up again since its FORGET, it stays: its next FORGET unpins it */
	zrfs_view_put(first);
	first = step_view(100, &step, &ids);
	forget_step(step, ids);
	zrfs_view_put(step_view(100, &step, &ids));
	t_refresh();
	pin_64_newer(101);
	v = step_view(100, &step, &ids);
	cr_assert_eq(v, first, "a step the kernel holds lost its view");
	zrfs_view_put(v);
	cr_assert(zrfs_inode_forget(&t_fs, ids, 2), "two lookups of each since");
	cr_assert(zrfs_inode_forget(&t_fs, step, 2));
	pin_64_newer(201);
	v = step_view(100, &step, &ids);
	cr_assert_neq(v, first, "a step forgotten and pushed out of the latest kept its view");
	zrfs_view_put(v);
	zrfs_view_put(first);
}

/* Step 0 of @n epochs from @first read, in the current state, and
 * forgotten by the kernel. */
static void read_steps(unsigned first, unsigned n)
{
	fuse_ino_t step, ids;
	for (unsigned k = first; k < first + n; k++) {
		zrfs_view_put(step_view(k, &step, &ids));
		forget_step(step, ids);
	}
}

/* Steps held are bounded by the states they show, not by their number:
 * a step read while many others are read in its state keeps its view
 * (the ids, then the data, read in turn by one of many readers); past
 * 4,096 steps held, the one used least recently goes. */
Test(batches, many_steps_read_in_one_state_leave_a_step_its_view)
{
	fuse_ino_t step, ids;
	struct zrfs_view *first = step_view(0, &step, &ids), *v;
	t_refresh();
	forget_step(step, ids);
	read_steps(1, 1000);
	v = step_view(0, &step, &ids);
	cr_assert_eq(v, first, "a step changed views while 1,000 others were read");
	zrfs_view_put(v);
	forget_step(step, ids);
	read_steps(1001, 4096);
	v = step_view(0, &step, &ids);
	cr_assert_neq(v, first, "a step kept its view past 4,096 steps held");
	zrfs_view_put(v);
	zrfs_view_put(first);
}

/* The kernel counts the lookups of a step's file it holds, and FORGETs
 * them: the step keeps its view until every lookup of every file is
 * forgotten, however lookups and FORGETs interleave. */
Test(batches, a_step_keeps_its_view_while_any_lookup_of_its_files_is_held)
{
	fuse_ino_t step, ids, e;
	struct zrfs_view *first = step_view(0, &step, &ids), *v;
	t_refresh();
	e = found(found(ZRFS_INO_BATCHES, "seq,batch=4", true), "epoch-0", true);
	cr_assert_eq(found(e, "0", true), step);
	cr_assert_eq(found(step, "ids", true), ids);
	fuse_ino_t y = found(step, "y", true);
	cr_assert(!zrfs_inode_forget(&t_fs, ids, 1), "two lookups, one forgotten");
	cr_assert(zrfs_inode_forget(&t_fs, ids, 1));
	pin_64_newer(1);
	v = t_view_of(B, y);
	cr_assert_eq(v, first, "a step whose file the kernel holds lost its view");
	zrfs_view_put(v);
	cr_assert(zrfs_inode_forget(&t_fs, y, 1));
	v = step_view(0, &step, &ids);
	cr_assert_neq(v, first, "a step every file of which was forgotten kept its view");
	zrfs_view_put(v);
	zrfs_view_put(first);
}
