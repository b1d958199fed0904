/*
 * fuzz_open.c - libFuzzer target: offset tables and chunks as found on
 * disk (core/store.c, offset.c, chunk.c, gather.c, verify.c). The input is
 * split into an offset table and a chunk of one dataset (one raw and one
 * flate field share them) with a valid meta.json of format 1 or 2 (the
 * entries' layouts differ), read with and without ZR_CHECK; opening,
 * verifying, gathering and loading every record must fail cleanly or
 * succeed, never read outside the files.
 */
#include "zrecord.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];

static void put(const char *name, const void *p, size_t n)
{
	char path[128];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || (n && write(fd, p, n) != (ssize_t)n))
		abort();
	close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char meta[512], path[128];
	size_t split, entries;
	zr_dataset *ds;

	if (!dir[0]) {
		snprintf(dir, sizeof dir, "/dev/shm/zr-fuzz-%d", (int)getpid());
		mkdir(dir, 0755);
		snprintf(path, sizeof path, "%s/chunk", dir);
		mkdir(path, 0755);
	}
	if (size < 2)
		return 0;
	split = 2 + (((size_t)data[0] << 8 | data[1]) % (size - 1));
	entries = (split - 2) / 16;
	if (entries > 64)
		entries = 64;
	snprintf(meta, sizeof meta,
		 "{\"format\": \"zrecord\", \"version\": %d, \"generation\": 1, \"length\": %zu,"
		 " \"chunks\": {\"first\": 0, \"num\": 1, \"size\": 65536, \"unfull\": [[0, %zu, %zu]]},"
		 " \"fields\": [{\"name\": \"r\", \"dtype\": \"bytes\", \"compress\": \"raw\"},"
		 " {\"name\": \"z\", \"dtype\": \"bytes\", \"compress\": \"flate\"}]}",
		 1 + (int)(size & 1), entries, size - split, entries);
	put("meta.json", meta, strlen(meta));
	put("r.offset", data + 2, entries * 16);
	put("z.offset", data + 2, entries * 16);
	snprintf(path, sizeof path, "chunk/0.zr");
	put(path, data + split, size - split);
	if (zr_open(&ds, dir, ZR_RDONLY | (data[1] & 1 ? ZR_CHECK : 0)) < 0)
		return 0;
	zr_verify(ds, NULL, NULL);
	uint8_t *buf = malloc(1 << 16);
	for (unsigned f = 0; f < 2; f++)
		for (uint64_t id = 0; id < zr_length(ds); id++) {
			zr_batch *b;
			size_t n;
			if (zr_gather(ds, f, &id, 1, &b) == 0) {
				const zr_slice *s = zr_batch_records(b, &n);
				uint8_t sum = 0;
				for (size_t i = 0; s->data && i < s->len; i++)
					sum += ((const uint8_t *)s->data)[i]; /* readable */
				if (sum == 1 && size == 0)
					abort(); /* never: keeps the reads from being optimised away */
				zr_batch_release(b);
			}
			zr_record_load(ds, f, id, buf, 1 << 16);
		}
	free(buf);
	zr_close(ds);
	return 0;
}
