/*
 * mkds.c - build the dataset the filesystem tests mount, and its reference.
 *
 * usage: mkds DATASET REFDIR [--records N] [--corrupt]
 *
 * DATASET gets four fields, filled from a fixed seed:
 *   img  bytes, raw, ext jpg    0..20000 bytes, some missing, some empty
 *   txt  bytes, flate, ext txt  compressible, up to 300 KB, some missing
 *   vec  f32 4x3, raw           fixed shape, some missing
 *   lab  i64 scalar, flate      fixed shape
 * REFDIR gets what the mount must show: REFDIR/<field>/<name> for every
 * present record (named as in the mount) and REFDIR/<field>.bin, the data
 * part of <field>.npy for the fixed-shape fields (missing records as zeros).
 * With --corrupt, a few entries are damaged after the commit and their ids
 * are printed, "field id" per line; they are left out of REFDIR.
 */
#include "zrecord.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static void die(const char *what)
{
	fprintf(stderr, "mkds: %s: %s\n", what, zr_errmsg(NULL)[0] ? zr_errmsg(NULL) : strerror(errno));
	exit(1);
}

static void put_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0)
		die(path);
}

/* The damage of --corrupt, after the commit: img record 10's entry points
 * far outside its chunk, a byte in the middle of txt record 20's stream is
 * flipped. Their reference files go; their ids are printed. */
static void corrupt(zr_dataset *ds, const char *dir, const char *ref)
{
	char path[4096];
	zr_record_stat st;
	uint8_t e[16], b;
	uint64_t off = (UINT64_C(1) << 40) - 1; /* the largest format 2 holds */
	int fd;

	if (zr_stat(ds, 0, 10, &st) < 0 || !st.present)
		die("stat");
	for (int i = 0; i < 8; i++)
		e[i] = (uint8_t)(off >> (8 * i));
	memcpy(e + 8, &st.chunk_id, 4); /* little-endian hosts only: a test helper */
	memcpy(e + 12, &st.physical_len, 4);
	snprintf(path, sizeof path, "%s/img.offset", dir);
	fd = open(path, O_WRONLY);
	if (fd < 0 || pwrite(fd, e, 16, 16 * 10) != 16)
		die(path);
	close(fd);
	snprintf(path, sizeof path, "%s/img/10.jpg", ref);
	unlink(path);
	printf("img 10\n");

	if (zr_stat(ds, 1, 20, &st) < 0 || !st.present)
		die("stat");
	snprintf(path, sizeof path, "%s/chunk/%u.zr", dir, st.chunk_id);
	fd = open(path, O_RDWR);
	off_t at = (off_t)(st.offset + st.physical_len / 2);
	if (fd < 0 || pread(fd, &b, 1, at) != 1)
		die(path);
	b ^= 0x55;
	if (pwrite(fd, &b, 1, at) != 1)
		die(path);
	close(fd);
	snprintf(path, sizeof path, "%s/txt/20.txt", ref);
	unlink(path);
	printf("txt 20\n");
}

/* Append records [0, n) to @ds and write what the mount must show of each
 * under @ref; the data parts of the .npy views at the end. */
static void fill(zr_dataset *ds, const char *ref, uint64_t n)
{
	char path[4096];
	uint8_t *img = malloc(20000), *txt = malloc(300000);
	float *vecs = calloc(n, 48);
	int64_t *labs = calloc(n, 8);

	if (!img || !txt || !vecs || !labs)
		die("out of memory");
	for (uint64_t id = 0; id < n; id++) {
		uint64_t s = mix(id);
		size_t ni = (size_t)(s % 20000), nt = (size_t)(mix(s) % (id % 10 == 0 ? 300000 : 5000));
		for (size_t i = 0; i < ni; i++)
			img[i] = (uint8_t)mix(s + i);
		for (size_t i = 0; i < nt; i++)
			txt[i] = (uint8_t)("abcdefgh \n"[mix(s ^ (i / 7)) % 10]);
		float v[12];
		for (int i = 0; i < 12; i++)
			v[i] = (float)id + (float)i / 16.0f;
		int64_t lab = (int64_t)(id % 10) - 3;
		zr_value vals[4] = {
			{id % 17 == 3 ? NULL : img, id % 29 == 0 ? 0 : ni},
			{id % 13 == 5 ? NULL : txt, nt},
			{id % 31 == 7 ? NULL : v, sizeof v},
			{&lab, sizeof lab},
		};
		if (zr_append(ds, vals, NULL) < 0)
			die("append");
		if (vals[0].data) {
			snprintf(path, sizeof path, "%s/img/%llu.jpg", ref, (unsigned long long)id);
			put_file(path, img, vals[0].len);
		}
		if (vals[1].data) {
			snprintf(path, sizeof path, "%s/txt/%llu.txt", ref, (unsigned long long)id);
			put_file(path, txt, nt);
		}
		if (vals[2].data) {
			snprintf(path, sizeof path, "%s/vec/%llu", ref, (unsigned long long)id);
			put_file(path, v, sizeof v);
			memcpy(vecs + 12 * id, v, sizeof v);
		}
		snprintf(path, sizeof path, "%s/lab/%llu", ref, (unsigned long long)id);
		put_file(path, &lab, 8);
		labs[id] = lab;
	}
	snprintf(path, sizeof path, "%s/vec.bin", ref);
	put_file(path, vecs, n * 48);
	snprintf(path, sizeof path, "%s/lab.bin", ref);
	put_file(path, labs, n * 8);
	free(img);
	free(txt);
	free(vecs);
	free(labs);
}

int main(int argc, char **argv)
{
	static const zr_field_spec f[4] = {
		{.name = "img", .dtype = ZR_BYTES, .compress = ZR_RAW, .ext = "jpg"},
		{.name = "txt", .dtype = ZR_BYTES, .compress = ZR_FLATE, .ext = "txt"},
		{.name = "vec", .dtype = ZR_F32, .compress = ZR_RAW, .fixed = 1, .ndim = 2,
		 .shape = {4, 3}},
		{.name = "lab", .dtype = ZR_I64, .compress = ZR_FLATE, .fixed = 1, .ndim = 0},
	};
	uint64_t n = 300;
	int damage = 0;
	char path[4096];
	zr_dataset *ds;

	if (argc < 3) {
		fprintf(stderr, "usage: mkds DATASET REFDIR [--records N] [--corrupt]\n");
		return 2;
	}
	for (int i = 3; i < argc; i++) {
		if (strcmp(argv[i], "--records") == 0 && i + 1 < argc)
			n = strtoull(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--corrupt") == 0)
			damage = 1;
		else
			return 2;
	}
	if (zr_create(argv[1], f, 4, &(zr_create_opts){.chunk_size = 64}) < 0 ||
	    zr_open(&ds, argv[1], ZR_RDWR) < 0)
		die(argv[1]);
	mkdir(argv[2], 0755);
	for (int k = 0; k < 4; k++) {
		snprintf(path, sizeof path, "%s/%s", argv[2], f[k].name);
		mkdir(path, 0755);
	}
	fill(ds, argv[2], n);
	if (zr_commit(ds) < 0)
		die("commit");
	if (damage)
		corrupt(ds, argv[1], argv[2]);
	zr_close(ds);
	return 0;
}
