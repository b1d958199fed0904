/*
 * fuzz_tar.c - libFuzzer target: the tar shard scanner of `zr import tar`
 * (tools/tar.c). Whatever the bytes, a scan that succeeds lists members that
 * lie inside the archive (a sparse one's segments in order, inside its
 * size), belong to a sample and a valid field name, and keep each sample's
 * fields distinct; its directories and links have a path, a kind, and a
 * target for a link alone.
 */
#include "zr_i.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	struct zr_tar t = {0};
	char err[512];

	if (fd < 0 && (fd = memfd_create("fuzz_tar", MFD_CLOEXEC)) < 0)
		abort();
	if (ftruncate(fd, 0) < 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();
	if (zr_tar_scan(&t, fd, "shard.tar", "shard.tar", err, sizeof err) == 0) {
		for (size_t i = 0; i < t.n; i++) {
			const struct zr_tar_member *m = &t.m[i];
			uint64_t stored = m->len, end = 0;
			if (m->nsegs) { /* sparse: its segments in order, in it */
				if (m->seg_at > t.nsegs || m->nsegs > t.nsegs - m->seg_at)
					abort();
				stored = 0;
				for (uint32_t k = 0; k < m->nsegs; k++) {
					const struct zr_tar_seg *g = &t.segs[m->seg_at + k];
					if (g->off < end || g->len > m->len ||
					    g->off > m->len - g->len)
						abort();
					end = g->off + g->len;
					stored += g->len;
				}
			}
			if (m->off > size || stored > size - m->off || m->key >= t.keys ||
			    m->field >= t.fields.n || zr_name_check(t.fields.v[m->field]) < 0)
				abort();
			if (i > 0 && m->key < t.m[i - 1].key)
				abort();
			for (size_t j = i; j-- > 0 && t.m[j].key == m->key;)
				if (t.m[j].field == m->field)
					abort();
		}
		for (size_t i = 0; i < t.ne; i++) { /* directories and links for the tree */
			const struct zr_tar_entry *e = &t.e[i];
			if (!e->path || (!S_ISDIR(e->mode) && !S_ISLNK(e->mode)) ||
			    S_ISLNK(e->mode) != (e->target != NULL))
				abort();
		}
	} else if (!err[0]) {
		abort(); /* a failure always says why */
	}
	zr_tar_free(&t);
	return 0;
}
