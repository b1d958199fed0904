/*
 * fuzz_npy.c - libFuzzer target: .npy header parsing (core/npy.c). A header
 * that parses describes rows the writer can describe again identically.
 */
#include "zrecord.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	zr_field_spec s, back;
	uint64_t rows, off, rows2, off2;
	char h[ZR_NPY_HEADER_MAX];

	if (zr_npy_parse(data, size, &s, &rows, &off) < 0)
		return 0;
	if (off > size)
		abort();
	s.name = "x";
	int n = zr_npy_header(&s, rows, h, sizeof h);
	if (n < 0)
		return 0; /* a parsed shape may be too wide to write back in 256 bytes */
	if (zr_npy_parse(h, (size_t)n, &back, &rows2, &off2) < 0 || rows2 != rows ||
	    back.dtype != s.dtype || back.ndim != s.ndim ||
	    memcmp(back.shape, s.shape, sizeof s.shape) != 0 || off2 != (uint64_t)n)
		abort();
	return 0;
}
