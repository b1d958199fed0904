/*
 * readahead.c - asking the kernel for the pages of chunk files before a
 * reply copies them, so that the records of a cold read reach the disk
 * together instead of one page fault after another.
 *
 * Records already in the page cache (mincore on their mapping) are not
 * asked for: no page cache walk over a window. But a warm dataset would
 * pay one mincore per record of every batch, a third of a warm epoch's
 * profile, spent learning that nothing needs reading. So once a whole
 * batch was found cached (fs->warm), the next ones check their first
 * ZRFS_WARM_SAMPLE records only, and take the rest as cached when those
 * are; one miss sets checking everything again. A record the sample
 * skipped that is not cached still reads, by a page fault in the reply
 * rather than ahead of it.
 */
#include "zrfs_i.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

/* Whether the pages under [@mem, @mem + @len) of a chunk mapping are in
 * the page cache (the first MiB of a longer record stands for it). */
static bool resident(const void *mem, uint64_t len)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)mem & ~(page - 1);
	unsigned char vec[256];
	size_t n = (size_t)(((uintptr_t)mem + len - a + page - 1) / page);

	if (n > sizeof vec)
		n = sizeof vec;
	if (mincore((void *)a, n * page, vec) < 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(vec[i] & 1))
			return false;
	return true;
}

/* Ask for @len bytes at @pos of @fd, widened to whole windows of @w bytes. */
static void advise(int fd, uint64_t pos, uint64_t len, uint64_t w)
{
	uint64_t end = pos + len;

	if (w) {
		pos -= pos % w;
		end += (w - end % w) % w;
	}
	posix_fadvise(fd, (off_t)pos, (off_t)(end - pos), POSIX_FADV_WILLNEED);
}

void zrfs_read_ahead_range(struct zrfs *fs, int fd, uint64_t pos, uint64_t len)
{
	advise(fd, pos, len, fs->opts.readaround);
}

size_t zrfs_read_ahead(struct zrfs *fs, const struct zrfs_pieces *p)
{
	const struct fuse_bufvec *bv = p->bv;
	bool warm = atomic_load_explicit(&fs->warm, memory_order_relaxed);
	size_t checked = 0, missed = 0;

	for (size_t i = 0; i < bv->count; i++) {
		const struct fuse_buf *b = &bv->buf[i];
		if (!(b->flags & FUSE_BUF_IS_FD))
			continue;
		if (warm && missed == 0 && checked == ZRFS_WARM_SAMPLE)
			break;
		checked++;
		if (b->mem && resident(b->mem, b->size))
			continue;
		missed++;
		advise(b->fd, (uint64_t)b->pos, b->size, fs->opts.readaround);
	}
	if (checked && warm != (missed == 0))
		atomic_store_explicit(&fs->warm, missed == 0, memory_order_relaxed);
	return missed;
}
