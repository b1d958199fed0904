/*
 * import_arrays.c - the planners of zr import for arrays: the rows of .npy
 * files (one record each, files in the order given; their dtype and row
 * shape become the field's) and the fixed-size records of a flat file,
 * from its start. Checked before anything is written, as every planner's
 * sources (import_sources.c).
 *
 * Sections: npy, flat.
 */
#include "import_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- npy ---- */

struct npy {
	zr_field_spec spec;     /* dtype and row shape */
	uint64_t rows, row_bytes, data_off;
};

/* The header of a .npy file, checked against the file's size. */
static int npy_read(const char *path, struct npy *out, char *err, size_t errlen)
{
	char head[65536 + 12];
	struct stat st;
	ssize_t got;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = -1;

	if (fd < 0 || fstat(fd, &st) < 0 || (got = pread(fd, head, sizeof head, 0)) < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (zr_npy_parse(head, (size_t)got, &out->spec, &out->rows, &out->data_off) < 0) {
		snprintf(err, errlen, "%s: %s", path, zr_errmsg(NULL));
		goto out;
	}
	out->row_bytes = zr_dtype_size(out->spec.dtype);
	for (unsigned k = 0; k < out->spec.ndim; k++)
		out->row_bytes *= out->spec.shape[k];
	if ((uint64_t)st.st_size < out->data_off ||
	    ((uint64_t)st.st_size - out->data_off) / out->row_bytes < out->rows) {
		char need[64];
		if (out->rows > UINT64_MAX / out->row_bytes)
			snprintf(need, sizeof need, "more than 2^64");
		else
			snprintf(need, sizeof need, "%llu",
				 (unsigned long long)(out->rows * out->row_bytes));
		snprintf(err, errlen,
			 "%s: truncated: %llu rows of %llu bytes need %s bytes of data, it holds %llu",
			 path, (unsigned long long)out->rows, (unsigned long long)out->row_bytes,
			 need, (unsigned long long)((uint64_t)st.st_size > out->data_off
							    ? (uint64_t)st.st_size - out->data_off
							    : 0));
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

/* npy: the rows of each array, in order; dtype and row shape kept. */
int plan_npy(struct import *im)
{
	struct npy first = {0}, n = {0};
	struct plan *p = &im->p;
	int rc = 0;

	for (int i = 0; i < im->npos - 1 && rc == 0; i++) {
		rc = npy_read(im->pos[i], &n, p->err, sizeof p->err);
		if (rc == 0 && i > 0 &&
		    (n.spec.dtype != first.spec.dtype || n.spec.ndim != first.spec.ndim ||
		     memcmp(n.spec.shape, first.spec.shape, n.spec.ndim * sizeof *n.spec.shape) != 0)) {
			snprintf(p->err, sizeof p->err, "%s: dtype or row shape differs from %s's",
				 im->pos[i], im->pos[0]);
			rc = -1;
		}
		if (i == 0)
			first = n;
		for (uint64_t r = 0; rc == 0 && r < n.rows; r++)
			rc = plan_add(p, im->pos[i], n.data_off + r * n.row_bytes, n.row_bytes, NULL);
	}
	if (rc == 0) { /* first is only set when its header was read */
		first.spec.name = im->f[0].name;
		first.spec.compress = im->f[0].compress;
		im->f[0] = first.spec;
	}
	return rc;
}

/* tar: one record per sample, one field per extension. */

/* ---- flat ---- */

/* flat: consecutive records of --record-size bytes, u8 of that shape. */
int plan_flat(struct import *im)
{
	struct plan *p = &im->p;
	uint64_t rsz = im->o.record_size;
	struct stat st;
	int rc = 0;

	int e = stat(im->pos[0], &st) < 0 ? errno : 0;

	if (e || !S_ISREG(st.st_mode)) {
		snprintf(p->err, sizeof p->err, "%s: %s", im->pos[0],
			 e ? strerror(e) : "not a regular file");
		return -1;
	}
	if ((uint64_t)st.st_size % rsz) {
		snprintf(p->err, sizeof p->err,
			 "%s: %lld bytes is not a multiple of the record size %llu (%llu left over)",
			 im->pos[0], (long long)st.st_size, (unsigned long long)rsz,
			 (unsigned long long)((uint64_t)st.st_size % rsz));
		return -1;
	}
	for (uint64_t off = 0; rc == 0 && off < (uint64_t)st.st_size; off += rsz)
		rc = plan_add(p, im->pos[0], off, rsz, NULL);
	im->f[0].dtype = ZR_U8;
	im->f[0].fixed = 1;
	im->f[0].ndim = 1;
	im->f[0].shape[0] = rsz;
	return rc;
}
