/*
 * read.c - file contents: meta.json, records, and the .npy views.
 *
 * Raw bytes are never copied by the daemon: a read of a raw record, or of
 * the records under a range of a .npy view, is answered with an fd-backed
 * fuse_bufvec pointing into the chunk files, which libfuse splices into the
 * reply (FUSE_CAP_SPLICE_WRITE) instead of reading them into memory. Reads go
 * through the file descriptors, not the mappings, so a chunk cut short under
 * a live mount yields EIO, not SIGBUS. Flate records are inflated once into
 * the bounded cache (cache.c) and served from there. Records missing from a
 * .npy view read as zeros.
 *
 * open and opendir return ENOSYS when the kernel allows it
 * (FUSE_CAP_NO_OPEN_SUPPORT): the kernel then stops sending OPEN and RELEASE
 * for these immutable files and keeps their page cache across opens.
 */
#include "zrfs_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

/* Zeros for missing records in a .npy view; a reply is at most 1 MiB. */
static const uint8_t zeros[1 << 20];

void zrfs_ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct zrfs *fs = fuse_req_userdata(req);

	(void)ino;
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (fs->no_open) {
		fuse_reply_err(req, ENOSYS); /* stateless: no OPEN/RELEASE from now on */
		return;
	}
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

static void reply_slice(fuse_req_t req, const void *data, uint64_t len, size_t size, off_t off)
{
	if ((uint64_t)off >= len)
		fuse_reply_buf(req, NULL, 0);
	else
		fuse_reply_buf(req, (const char *)data + off,
			       (uint64_t)size < len - (uint64_t)off ? size : len - (uint64_t)off);
}

static void read_record(fuse_req_t req, struct zrfs *fs, unsigned field, uint64_t id,
			size_t size, off_t off)
{
	const struct zrfs_field *f = &fs->fields[field];
	zr_record_stat st;
	int rc;

	if (f->flate) {
		struct zrfs_cached *e;
		const uint8_t *data;
		uint64_t len;
		rc = zrfs_cache_get(fs, field, id, &e, &data, &len);
		if (rc < 0) {
			zrfs_log_record_error(fs, field, id, rc);
			fuse_reply_err(req, zrfs_errno(rc));
			return;
		}
		reply_slice(req, data, len, size, off);
		zrfs_cache_release(fs->cache, e);
		return;
	}
	rc = zr_stat(fs->ds, field, id, &st);
	if (rc < 0 || !st.present) {
		if (rc < 0)
			zrfs_log_record_error(fs, field, id, rc);
		fuse_reply_err(req, rc < 0 ? zrfs_errno(rc) : ENOENT);
		return;
	}
	if ((uint64_t)off >= st.physical_len) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(0);
	bv.buf[0].size = st.physical_len - (uint64_t)off < size ? st.physical_len - (uint64_t)off
								 : size;
	bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK | FUSE_BUF_FD_RETRY;
	bv.buf[0].fd = st.fd;
	bv.buf[0].pos = (off_t)st.offset + off;
	/* answers the request whatever happens (with the error if reading fails) */
	fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
}

/* Bytes [off, off + size) of field @field's .npy view. */
static void read_npy(fuse_req_t req, struct zrfs *fs, unsigned field, size_t size, off_t off)
{
	const struct zrfs_field *f = &fs->fields[field];
	uint64_t rsz = f->record_size, hdr = f->npy.hdr_len, end, pos = (uint64_t)off;
	struct fuse_bufvec *bv = NULL;
	uint8_t *buf = NULL;
	size_t nseg = 0, filled = 0;
	int rc = 0;

	if (pos >= f->npy.size) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > sizeof zeros)
		size = sizeof zeros;
	end = pos + size < f->npy.size ? pos + size : f->npy.size;
	/* segments: a piece of the header, then one per record touched */
	size_t max_seg = 2 + (size_t)((end - (pos > hdr ? pos : hdr)) / (rsz ? rsz : 1)) + 1;
	if (f->flate)
		buf = malloc(end - pos);
	else
		bv = malloc(sizeof *bv + max_seg * sizeof bv->buf[0]);
	if (!bv && !buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	while (pos < end && rc == 0) {
		const void *mem = NULL;
		uint64_t len;
		int fd = -1;
		off_t fpos = 0;
		if (pos < hdr) {
			len = (hdr < end ? hdr : end) - pos;
			mem = f->npy.hdr + pos;
		} else {
			uint64_t id = (pos - hdr) / rsz, in = (pos - hdr) % rsz;
			len = rsz - in < end - pos ? rsz - in : end - pos;
			if (f->flate) {
				struct zrfs_cached *e;
				const uint8_t *data;
				uint64_t dlen;
				rc = zrfs_cache_get(fs, field, id, &e, &data, &dlen);
				if (rc == -ENOENT) {
					rc = 0;
					mem = zeros;
				} else if (rc == 0) {
					memcpy(buf + filled, dlen == rsz ? data + in : zeros, len);
					zrfs_cache_release(fs->cache, e);
					filled += len;
					pos += len;
					continue;
				} else {
					zrfs_log_record_error(fs, field, id, rc);
				}
			} else {
				zr_record_stat st;
				rc = zr_stat(fs->ds, field, id, &st);
				if (rc < 0)
					zrfs_log_record_error(fs, field, id, rc);
				else if (!st.present || st.physical_len != rsz)
					mem = zeros;
				else {
					fd = st.fd;
					fpos = (off_t)(st.offset + in);
				}
			}
		}
		if (rc < 0)
			break;
		if (buf) {
			memcpy(buf + filled, mem, len);
			filled += len;
		} else {
			struct fuse_buf *b = &bv->buf[nseg++];
			memset(b, 0, sizeof *b);
			b->size = len;
			if (fd >= 0) {
				b->flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK | FUSE_BUF_FD_RETRY;
				b->fd = fd;
				b->pos = fpos;
			} else {
				b->mem = (void *)mem;
			}
		}
		pos += len;
	}
	if (rc < 0) {
		fuse_reply_err(req, zrfs_errno(rc));
	} else if (buf) {
		fuse_reply_buf(req, (const char *)buf, filled);
	} else {
		bv->count = nseg;
		bv->idx = 0;
		bv->off = 0;
		fuse_reply_data(req, bv, FUSE_BUF_SPLICE_MOVE);
	}
	free(bv);
	free(buf);
}

void zrfs_ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		  struct fuse_file_info *fi)
{
	struct zrfs *fs = fuse_req_userdata(req);

	(void)fi;
	if (ino == ZRFS_INO_META) {
		reply_slice(req, fs->meta, fs->meta_len, size, off);
	} else if (ino >= ZRFS_INO_NPY && ino < ZRFS_INO_NPY + fs->nfields &&
		   fs->fields[ino - ZRFS_INO_NPY].has_npy) {
		read_npy(req, fs, (unsigned)(ino - ZRFS_INO_NPY), size, off);
	} else if (ino & ZRFS_INO_REC) {
		uint64_t f = (ino & ~ZRFS_INO_REC) >> ZRFS_ID_BITS;
		uint64_t id = ino & ((UINT64_C(1) << ZRFS_ID_BITS) - 1);
		if (f < fs->nfields && id < fs->n)
			read_record(req, fs, (unsigned)f, id, size, off);
		else
			fuse_reply_err(req, ENOENT);
	} else {
		fuse_reply_err(req, EISDIR);
	}
}
