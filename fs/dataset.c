/*
 * dataset.c - the dataset as the mount serves it: opened read-only, its
 * fields with what the tree derives from them (extensions, record sizes,
 * the .npy views' headers), meta.json as served, the owner and times the
 * files show, and the cache; and all of it released again.
 *
 * zrfs opens the dataset before mounting, so a bad dataset is reported on
 * the terminal and nothing is mounted.
 */
#include "zrfs_i.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int load_meta(struct zrfs *fs)
{
	char path[PATH_MAX];
	struct stat st;
	int fd, rc = -1;

	if (snprintf(path, sizeof path, "%s/meta.json", fs->dataset) >= (int)sizeof path)
		return -1;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_size > (16 << 20))
		goto out;
	fs->meta_len = (size_t)st.st_size;
	fs->meta = malloc(fs->meta_len + 1);
	if (fs->meta && read(fd, fs->meta, fs->meta_len) == (ssize_t)fs->meta_len)
		rc = 0;
	fs->mtime = st.st_mtim;
out:
	if (fd >= 0)
		close(fd);
	if (rc < 0)
		fprintf(stderr, "zrfs: %s: cannot read: %s\n", path, strerror(errno));
	return rc;
}

int zrfs_dataset_open(struct zrfs *fs)
{
	struct stat st;
	int rc = zr_open(&fs->ds, fs->dataset, ZR_RDONLY);

	if (rc < 0) {
		fprintf(stderr, "zrfs: %s\n", zr_errmsg(NULL));
		return -1;
	}
	if (stat(fs->dataset, &st) == 0) {
		fs->uid = st.st_uid;
		fs->gid = st.st_gid;
	}
	fs->n = zr_length(fs->ds);
	fs->nfields = zr_field_count(fs->ds);
	fs->fields = calloc(fs->nfields, sizeof *fs->fields);
	if (!fs->fields || load_meta(fs) < 0)
		return -1;
	for (unsigned i = 0; i < fs->nfields; i++) {
		struct zrfs_field *f = &fs->fields[i];
		f->spec = zr_field(fs->ds, i);
		f->name_len = strlen(f->spec->name);
		f->ext_len = f->spec->ext ? strlen(f->spec->ext) : 0;
		f->record_size = zr_field_record_size(fs->ds, i);
		f->flate = f->spec->compress == ZR_FLATE;
		f->has_npy = f->spec->fixed &&
			     zrfs_npy_header(f->spec, fs->n, f->record_size, &f->npy) == 0;
	}
	if (zrfs_cache_create(&fs->cache, fs->opts.cache_bytes) < 0) {
		fprintf(stderr, "zrfs: out of memory\n");
		return -1;
	}
	if (fs->opts.readaround == UINT64_MAX) {
		/* a dataset that fits in memory is read once per epoch, all of it:
		 * reading around each record costs no extra I/O and makes fewer,
		 * larger requests; a larger one would read bytes that are evicted
		 * before they are used, so only the records themselves */
		long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
		uint64_t ram = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
		fs->opts.readaround = zr_chunk_bytes(fs->ds) <= ram / 2 ? 64 << 10 : 0;
	}
	return 0;
}

void zrfs_dataset_close(struct zrfs *fs)
{
	zrfs_scratch_free(); /* this thread's reader, before the dataset closes */
	zrfs_cache_destroy(fs->cache);
	zr_close(fs->ds);
	free(fs->fields);
	free(fs->meta);
	fs->cache = NULL;
	fs->ds = NULL;
	fs->fields = NULL;
	fs->meta = NULL;
}
