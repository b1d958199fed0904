/*
 * npy.c - the .npy views' headers and sizes (the header itself is the
 * core's zr_npy_header(): the data that follows is rows x record in C order,
 * so numpy.load() and numpy.load(mmap_mode='r') read it as it lies).
 */
#include "zrfs_i.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int zrfs_npy_header(const zr_field_spec *spec, uint64_t rows, uint64_t record_size,
		    struct zrfs_npy *out)
{
	int n = zr_npy_header(spec, rows, out->hdr, sizeof out->hdr);

	if (n < 0)
		return n;
	out->hdr_len = (size_t)n;
	out->size = (uint64_t)n + rows * record_size;
	return 0;
}
