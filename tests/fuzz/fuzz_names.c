/*
 * fuzz_names.c - libFuzzer target: the mount's record-name parser
 * (fs/records.c): any name either is refused or names an id below N whose
 * canonical spelling (the formatter's) is the name itself.
 */
#include "zrfs_i.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const zr_field_spec jpg = {.name = "img", .dtype = ZR_BYTES, .ext = "jpg"};
	static const zr_field_spec bare = {.name = "lab", .dtype = ZR_I64};
	char name[300], back[64];
	uint64_t id, n = 1000003;

	if (size >= sizeof name)
		return 0;
	memcpy(name, data, size);
	name[size] = 0;
	for (int k = 0; k < 2; k++) {
		const zr_field_spec *spec = k ? &jpg : &bare;
		struct zrfs_field f = {.spec = spec, .ext_len = spec->ext ? 3 : 0};
		struct zrfs fs = {.nfields = 1, .fields = &f, .names = {-1, -1, 0, -1}};
		snprintf(f.ext, sizeof f.ext, "%s", spec->ext ? spec->ext : "");
		if (zrfs_record_name_parse(&fs, 0, name, n, &id) < 0)
			continue;
		if (id >= n)
			abort();
		zrfs_record_name_format(&fs, 0, id, back, sizeof back);
		if (strcmp(back, name) != 0)
			abort(); /* one name per record */
	}
	return 0;
}
