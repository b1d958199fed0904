/*
 * Description: the mount's read-ahead decisions (fs/read.c) without a
 * mount: records in the page cache are not asked for; once a whole batch
 * was found cached, the next batches check a sample of their first records
 * and any miss goes back to checking every record.
 */
#include "zrfs_i.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

TestSuite(read);

#define PAGE 4096
#define PAGES 64

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

/* A batch of @n one-page records: pages first, first + 1, ... */
static struct fuse_bufvec *batch(int first, int n)
{
	struct fuse_bufvec *bv = calloc(1, sizeof *bv + (size_t)n * sizeof bv->buf[0]);
	cr_assert_not_null(bv);
	bv->count = (size_t)n;
	for (int i = 0; i < n; i++)
		bv->buf[i] = (struct fuse_buf){.size = PAGE,
					       .flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK,
					       .fd = fd,
					       .pos = (off_t)(first + i) * PAGE,
					       .mem = map + (size_t)(first + i) * PAGE};
	return bv;
}

static void read_ahead(struct zrfs *fs, int first, int n)
{
	struct fuse_bufvec *bv = batch(first, n);
	zrfs_read_ahead_bufvec(fs, bv);
	free(bv);
}

Test(read, warm_after_a_cached_batch_cold_after_a_miss, .init = make_file, .fini = drop_file)
{
	struct zrfs fs = {.opts = {.readaround = 0}};

	if (cached(0) || cached(PAGES - 1))
		cr_skip_test("this filesystem keeps dropped pages cached; nothing to observe");
	atomic_init(&fs.warm, false);
	cache_pages(0, 32);
	read_ahead(&fs, 0, 32); /* every record cached */
	cr_assert(atomic_load(&fs.warm), "a batch found all cached makes the dataset warm");

	/* warm: the first ZRFS_WARM_SAMPLE records stand for the batch */
	cr_assert_eq(ZRFS_WARM_SAMPLE, 16);
	read_ahead(&fs, 16, 32); /* records 16..31 cached, 32..47 not */
	cr_assert(!cached(32), "a record beyond the sample was not asked for");
	cr_assert(atomic_load(&fs.warm), "a cached sample keeps it warm");

	read_ahead(&fs, 32, 8); /* the first record is not cached */
	cr_assert(!atomic_load(&fs.warm), "a miss in the sample makes it cold");

	/* cold again: every record is checked, so a batch whose misses are
	 * all beyond the sample keeps it cold */
	cr_assert(!cached(47), "only the missed records 32..39 were asked for");
	read_ahead(&fs, 0, 48);
	cr_assert(!atomic_load(&fs.warm));
}

Test(read, pieces_without_files_are_not_counted, .init = make_file, .fini = drop_file)
{
	struct zrfs fs = {.opts = {.readaround = 0}};
	static const uint8_t zeros[PAGE];
	struct fuse_bufvec *bv = calloc(1, sizeof *bv + 2 * sizeof bv->buf[0]);

	cr_assert_not_null(bv);
	atomic_init(&fs.warm, true);
	/* a header and zeros (no file): nothing to read ahead, nothing learnt */
	bv->count = 2;
	bv->buf[0] = (struct fuse_buf){.size = 128, .mem = (void *)zeros};
	bv->buf[1] = (struct fuse_buf){.size = PAGE, .mem = (void *)zeros};
	zrfs_read_ahead_bufvec(&fs, bv);
	cr_assert(atomic_load(&fs.warm));
	atomic_store(&fs.warm, false);
	zrfs_read_ahead_bufvec(&fs, bv);
	cr_assert(!atomic_load(&fs.warm));
	free(bv);
}
