/*
 * npy.c - NumPy .npy headers: written for fixed-shape fields (the mount's
 * FIELD.npy views, batch .npy files, zr export npy) and read back (zr
 * import npy). One table maps dtypes to NumPy's type strings both ways.
 *
 * Layout written (format 1.0): "\x93NUMPY", 1, 0, a little-endian u16
 * header length, then a Python dict literal padded with spaces and ended by
 * '\n' so that the data starts at a multiple of 64 bytes, as numpy.save()
 * does. Read: formats 1.0, 2.0 and 3.0 (u32 length), little-endian or
 * byte-order-free types only, C order only.
 */
#include "store_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	const char *descr;
	zr_dtype dtype;
} types[] = {
	{"|u1", ZR_U8},  {"<u2", ZR_U16}, {"<u4", ZR_U32}, {"<u8", ZR_U64},
	{"|i1", ZR_I8},  {"<i2", ZR_I16}, {"<i4", ZR_I32}, {"<i8", ZR_I64},
	{"<f2", ZR_F16}, {"<f4", ZR_F32}, {"<f8", ZR_F64}, {"|b1", ZR_BOOL},
};

static const char *descr_of(zr_dtype t)
{
	if (t == ZR_BYTES)
		return "|u1";
	for (size_t i = 0; i < sizeof types / sizeof *types; i++)
		if (types[i].dtype == t)
			return types[i].descr;
	return NULL;
}

int zr_npy_header(const zr_field_spec *spec, uint64_t rows, char *buf, size_t cap)
{
	char dict[ZR_NPY_HEADER_MAX];
	const char *d = descr_of(spec->dtype);
	int n;
	size_t used, total;

	RETURN_IF(!spec->fixed || !d, -EINVAL, "field '%s' has no fixed shape: no .npy view",
		  spec->name ? spec->name : "?");
	n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%llu,",
		     d, (unsigned long long)rows);
	for (unsigned i = 0; i < spec->ndim && i < ZR_SHAPE_MAX; i++)
		n += snprintf(dict + n, sizeof dict - (size_t)n, "%s%llu", i ? ", " : " ",
			      (unsigned long long)spec->shape[i]);
	n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");
	used = 10 + (size_t)n + 1; /* magic, version, length, dict, '\n' */
	total = (used + 63) / 64 * 64;
	RETURN_IF(total > cap || total > ZR_NPY_HEADER_MAX, -EOVERFLOW,
		  ".npy header of %zu bytes does not fit", total);
	memcpy(buf, "\x93NUMPY\x01\x00", 8);
	buf[8] = (char)((total - 10) & 0xff);
	buf[9] = (char)((total - 10) >> 8);
	memcpy(buf + 10, dict, (size_t)n);
	memset(buf + 10 + n, ' ', total - used);
	buf[total - 1] = '\n';
	return (int)total;
}

int zr_npy_parse(const void *data, size_t len, zr_field_spec *spec, uint64_t *rows,
		 uint64_t *data_offset)
{
	const unsigned char *b = data;
	char *hdr, *p, *end;
	uint64_t hlen, start, dims[ZR_SHAPE_MAX + 1];
	unsigned nd = 0;
	size_t i;
	int rc = ZR_EINVAL_SPEC;

	RETURN_IF(len < 8 || memcmp(b, "\x93NUMPY", 6) != 0 || b[6] < 1 || b[6] > 3,
		  ZR_EINVAL_SPEC, "not a .npy file (format 1.0-3.0)");
	start = b[6] == 1 ? 10 : 12;
	RETURN_IF(len < start, ZR_EINVAL_SPEC, "truncated .npy header");
	hlen = b[6] == 1 ? (uint64_t)b[8] | (uint64_t)b[9] << 8
			 : (uint64_t)b[8] | (uint64_t)b[9] << 8 | (uint64_t)b[10] << 16 |
				   (uint64_t)b[11] << 24;
	RETURN_IF(hlen > len - start, ZR_EINVAL_SPEC, "truncated .npy header");
	hdr = malloc(hlen + 1);
	RETURN_IF(!hdr, -ENOMEM, "out of memory");
	memcpy(hdr, b + start, hlen);
	hdr[hlen] = 0;
	memset(spec, 0, sizeof *spec);
	if (!(p = strstr(hdr, "'descr':")) || !(p = strchr(p + 8, '\''))) {
		zr_err(rc, "no 'descr' in the .npy header");
		goto out;
	}
	/* the byte order of a one-byte type says nothing: numpy writes '|',
	 * and loads '<u1', '>u1' and '=u1' the same */
	for (i = 0; i < sizeof types / sizeof *types; i++)
		if (p[1] && strncmp(p + 2, types[i].descr + 1, 2) == 0 && p[4] == '\'' &&
		    (p[1] == types[i].descr[0] ||
		     (types[i].descr[0] == '|' && strchr("<>=", p[1]) != NULL)))
			break;
	if (i == sizeof types / sizeof *types) {
		char *q = strchr(p + 1, '\'');
		zr_err(rc, "dtype %.*s is not supported (little-endian integers and floats of "
			   "1-8 bytes, bool)", q && q - p < 16 ? (int)(q - p - 1) : 8, p + 1);
		goto out;
	}
	spec->dtype = types[i].dtype;
	if (!strstr(hdr, "'fortran_order': False")) {
		zr_err(rc, "Fortran-ordered arrays are not supported: save the array C-ordered "
			   "(np.save(path, np.ascontiguousarray(a)))");
		goto out;
	}
	if (!(p = strstr(hdr, "'shape':")) || !(p = strchr(p, '('))) {
		zr_err(rc, "no 'shape' in the .npy header");
		goto out;
	}
	for (p++;;) {
		while (*p == ' ' || *p == ',')
			p++;
		if (*p == ')')
			break;
		errno = 0;
		unsigned long long v = strtoull(p, &end, 10);
		if (end == p || errno || nd > ZR_SHAPE_MAX || *p == '-') {
			zr_err(rc, "bad shape in the .npy header (at most %d dimensions per row)",
			       ZR_SHAPE_MAX);
			goto out;
		}
		dims[nd++] = v;
		p = end;
	}
	if (nd == 0) {
		zr_err(rc, "a 0-d array has no rows");
		goto out;
	}
	uint64_t row = zr_dtype_size(spec->dtype);
	for (unsigned k = 1; k < nd; k++) {
		if (dims[k] == 0 || row > ZR_RECORD_MAX / dims[k]) {
			zr_err(rc, "rows of this shape do not fit a record");
			goto out;
		}
		spec->shape[k - 1] = dims[k];
		row *= dims[k];
	}
	spec->fixed = 1;
	spec->ndim = nd - 1;
	*rows = dims[0];
	*data_offset = start + hlen;
	rc = 0;
out:
	free(hdr);
	return rc;
}
