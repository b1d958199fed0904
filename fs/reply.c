/*
 * reply.c - where every reply of the mount is built and sent: errors
 * (the one mapping of library codes to errno), attributes, slices of
 * memory, and replies made of pieces of chunk files.
 *
 * A read of raw record bytes (a record file, the rows of a .npy view, a
 * batch file) is described as pieces: byte ranges of chunk files, merged
 * where adjacent, each with the address where the dataset maps it, and
 * pieces of memory (a .npy header, zeros). A small reply of one piece of
 * one chunk (a record file's read) is read with pread into this thread's
 * buffer and sent from there (reply_small). Others are sent from the
 * mappings with one writev (fuse_reply_iov): the kernel's copy into the
 * reader's pages is the only one, and the daemon never touches the bytes,
 * so a chunk cut short under the mount makes that copy fault and the reader
 * get EIO, not the daemon SIGBUS. Pieces not yet asked for are first asked
 * for together (readahead.c), so cold reads reach the disk at once. Where a
 * mapping is unknown, or there are more pieces than one writev takes, the
 * pieces are read into a per-thread buffer with the core's reader (one
 * io_uring submission); with -o splice libfuse splices them (slower on
 * every size measured: BENCHMARKS.md).
 *
 * An entry (a lookup's, a new file's or directory's) hands the kernel a
 * number: it is counted in the inode table before the reply is sent.
 *
 * Nothing else in the daemon calls libfuse's fuse_reply_*() (the transport
 * sends what they make; floor.c, a program of its own, replies itself).
 *
 * Sections: errors, the rest of libfuse's replies, entries, attributes,
 * slices, pieces.
 */
#include "zrfs_i.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

/* The largest reply of one piece read into a buffer rather than sent from
 * the mapping: a copy of up to this much costs less than the request. */
#define SMALL_REPLY (64u << 10)

/* ---- errors ---- */

int zrfs_errno(int rc)
{
	if (rc == ZR_EINVAL_SPEC)
		return -EINVAL;
	if (rc < 0 && rc > -4096)
		return rc;
	return -EIO; /* ZR_ECORRUPT, ZR_EVERSION, and anything unknown */
}

void zrfs_reply_err(fuse_req_t req, int rc)
{
	fuse_reply_err(req, -zrfs_errno(rc));
}

void zrfs_reply_status(fuse_req_t req, int64_t rc)
{
	fuse_reply_err(req, rc < 0 ? -zrfs_errno((int)rc) : 0);
}

/* ---- the rest of libfuse's replies, each in one place ---- */

void zrfs_reply_attr(fuse_req_t req, const struct stat *st, double timeout)
{
	fuse_reply_attr(req, st, timeout);
}

int zrfs_reply_buf(fuse_req_t req, const void *buf, size_t size)
{
	return fuse_reply_buf(req, buf, size);
}

int zrfs_reply_open(fuse_req_t req, const struct fuse_file_info *fi)
{
	return fuse_reply_open(req, fi);
}

void zrfs_reply_write(fuse_req_t req, size_t count)
{
	fuse_reply_write(req, count);
}

void zrfs_reply_none(fuse_req_t req)
{
	fuse_reply_none(req);
}

void zrfs_reply_statfs(fuse_req_t req, const struct statvfs *sv)
{
	fuse_reply_statfs(req, sv);
}

void zrfs_reply_readlink(fuse_req_t req, const char *target)
{
	fuse_reply_readlink(req, target);
}

void zrfs_reply_seek(fuse_req_t req, int64_t rc)
{
	if (rc < 0)
		zrfs_reply_err(req, (int)rc);
	else
		fuse_reply_lseek(req, (off_t)rc);
}

int64_t zrfs_seek_plain(uint64_t size, uint64_t off, int whence)
{
	if (off >= size)
		return -ENXIO;
	return whence == SEEK_DATA ? (int64_t)off : (int64_t)size;
}

/* ---- entries ---- */

int zrfs_reply_handed(fuse_req_t req, struct zrfs *fs, const struct fuse_entry_param *e,
		      const struct fuse_file_info *fi)
{
	int rc = fi ? fuse_reply_create(req, e, fi) : fuse_reply_entry(req, e);

	if (rc != 0 && e->ino) /* never handed */
		zrfs_inode_forget(fs, e->ino, 1);
	return rc;
}

int zrfs_reply_entry(fuse_req_t req, struct zrfs *fs, const struct zrfs_subtree *t,
		     const struct fuse_entry_param *e, const struct fuse_file_info *fi)
{
	int rc = e->ino ? zrfs_inode_hand(fs, e->ino, t) : 0;

	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return rc;
	}
	return zrfs_reply_handed(req, fs, e, fi);
}

/* ---- attributes ---- */

static void base_attr(const struct zrfs *fs, const struct zrfs_view *v, fuse_ino_t ino,
		      mode_t mode, struct stat *st)
{
	memset(st, 0, sizeof *st);
	st->st_ino = ino;
	st->st_mode = mode;
	st->st_nlink = 1;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_blksize = ZRFS_BLKSIZE;
	st->st_atim = st->st_mtim = st->st_ctim = v->mtime;
}

/* The modes of an ordinary tree (0755 directories, 0644 files): a copy
 * made with cp -a or rsync -a behaves like a copy of any read-only tree
 * (its owner can remove it; with 0555 directories nobody but root could).
 * What may not be written is refused by the mount: EROFS when read-only,
 * EPERM for what -o writable does not store; other users (allow_other) have
 * read and search bits only. */
void zrfs_dir_attr(const struct zrfs *fs, const struct zrfs_view *v, fuse_ino_t ino,
		   struct stat *st)
{
	base_attr(fs, v, ino, S_IFDIR | 0755, st);
	st->st_nlink = 2;
}

void zrfs_file_attr(const struct zrfs *fs, const struct zrfs_view *v, fuse_ino_t ino,
		    uint64_t size, struct stat *st)
{
	base_attr(fs, v, ino, S_IFREG | 0644, st);
	st->st_size = (off_t)size;
	st->st_blocks = (blkcnt_t)((size + 511) / 512);
}

/* ---- slices ---- */

void zrfs_reply_slice(fuse_req_t req, const void *data, uint64_t len, size_t size, off_t off)
{
	uint64_t at = (uint64_t)off;

	if (at >= len)
		zrfs_reply_buf(req, NULL, 0);
	else
		zrfs_reply_buf(req, (const char *)data + at, size < len - at ? size : len - at);
}

/* ---- pieces ---- */

/* Bytes of a struct fuse_bufvec holding @n pieces (it declares one). */
static size_t bufvec_bytes(size_t n)
{
	return sizeof(struct fuse_bufvec) + (n - 1) * sizeof(struct fuse_buf);
}

int zrfs_pieces_init(struct zrfs_pieces *p, size_t cap)
{
	if (cap <= ZRFS_PIECES_LOCAL) {
		p->bv = (struct fuse_bufvec *)(void *)p->local;
		p->cap = ZRFS_PIECES_LOCAL;
	} else if ((p->bv = malloc(bufvec_bytes(cap))) != NULL) {
		p->cap = cap;
	} else {
		p->cap = 0;
		return -ENOMEM;
	}
	memset(p->bv, 0, sizeof *p->bv);
	return 0;
}

void zrfs_pieces_free(struct zrfs_pieces *p)
{
	if (p->bv != (struct fuse_bufvec *)(void *)p->local)
		free(p->bv);
	p->bv = NULL;
	p->cap = 0;
}

uint64_t zrfs_pieces_size(const struct zrfs_pieces *p)
{
	uint64_t n = 0;

	for (size_t i = 0; i < p->bv->count; i++)
		n += p->bv->buf[i].size;
	return n;
}

int zrfs_pieces_add(struct zrfs_pieces *p, int fd, uint64_t pos, const void *mem, uint64_t len)
{
	struct fuse_bufvec *bv = p->bv;
	struct fuse_buf *last = bv->count ? &bv->buf[bv->count - 1] : NULL;

	if (len == 0)
		return 0;
	bool in_file = last && (last->flags & FUSE_BUF_IS_FD);
	if (last && (fd >= 0 ? in_file && last->fd == fd &&
				       (uint64_t)last->pos + last->size == pos &&
				       (!last->mem == !mem) &&
				       (!mem || (const char *)last->mem + last->size == mem)
			     : !in_file && (const char *)last->mem + last->size == mem)) {
		last->size += len;
		return 0;
	}
	if (bv->count == p->cap) {
		bool local = bv == (struct fuse_bufvec *)(void *)p->local;
		bv = local ? malloc(bufvec_bytes(p->cap * 2)) : realloc(bv, bufvec_bytes(p->cap * 2));
		if (!bv)
			return -ENOMEM;
		if (local)
			memcpy(bv, p->local, bufvec_bytes(p->cap));
		p->bv = bv;
		p->cap *= 2;
	}
	struct fuse_buf *b = &bv->buf[bv->count++];
	memset(b, 0, sizeof *b);
	b->size = len;
	b->mem = (void *)(uintptr_t)mem;
	if (fd >= 0) {
		b->flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK | FUSE_BUF_FD_RETRY;
		b->fd = fd;
		b->pos = (off_t)pos;
	}
	return 0;
}

static void log_short_chunk(struct zrfs *fs)
{
	if (zrfs_log_admit())
		fuse_log(FUSE_LOG_ERR, "zrfs: %s: a chunk file ends early: read failed (EIO)\n",
			 fs->dataset);
}

/* Send the pieces from where their bytes are mapped: one writev, one copy,
 * by the kernel, into the pages the reader gets. The daemon does not touch
 * the bytes: if a chunk was cut short under the mount, the kernel's copy
 * faults, the reader gets EIO, and we log it. false (nothing sent) if a
 * file piece has no mapping or there are more pieces than a writev takes. */
static bool reply_mapped(fuse_req_t req, struct zrfs *fs, const struct zrfs_pieces *p, bool ahead)
{
	const struct fuse_bufvec *bv = p->bv;
	struct iovec iov[1023]; /* + the header libfuse adds: IOV_MAX */

	if (fs->opts.splice || bv->count > sizeof iov / sizeof iov[0])
		return false;
	for (size_t i = 0; i < bv->count; i++) {
		if (!bv->buf[i].mem)
			return false;
		iov[i] = (struct iovec){bv->buf[i].mem, bv->buf[i].size};
	}
	/* pages not yet asked for are asked for all at once: a cold disk gets
	 * them together rather than one page fault after another */
	if (!ahead)
		zrfs_read_ahead(fs, p);
	zrfs_reply_mapped = p->bv;
	int rc = fuse_reply_iov(req, iov, (int)bv->count);
	zrfs_reply_mapped = NULL;
	if (rc == -EFAULT)
		log_short_chunk(fs);
	return true;
}

/* Whether a read may be tried without waiting for the disk (RWF_NOWAIT):
 * cleared for good when the chunks' filesystem refuses it. */
static atomic_bool nowait_refused;

/* Send one small piece of a chunk file from a copy in this thread's
 * buffer, read with pread. Sent from the mapping instead, the piece would
 * make the kernel pin the mapping's pages (fault them in, the first time)
 * and the read-ahead ask which are resident (mincore): both walk the
 * daemon's page tables under its address space's lock, which every
 * serving thread shares. A read that would wait for the disk is answered
 * EAGAIN by the first try, and its read-around window is asked for before
 * the read that waits, as the mapped path does. false (nothing sent): not
 * such a reply, no buffer, or the chunks' filesystem reads no other way. */
static bool reply_small(fuse_req_t req, struct zrfs *fs, const struct zrfs_pieces *p)
{
	const struct fuse_buf *b = &p->bv->buf[0];
	ssize_t got = 0, n;
	char *buf;

	if (p->bv->count != 1 || !(b->flags & FUSE_BUF_IS_FD) || b->size > SMALL_REPLY ||
	    atomic_load_explicit(&nowait_refused, memory_order_relaxed) ||
	    !(buf = zrfs_scratch(ZRFS_SCRATCH_REPLY, b->size ? b->size : 1)))
		return false;
	do
		n = preadv2(b->fd, &(struct iovec){buf, b->size}, 1, b->pos, RWF_NOWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EOPNOTSUPP || errno == EINVAL)) {
		atomic_store_explicit(&nowait_refused, true, memory_order_relaxed);
		return false;
	}
	if (n > 0)
		got = n;
	if ((size_t)got < b->size && (n >= 0 || errno == EAGAIN)) {
		zrfs_read_ahead_range(fs, b->fd, (uint64_t)b->pos + (uint64_t)got,
				      b->size - (size_t)got);
		while ((size_t)got < b->size) {
			n = pread(b->fd, buf + got, b->size - (size_t)got, b->pos + got);
			if (n > 0)
				got += n;
			else if (n == 0 || errno != EINTR)
				break;
		}
	}
	if ((size_t)got < b->size) { /* cut short, or unreadable */
		if (n == 0)
			log_short_chunk(fs);
		else if (zrfs_log_admit())
			fuse_log(FUSE_LOG_ERR, "zrfs: %s: reading a chunk file: %s\n", fs->dataset,
				 strerror(errno));
		fuse_reply_err(req, EIO);
		return true;
	}
	fuse_reply_buf(req, buf, b->size);
	return true;
}

/* Read the pieces into this thread's buffer (file pieces with the core's
 * reader, all in one submission) and send that. */
static void reply_buffered(fuse_req_t req, struct zrfs *fs, struct zrfs_view *v,
			   const struct zrfs_pieces *p)
{
	const struct fuse_bufvec *bv = p->bv;
	uint64_t total = zrfs_pieces_size(p);
	zr_range *ranges = NULL;
	size_t nranges = 0;
	zr_reader *r;
	char *buf = zrfs_scratch(ZRFS_SCRATCH_REPLY, total ? total : 1);
	int rc = buf ? 0 : -ENOMEM;

	if (rc == 0 && !(ranges = malloc((bv->count ? bv->count : 1) * sizeof *ranges)))
		rc = -ENOMEM;
	for (size_t i = 0, at = 0; rc == 0 && i < bv->count; at += bv->buf[i++].size) {
		const struct fuse_buf *b = &bv->buf[i];
		if (b->flags & FUSE_BUF_IS_FD)
			ranges[nranges++] = (zr_range){b->fd, (uint64_t)b->pos, (uint32_t)b->size,
						       buf + at};
		else
			memcpy(buf + at, b->mem, b->size);
	}
	if (rc == 0 && nranges)
		rc = zrfs_scratch_reader(v->ds, &r);
	if (rc == 0 && nranges)
		rc = zr_reader_read_ranges(r, ranges, nranges);
	free(ranges);
	if (rc < 0) { /* a chunk shorter than its entries say, or unreadable */
		if (rc == -ENOMEM)
			fuse_log(FUSE_LOG_ERR, "zrfs: %s: out of memory\n", fs->dataset);
		else if (zrfs_log_admit())
			fuse_log(FUSE_LOG_ERR, "zrfs: %s\n", zr_errmsg(v->ds));
		fuse_reply_err(req, rc == -ENOMEM ? ENOMEM : EIO);
		return;
	}
	fuse_reply_buf(req, buf, total);
}

void zrfs_reply_pieces(fuse_req_t req, struct zrfs *fs, struct zrfs_view *v,
		       const struct zrfs_pieces *p, bool ahead)
{
	if (fs->opts.splice) {
		/* answers the request whatever happens (with the error if reading fails) */
		fuse_reply_data(req, p->bv, FUSE_BUF_SPLICE_MOVE);
		return;
	}
	if (!reply_small(req, fs, p) && !reply_mapped(req, fs, p, ahead))
		reply_buffered(req, fs, v, p);
}
