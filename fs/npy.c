/*
 * npy.c - NumPy .npy headers (format version 1.0) for fixed-shape data.
 *
 * Layout: "\x93NUMPY", version 1.0, a little-endian u16 header length, then
 * a Python dict literal padded with spaces and ended by '\n' so that the
 * data starts at a multiple of 64 bytes, as numpy.save() writes it; the
 * data that follows is rows x record in C order, so numpy.load() and
 * numpy.load(mmap_mode='r') read it as it lies.
 */
#include "zrfs_i.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const char *descr(zr_dtype t)
{
	static const char *const d[ZR_DTYPE_COUNT] = {
		[ZR_U8] = "|u1",  [ZR_U16] = "<u2", [ZR_U32] = "<u4", [ZR_U64] = "<u8",
		[ZR_I8] = "|i1",  [ZR_I16] = "<i2", [ZR_I32] = "<i4", [ZR_I64] = "<i8",
		[ZR_F16] = "<f2", [ZR_F32] = "<f4", [ZR_F64] = "<f8", [ZR_BYTES] = "|u1",
	};
	return (unsigned)t < ZR_DTYPE_COUNT ? d[t] : NULL;
}

int zrfs_npy_header(const zr_field_spec *spec, uint64_t rows, uint64_t record_size,
		    struct zrfs_npy *out)
{
	char dict[200];
	int n;
	size_t used, total;

	if (!spec->fixed || !descr(spec->dtype))
		return -EINVAL;
	n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%llu,",
		     descr(spec->dtype), (unsigned long long)rows);
	for (unsigned i = 0; i < spec->ndim && n > 0 && (size_t)n < sizeof dict; i++)
		n += snprintf(dict + n, sizeof dict - (size_t)n, "%s%llu", i ? ", " : " ",
			      (unsigned long long)spec->shape[i]);
	if (n <= 0 || (size_t)n + 8 >= sizeof dict)
		return -EOVERFLOW;
	n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");
	used = 10 + (size_t)n + 1; /* magic, version, length, dict, '\n' */
	total = (used + 63) / 64 * 64;
	if (total > sizeof out->hdr)
		return -EOVERFLOW;
	memcpy(out->hdr, "\x93NUMPY\x01\x00", 8);
	out->hdr[8] = (char)((total - 10) & 0xff);
	out->hdr[9] = (char)((total - 10) >> 8);
	memcpy(out->hdr + 10, dict, (size_t)n);
	memset(out->hdr + 10 + n, ' ', total - used);
	out->hdr[total - 1] = '\n';
	out->hdr_len = total;
	out->size = total + rows * record_size;
	return 0;
}
