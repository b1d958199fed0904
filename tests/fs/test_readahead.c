/*
 * Description: the mount's read-ahead decisions (fs/readahead.c) without a
 * mount: records in the page cache are not asked for; once a whole batch
 * was found cached, the next batches check a sample of their first
 * ZRFS_WARM_SAMPLE records and any miss goes back to checking (and asking
 * for) every record.
 */
#include "zrfs_i.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

TestSuite(readahead);

#define PAGE 4096
#define S ZRFS_WARM_SAMPLE /* records that stand for a warm batch */
#define PAGES (4 * S)

static int fd = -1;
static uint8_t *map;

/* A file of PAGES pages on a disk filesystem, mapped, none of it cached. */
static void make_file(void)
{
	char path[] = "/var/tmp/zrfs-test-read-XXXXXX";
	uint8_t page[PAGE];

	fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	unlink(path);
	memset(page, 0x5a, sizeof page);
	for (int i = 0; i < PAGES; i++)
		cr_assert_eq(pwrite(fd, page, PAGE, (off_t)i * PAGE), PAGE);
	cr_assert_eq(fdatasync(fd), 0);
	map = mmap(NULL, PAGES * PAGE, PROT_READ, MAP_SHARED, fd, 0);
	cr_assert_neq(map, MAP_FAILED);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM); /* reads bring in no more than asked */
}

static void drop_file(void)
{
	if (map && map != MAP_FAILED)
		munmap(map, PAGES * PAGE);
	if (fd >= 0)
		close(fd);
}

static bool cached(int page)
{
	unsigned char v = 0;
	cr_assert_eq(mincore(map + (size_t)page * PAGE, PAGE, &v), 0);
	return v & 1;
}

/* Bring pages [from, to) into the page cache (a read, not a mapping touch:
 * a page mapped here could not be dropped again). */
static void cache_pages(int from, int to)
{
	uint8_t page[PAGE];
	for (int i = from; i < to; i++)
		cr_assert_eq(pread(fd, page, PAGE, (off_t)i * PAGE), PAGE);
}

/* Read ahead a batch of @n one-page records: pages first, first + 1, ...,
 * each a piece of its own, as records of different chunks would be
 * (zrfs_pieces_add would merge adjacent pages into one). How many records
 * it asked the kernel for. */
static size_t read_ahead(struct zrfs *fs, int first, int n)
{
	struct zrfs_pieces p;
	size_t asked;

	cr_assert_eq(zrfs_pieces_init(&p, (size_t)n), 0);
	for (int i = 0; i < n; i++)
		p.bv->buf[p.bv->count++] = (struct fuse_buf){
			.size = PAGE, .flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK, .fd = fd,
			.pos = (off_t)(first + i) * PAGE, .mem = map + (size_t)(first + i) * PAGE};
	asked = zrfs_read_ahead(fs, &p);
	zrfs_pieces_free(&p);
	return asked;
}

/* What was asked for is counted, not looked for in the page cache: a page
 * asked for is only reported there once its read completes. */
Test(readahead, warm_after_a_cached_batch_cold_after_a_miss, .init = make_file, .fini = drop_file)
{
	struct zrfs fs = {.opts = {.readaround = 0}};

	if (cached(0) || cached(PAGES - 1))
		cr_skip_test("this filesystem keeps dropped pages cached; nothing to observe");
	atomic_init(&fs.warm, false);
	cache_pages(0, 2 * S);
	cr_assert_eq(read_ahead(&fs, 0, 2 * S), 0, "every record cached: none asked for");
	cr_assert(atomic_load(&fs.warm), "a batch found all cached makes the dataset warm");

	/* warm: the first S records stand for the batch */
	cr_assert_eq(read_ahead(&fs, S, 2 * S), 0, "records S..2S-1 cached, 2S..3S-1 not");
	cr_assert(!cached(2 * S), "a record beyond the sample was not asked for");
	cr_assert(atomic_load(&fs.warm), "a cached sample keeps it warm");

	cr_assert_eq(read_ahead(&fs, 2 * S, S / 2), S / 2, "the first record is not cached");
	cr_assert(!atomic_load(&fs.warm), "a miss in the sample makes it cold");

	/* cold: every record is checked, so a batch whose first S records are
	 * cached asks for the missing ones after them (the S never asked for,
	 * and those of the last call whose reads may still be under way) */
	size_t asked = read_ahead(&fs, 0, 3 * S + S / 2);
	cr_assert(asked >= S && asked <= S + S / 2, "asked for %zu", asked);
	cr_assert(!atomic_load(&fs.warm));
}

Test(readahead, pieces_without_files_are_not_counted, .init = make_file, .fini = drop_file)
{
	struct zrfs fs = {.opts = {.readaround = 0}};
	static const uint8_t zeros[PAGE];
	struct zrfs_pieces p;

	cr_assert_eq(zrfs_pieces_init(&p, 2), 0);
	atomic_init(&fs.warm, true);
	/* a header and zeros (no file): nothing to read ahead, nothing learnt */
	cr_assert_eq(zrfs_pieces_add(&p, -1, 0, zeros, 128), 0);
	cr_assert_eq(zrfs_pieces_add(&p, -1, 0, zeros, PAGE), 0);
	zrfs_read_ahead(&fs, &p);
	cr_assert(atomic_load(&fs.warm));
	atomic_store(&fs.warm, false);
	zrfs_read_ahead(&fs, &p);
	cr_assert(!atomic_load(&fs.warm));
	zrfs_pieces_free(&p);
}
