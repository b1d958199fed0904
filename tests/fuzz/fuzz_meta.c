/*
 * fuzz_meta.c - libFuzzer target: meta.json parsing and validation
 * (core/meta.c). Whatever the bytes, zr_meta_parse() returns 0 or an error
 * with a message; a parsed document dumps and parses again to the same.
 */
#include "store_i.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	zr_meta m, m2;

	if (zr_meta_parse((const char *)data, size, "fuzz", &m) < 0) {
		if (!zr_errmsg(NULL)[0])
			abort(); /* an error must say why */
		return 0;
	}
	char *d = zr_meta_dump(&m);
	if (!d || zr_meta_parse(d, strlen(d), "dump", &m2) < 0)
		abort(); /* what we write we must read */
	char *d2 = zr_meta_dump(&m2);
	if (!d2 || strcmp(d, d2) != 0)
		abort();
	free(d);
	free(d2);
	zr_meta_free(&m);
	zr_meta_free(&m2);
	return 0;
}
