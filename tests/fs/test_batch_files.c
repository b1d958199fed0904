/*
 * Description: the bytes of batch files without a mount (fs/batch_files.c,
 * fs/npy_view.c): for every step of a shuffled epoch, ids, <field>,
 * <field>.offsets and <field>.npy of a raw, a flate and a variable-length
 * field equal what the batch's ids say they must be (missing records are
 * empty in <field> and zero rows in <field>.npy), whole and read in pieces
 * that start and end inside rows and records; sizes agree with the bytes.
 */
#include "fs_fixture.h"
#include "zrsampler.h"

TestSuite(batch_files, .init = t_fs_setup, .fini = t_fs_teardown);

#define SPEC "shuffle,seed=3,batch=4,tail=keep"

static const struct zrfs_subtree *const B = &zrfs_batches;

struct expect {
	uint8_t *b;
	size_t len;
};

static void put(struct expect *e, const void *p, size_t n)
{
	e->b = realloc(e->b, e->len + n + 1);
	memcpy(e->b + e->len, p, n);
	e->len += n;
}

static void put_le64(struct expect *e, uint64_t v)
{
	uint8_t b[8];
	for (int k = 0; k < 8; k++)
		b[k] = (uint8_t)(v >> (8 * k));
	put(e, b, 8);
}

/* What file @name of a batch of @ids must hold. */
static struct expect expected(const char *name, const uint64_t *ids, size_t n)
{
	struct expect e = {0};
	uint8_t buf[64];
	unsigned f = name[0] == 'x' ? 0 : name[0] == 'y' ? 1 : 2;

	if (strcmp(name, "ids") == 0) {
		for (size_t i = 0; i < n; i++)
			put_le64(&e, ids[i]);
	} else if (strchr(name, '.') && strcmp(strchr(name, '.'), ".offsets") == 0) {
		uint64_t at = 0;
		put_le64(&e, 0);
		for (size_t i = 0; i < n; i++) {
			int len = t_value(f, ids[i], buf);
			at += len > 0 ? (uint64_t)len : 0;
			put_le64(&e, at);
		}
	} else if (strchr(name, '.')) { /* .npy: header, rows, zeros for missing */
		char hdr[ZR_NPY_HEADER_MAX];
		int h = zr_npy_header(&t_fields[f], n, hdr, sizeof hdr);
		uint64_t rsz = f == 0 ? 6 : 8;
		cr_assert_gt(h, 0);
		put(&e, hdr, (size_t)h);
		for (size_t i = 0; i < n; i++) {
			int len = t_value(f, ids[i], buf);
			if (len < 0)
				memset(buf, 0, rsz);
			put(&e, buf, rsz);
		}
	} else {
		for (size_t i = 0; i < n; i++) {
			int len = t_value(f, ids[i], buf);
			if (len > 0)
				put(&e, buf, (size_t)len);
		}
	}
	return e;
}

static void check_file(fuse_ino_t dir, const char *name, const uint64_t *ids, size_t n)
{
	struct expect e = expected(name, ids, n);
	struct stat st;
	size_t len;
	int rc;
	fuse_ino_t ino = t_lookup(B, dir, name, &rc);

	cr_assert_eq(rc, 0, "%s", name);
	cr_assert_eq(t_attr(B, ino, &st), 0);
	cr_assert_eq((size_t)st.st_size, e.len, "%s: size %lld, want %zu", name,
		     (long long)st.st_size, e.len);
	/* whole, then in pieces of 5 and 7 bytes: inside records and rows */
	static const size_t chunks[] = {1 << 20, 5, 7};
	for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++) {
		uint8_t *got = t_read_all(B, ino, chunks[c], &len);
		cr_assert_eq(len, e.len, "%s in pieces of %zu: %zu bytes", name, chunks[c], len);
		cr_assert_eq(memcmp(got, e.b, len), 0, "%s in pieces of %zu", name, chunks[c]);
		free(got);
	}
	/* past the end: nothing */
	t_read(B, ino, 100, (off_t)e.len + 3);
	t_bytes(&len);
	cr_assert_eq(len, 0);
	free(e.b);
}

Test(batch_files, every_file_of_every_step_of_an_epoch)
{
	static const char *const files[] = {"ids",   "x", "x.offsets", "x.npy", "y",
					    "y.offsets", "y.npy", "v",     "v.offsets"};
	zs_spec sp;
	zs_sampler *s;
	uint64_t ids[4];
	char epoch[32];
	int rc;

	cr_assert_eq(zs_spec_parse(SPEC, &sp), 0);
	cr_assert_eq(zs_sampler_create(&s, &sp, T_N), 0);
	cr_assert_eq(zs_steps(s), 3);
	for (uint64_t e = 0; e < 2; e++) {
		fuse_ino_t top = t_lookup(B, ZRFS_INO_ROOT, ".batches", &rc);
		snprintf(epoch, sizeof epoch, "epoch-%llu", (unsigned long long)e);
		fuse_ino_t ep = t_lookup(B, t_lookup(B, top, SPEC, &rc), epoch, &rc);
		for (uint64_t k = 0; k < zs_steps(s); k++) {
			char step[32];
			snprintf(step, sizeof step, "%llu", (unsigned long long)k);
			fuse_ino_t dir = t_lookup(B, ep, step, &rc);
			int64_t n = zs_batch(s, e, k, ids);
			cr_assert_gt(n, 0);
			for (size_t i = 0; i < sizeof files / sizeof *files; i++)
				check_file(dir, files[i], ids, (size_t)n);
		}
	}
	zs_sampler_destroy(s);
}

Test(batch_files, info_json_names_the_step)
{
	int rc;
	fuse_ino_t top = t_lookup(B, ZRFS_INO_ROOT, ".batches", &rc);
	fuse_ino_t ep = t_lookup(B, t_lookup(B, top, SPEC, &rc), "epoch-4", &rc);
	fuse_ino_t info = t_lookup(B, t_lookup(B, ep, "2", &rc), "info.json", &rc);
	size_t len;
	uint8_t *got = t_read_all(B, info, 1 << 20, &len);
	got[len] = 0;
	cr_assert_not_null(strstr((char *)got, "\"spec\": \"" SPEC "\""), "%s", got);
	cr_assert_not_null(strstr((char *)got, "\"epoch\": 4,"));
	cr_assert_not_null(strstr((char *)got, "\"step\": 2,"));
	cr_assert_not_null(strstr((char *)got, "\"steps\": 3,"));
	cr_assert_not_null(strstr((char *)got, "\"batch_size\": 2,"), "the last, short step");
	cr_assert_not_null(strstr((char *)got, "\"records\": 10,\n"));
	/* the last step: every position handed out */
	cr_assert_not_null(strstr((char *)got, "\"position_after\": 10\n"), "%s", got);
	struct stat st;
	cr_assert_eq(t_attr(B, info, &st), 0);
	cr_assert_eq((size_t)st.st_size, len);
	free(got);
}

Test(batch_files, a_flate_batch_larger_than_the_cache_is_efbig)
{
	int rc;
	t_fs_close();
	t_fs_open(t_ds, NULL);
	t_fs.opts.cache_bytes = 16; /* a blob is (B + 1) * 8 bytes of offsets alone */
	fuse_ino_t top = t_lookup(B, ZRFS_INO_ROOT, ".batches", &rc);
	fuse_ino_t ep = t_lookup(B, t_lookup(B, top, SPEC, &rc), "epoch-0", &rc);
	fuse_ino_t y = t_lookup(B, t_lookup(B, ep, "0", &rc), "y", &rc);
	struct stat st;
	cr_assert_eq(t_attr(B, y, &st), -EFBIG);
	t_read(B, y, 4096, 0);
	cr_assert_eq(t_reply.kind, 'e');
	cr_assert_eq(t_reply.err, EFBIG);
}
