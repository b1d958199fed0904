/*
 * Description: meta.json (core/meta.c): the canonical document parses and
 * round-trips through dump; every malformed or out-of-range variant is
 * rejected with ZR_ECORRUPT (or ZR_EVERSION) and a message naming the key;
 * field names, dtypes, compressions, shapes and extensions are validated.
 */
#include "helpers.h"
#include "store_i.h"

#include <errno.h>
#include <fcntl.h>

TestSuite(meta);

static const char good[] =
	"{\"format\": \"zrecord\", \"version\": 1, \"generation\": 4, \"length\": 3,"
	" \"created\": 100, \"modified\": 200,"
	" \"chunks\": {\"first\": 0, \"num\": 2, \"size\": 2, \"unfull\": [[1, 40, 1]]},"
	" \"fields\": [{\"name\": \"img\", \"dtype\": \"u8\", \"compress\": \"flate\","
	" \"shape\": [2, 3], \"ext\": \"bin\"}, {\"name\": \"label\", \"dtype\": \"i64\","
	" \"compress\": \"raw\"}], \"attrs\": {\"classes\": [\"cat\", \"dog\"]}}";

/* @good with the first occurrence of @from replaced by @to. */
static char *variant(const char *from, const char *to)
{
	const char *at = strstr(good, from);
	cr_assert_not_null(at, "test bug: '%s' not in the document", from);
	char *s = malloc(sizeof good + strlen(to));
	size_t head = (size_t)(at - good);
	memcpy(s, good, head);
	strcpy(s + head, to);
	strcat(s, at + strlen(from));
	return s;
}

static void rejects(const char *from, const char *to, int code, const char *says)
{
	char *s = variant(from, to);
	zr_meta m;
	int rc = zr_meta_parse(s, strlen(s), "x/meta.json", &m);
	cr_assert_eq(rc, code, "'%s' -> '%s': got %d (%s)", from, to, rc, zr_errmsg(NULL));
	cr_assert_not_null(strstr(zr_errmsg(NULL), "x/meta.json"), "%s", zr_errmsg(NULL));
	cr_assert_not_null(strstr(zr_errmsg(NULL), says), "'%s' -> '%s': message '%s' lacks '%s'",
			   from, to, zr_errmsg(NULL), says);
	free(s);
}

Test(meta, the_canonical_document_parses)
{
	zr_meta m;
	cr_assert_eq(zr_meta_parse(good, strlen(good), "x/meta.json", &m), 0, "%s",
		     zr_errmsg(NULL));
	cr_assert_eq(m.generation, 4);
	cr_assert_eq(m.length, 3);
	cr_assert_eq(m.chunk_num, 2);
	cr_assert_eq(m.chunk_size, 2);
	cr_assert_eq(m.unfull_count, 1);
	cr_assert_eq(m.unfull[0].chunk_id, 1);
	cr_assert_eq(m.unfull[0].write_pos, 40);
	cr_assert_eq(m.unfull[0].records, 1);
	cr_assert_eq(m.nfields, 2);
	cr_assert_str_eq(m.fields[0].name, "img");
	cr_assert_eq(m.fields[0].spec.compress, ZR_FLATE);
	cr_assert_eq(m.fields[0].spec.ndim, 2);
	cr_assert_eq(m.fields[0].spec.shape[1], 3);
	cr_assert_str_eq(m.fields[0].spec.ext, "bin");
	cr_assert_eq(zr_spec_record_size(&m.fields[0].spec), 6);
	cr_assert_eq(m.fields[1].spec.dtype, ZR_I64);
	cr_assert_null(m.fields[1].spec.ext);
	cr_assert_not_null(m.attrs);

	/* dump and parse again: the same state */
	char *d = zr_meta_dump(&m);
	zr_meta m2;
	cr_assert_eq(zr_meta_parse(d, strlen(d), "dump", &m2), 0, "%s", zr_errmsg(NULL));
	char *d2 = zr_meta_dump(&m2);
	cr_assert_str_eq(d, d2);
	free(d);
	free(d2);
	zr_meta_free(&m);
	zr_meta_free(&m2);
}

Test(meta, syntax_and_type_errors)
{
	zr_meta m;
	cr_assert_eq(zr_meta_parse(good, sizeof good / 2, "x/meta.json", &m), ZR_ECORRUPT);
	cr_assert_not_null(strstr(zr_errmsg(NULL), "not valid JSON"), "%s", zr_errmsg(NULL));
	cr_assert_eq(zr_meta_parse("[1]", 3, "x/meta.json", &m), ZR_ECORRUPT);
	cr_assert_eq(zr_meta_parse("", 0, "x/meta.json", &m), ZR_ECORRUPT);
	rejects("\"length\": 3", "\"length\": \"3\"", ZR_ECORRUPT, "'length' is not an integer");
	rejects("\"length\": 3", "\"length\": -1", ZR_ECORRUPT, "'length'");
	rejects("\"length\": 3", "\"length\": 1099511627777", ZR_ECORRUPT, "out of range");
	rejects("\"length\": 3,", "", ZR_ECORRUPT, "'length' is missing");
	rejects("\"generation\": 4", "\"generation\": 4.5", ZR_ECORRUPT, "'generation'");
}

Test(meta, version_and_format)
{
	rejects("\"version\": 1", "\"version\": 3", ZR_EVERSION, "version 3");
	rejects("\"version\": 1", "\"version\": 0", ZR_EVERSION, "version 0");
	rejects("\"zrecord\"", "\"other\"", ZR_ECORRUPT, "format");
	/* version 2 parses, and is written back as it is */
	char *s = variant("\"version\": 1", "\"version\": 2");
	zr_meta m;
	cr_assert_eq(zr_meta_parse(s, strlen(s), "x/meta.json", &m), 0, "%s", zr_errmsg(NULL));
	cr_assert_eq(m.version, 2);
	char *out = zr_meta_dump(&m);
	cr_assert_not_null(strstr(out, "\"version\": 2"), "%s", out);
	free(out);
	zr_meta_free(&m);
	free(s);
	/* its entries name chunks below 0xFFFFFF (2 chunks: from 16777213 at
	 * most); version 1's below 2^32 - 1 */
	static const struct {
		unsigned version, first;
		int rc;
	} cases[] = {{2, 16777213, 0}, {2, 16777214, ZR_ECORRUPT}, {1, 16777214, 0}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char doc[sizeof good + 64];
		snprintf(doc, sizeof doc,
			 "{\"format\": \"zrecord\", \"version\": %u, \"generation\": 4, "
			 "\"length\": 3, \"chunks\": {\"first\": %u, \"num\": 2, \"size\": 2}, "
			 "\"fields\": [{\"name\": \"x\", \"dtype\": \"u8\", \"compress\": \"raw\"}]}",
			 cases[i].version, cases[i].first);
		int rc = zr_meta_parse(doc, strlen(doc), "x/meta.json", &m);
		cr_assert_eq(rc, cases[i].rc, "%s: %s", doc, zr_errmsg(NULL));
		if (rc == 0)
			zr_meta_free(&m);
		else
			cr_assert_not_null(strstr(zr_errmsg(NULL), "first"), "%s", zr_errmsg(NULL));
	}
}

Test(meta, chunks_are_checked)
{
	rejects("\"size\": 2", "\"size\": 0", ZR_ECORRUPT, "chunks.size");
	rejects("[[1, 40, 1]]", "[[2, 40, 1]]", ZR_ECORRUPT, "chunks.unfull");
	rejects("[[1, 40, 1]]", "[[1, 40, 2]]", ZR_ECORRUPT, "chunks.unfull");
	rejects("[[1, 40, 1]]", "[[1, 40, 1], [1, 40, 1]]", ZR_ECORRUPT, "twice");
	rejects("[[1, 40, 1]]", "[[1, 40]]", ZR_ECORRUPT, "chunks.unfull");
	rejects("[[1, 40, 1]]", "7", ZR_ECORRUPT, "chunks.unfull");
	rejects("\"chunks\": {", "\"chunkz\": {", ZR_ECORRUPT, "'chunks'");
}

Test(meta, fields_are_checked)
{
	rejects("\"img\"", "\"../img\"", ZR_ECORRUPT, "field name");
	rejects("\"img\"", "\".img\"", ZR_ECORRUPT, "field name");
	rejects("\"img\"", "\"a/b\"", ZR_ECORRUPT, "field name");
	rejects("\"img\"", "\"\"", ZR_ECORRUPT, "field name");
	rejects("\"img\"", "\"label\"", ZR_ECORRUPT, "defined twice");
	rejects("\"dtype\": \"u8\"", "\"dtype\": \"u128\"", ZR_ECORRUPT, "unknown dtype");
	rejects("\"compress\": \"flate\"", "\"compress\": \"lz4\"", ZR_ECORRUPT,
		"unknown compression");
	rejects("[2, 3]", "[2, 0]", ZR_ECORRUPT, "shape");
	rejects("[2, 3]", "[1,1,1,1,1,1,1,1,1]", ZR_ECORRUPT, "shape");
	rejects("[2, 3]", "[4294967295, 4294967295]", ZR_ECORRUPT, "shape");
	rejects("\"ext\": \"bin\"", "\"ext\": \"a/b\"", ZR_ECORRUPT, "img");
	rejects("\"ext\": \"bin\"", "\"ext\": \".bin\"", ZR_ECORRUPT, "img");
	rejects("\"fields\": [", "\"fields\": [], \"x\": [", ZR_ECORRUPT, "'fields'");
	rejects("{\"classes\": [\"cat\", \"dog\"]}", "5", ZR_ECORRUPT, "'attrs'");
}

Test(meta, names)
{
	cr_assert_eq(zr_name_check("image"), 0);
	cr_assert_eq(zr_name_check("a.b-c_d9"), 0);
	const char *bad[] = {"", ".", "..", ".hidden", "-opt", "a/b", "a\\b", "tab\tname",
			     "new\nline", "colon:x", "0123456789012345678901234567890123456789"
						     "01234567890123456789012345"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		cr_assert_eq(zr_name_check(bad[i]), ZR_EINVAL_SPEC, "'%s' accepted", bad[i]);
}

Test(meta, dtype_and_compression_names)
{
	zr_dtype t;
	zr_compress c;
	const char *names[] = {"u8", "u16", "u32", "u64", "i8", "i16",
			       "i32", "i64", "f16", "f32", "f64", "bytes"};
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		cr_assert_eq(zr_dtype_parse(names[i], &t), 0);
		cr_assert_str_eq(zr_dtype_name(t), names[i]);
	}
	cr_assert_eq(zr_dtype_size(ZR_F16), 2);
	cr_assert_eq(zr_dtype_size(ZR_I64), 8);
	cr_assert_eq(zr_dtype_parse("float", &t), ZR_EINVAL_SPEC);
	cr_assert_eq(zr_compress_parse("flate", &c), 0);
	cr_assert_eq(c, ZR_FLATE);
	cr_assert_eq(zr_compress_parse("gzip", &c), ZR_EINVAL_SPEC);
}

Test(meta, read_refuses_non_files_and_huge_files)
{
	t_setup();
	char p[400];
	zr_meta m;
	int dfd = open(t_dir, O_RDONLY | O_DIRECTORY);
	snprintf(p, sizeof p, "%s/meta.json", t_dir);
	cr_assert_eq(mkdir(p, 0755), 0);
	cr_assert_eq(zr_meta_read(dfd, t_dir, "meta.json", &m), ZR_ECORRUPT);
	rmdir(p);
	FILE *f = fopen(p, "w");
	cr_assert_eq(ftruncate(fileno(f), ZR_META_MAX + 1), 0);
	fclose(f);
	cr_assert_eq(zr_meta_read(dfd, t_dir, "meta.json", &m), ZR_ECORRUPT);
	cr_assert_not_null(strstr(zr_errmsg(NULL), "at most"), "%s", zr_errmsg(NULL));
	close(dfd);
	t_cleanup();
}
