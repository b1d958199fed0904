/*
 * Description: hostile datasets (core/store.c, offset.c, chunk.c, verify.c):
 * truncated or damaged meta.json, offset tables and chunk files, entries that
 * point outside their chunk or at chunks that do not exist, flipped bits in
 * flate streams. Each gives a clear error naming the file (open) or the
 * field and id (gather, verify), never a crash or an out-of-bounds read;
 * a flipped bit in any value is found by its checksum (format 2); a random
 * bit-flip campaign checks the same for damage nobody planned.
 */
#include "helpers.h"
#include "store_i.h"

#include <errno.h>
#include <fcntl.h>

TestSuite(corrupt, .init = t_setup, .fini = t_cleanup);

#define N 400

/* Two fields: "r" raw and "z" flate, chunks of 100 records. */
/* Append records @from .. @to - 1 (their values a function of the id) and commit. */
static void append(uint64_t from, uint64_t to)
{
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	uint8_t buf[3000];
	for (uint64_t id = from; id < to; id++) {
		size_t n = 1 + t_len(8, id, 2999);
		t_fill(buf, n, 8, id);
		zr_value v[2] = {{buf, n}, {buf, n}};
		cr_assert_eq(zr_append(ds, v, NULL), 0);
	}
	cr_assert_eq(zr_commit(ds), 0);
	zr_close(ds);
}

/* The dataset in format @version (0: the newest). */
static void build_v(unsigned version)
{
	zr_field_spec f[2] = {{.name = "r", .dtype = ZR_BYTES, .compress = ZR_RAW},
			      {.name = "z", .dtype = ZR_BYTES, .compress = ZR_FLATE}};
	zr_create_opts o = {.chunk_size = 100, .version = version};
	cr_assert_eq(zr_create(t_ds, f, 2, &o), 0);
	append(0, N);
}

static void build(void)
{
	build_v(0);
}

/* Path of @rel in the dataset; two calls may be live at once (rename). */
static char *file(const char *rel)
{
	static char p[2][512];
	static int k;
	k ^= 1;
	snprintf(p[k], sizeof p[k], "%s/%s", t_ds, rel);
	return p[k];
}

static void truncate_to(const char *rel, off_t len)
{
	cr_assert_eq(truncate(file(rel), len), 0, "truncate %s", rel);
}

static void poke(const char *rel, off_t off, const void *bytes, size_t n)
{
	int fd = open(file(rel), O_WRONLY);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pwrite(fd, bytes, n, off), (ssize_t)n);
	close(fd);
}

/* Where record @id of @field lies, and the dataset's format version. */
static zr_record_stat where(unsigned field, uint64_t id, unsigned *version)
{
	zr_dataset *ds = t_open(t_ds, ZR_RDONLY);
	zr_record_stat st;
	cr_assert_eq(zr_stat(ds, field, id, &st), 0);
	*version = zr_format_version(ds);
	zr_close(ds);
	return st;
}

/* The byte @at bytes into the stored value @st XOR-ed with @x, in place. */
static void flip(const zr_record_stat *st, uint64_t at, uint8_t x)
{
	char rel[32];
	uint8_t b;
	snprintf(rel, sizeof rel, "chunk/%u.zr", st->chunk_id);
	int fd = open(file(rel), O_RDWR);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pread(fd, &b, 1, (off_t)(st->offset + at)), 1);
	b ^= x;
	cr_assert_eq(pwrite(fd, &b, 1, (off_t)(st->offset + at)), 1);
	close(fd);
}

static void open_fails(int code, const char *says)
{
	zr_dataset *ds = (zr_dataset *)1;
	int rc = zr_open(&ds, t_ds, ZR_RDONLY);
	cr_assert_eq(rc, code, "open: %d, wanted %d (%s)", rc, code, zr_errmsg(NULL));
	cr_assert_null(ds);
	cr_assert_not_null(strstr(zr_errmsg(NULL), says), "message '%s' lacks '%s'",
			   zr_errmsg(NULL), says);
}

struct problems {
	int n;
	const char *field;
	uint64_t id;
	bool found; /* a problem was reported for field/id */
};

static void collect(void *ctx, const char *field, uint64_t id, const char *reason)
{
	struct problems *p = ctx;
	p->n++;
	if (field && strcmp(field, p->field) == 0 && id == p->id && reason[0])
		p->found = true;
}

/* Gather of @id in @field fails with @code; verify names field and id. */
static void damaged_as(int code, unsigned field, uint64_t id, const char *says)
{
	zr_dataset *ds = t_open(t_ds, ZR_RDONLY);
	zr_batch *b;
	int rc = zr_gather(ds, field, &id, 1, &b);
	cr_assert_eq(rc, code, "gather: %d (%s)", rc, zr_errmsg(ds));
	cr_assert_not_null(strstr(zr_errmsg(ds), says), "'%s' lacks '%s'", zr_errmsg(ds), says);
	struct problems p = {.field = field ? "z" : "r", .id = id};
	int64_t n = zr_verify(ds, collect, &p);
	cr_assert_gt(n, 0);
	cr_assert_eq(n, p.n, "verify counts the problems it reports");
	cr_assert(p.found, "verify did not report field %s id %llu", p.field,
		  (unsigned long long)id);
	/* the other records still read */
	uint64_t other = (id + 100) % N; /* in another chunk */
	cr_assert_eq(zr_gather(ds, field, &other, 1, &b), 0);
	zr_batch_release(b);
	zr_close(ds);
}

static void damaged_record(unsigned field, uint64_t id, const char *says)
{
	damaged_as(ZR_ECORRUPT, field, id, says);
}

Test(corrupt, meta_json_truncated_or_garbage)
{
	build();
	truncate_to("meta.json", 100);
	open_fails(ZR_ECORRUPT, "meta.json");
	truncate_to("meta.json", 0);
	open_fails(ZR_ECORRUPT, "meta.json");
	poke("meta.json", 0, "\x00\xff{]", 4);
	open_fails(ZR_ECORRUPT, "meta.json");
}

Test(corrupt, meta_json_claims_more_than_the_files_hold)
{
	build();
	FILE *f = fopen(file("meta.json"), "r");
	char buf[4096];
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	char *at = strstr(buf, "\"length\": 400");
	cr_assert_not_null(at);
	memcpy(at, "\"length\": 900", 13);
	f = fopen(file("meta.json"), "w");
	fwrite(buf, 1, n, f);
	fclose(f);
	open_fails(ZR_ECORRUPT, "r.offset");
}

Test(corrupt, table_truncated)
{
	build();
	truncate_to("z.offset", 16 * N - 1);
	open_fails(ZR_ECORRUPT, "z.offset");
	truncate_to("z.offset", 0);
	open_fails(ZR_ECORRUPT, "truncated table");
}

Test(corrupt, a_table_cut_short_while_open_fails_its_lost_entries_only)
{
	zr_dataset *ds;
	uint8_t buf[3000];
	zr_record_stat st;

	build();
	cr_assert_eq(zr_guard_mappings(), 0);
	cr_assert_eq(zr_guard_mappings(), 0, "a second call changes nothing");
	ds = t_open(t_ds, ZR_RDONLY);
	cr_assert_eq(zr_stat(ds, 0, N - 1, &st), 0); /* mapped, and read */
	truncate_to("r.offset", 4096); /* entries 0..255 stay */
	cr_assert_eq(zr_stat(ds, 0, N - 1, &st), -EIO, "a lost entry: not SIGBUS");
	cr_assert(strstr(zr_errmsg(ds), "r.offset: entry 399 is gone") != NULL, "%s",
		  zr_errmsg(ds));
	cr_assert_eq(zr_present(ds, 0, 300), -EIO);
	cr_assert_eq(zr_record_load(ds, 0, 300, buf, sizeof buf), -EIO);
	cr_assert_gt(zr_record_load(ds, 0, 10, buf, sizeof buf), 0, "an entry the cut left");
	cr_assert_eq(zr_stat(ds, 1, N - 1, &st), 0, "another field's table is whole");
	zr_close(ds);
}

Test(corrupt, table_or_chunk_missing)
{
	build();
	cr_assert_eq(rename(file("chunk/2.zr"), file("chunk/2.bak")), 0);
	/* chunks are opened on first use: the dataset opens, the records of
	 * the missing chunk are damaged, the others read */
	damaged_record(0, 250, "chunk/2.zr");
	cr_assert_eq(rename(file("chunk/2.bak"), file("chunk/2.zr")), 0);
	cr_assert_eq(unlink(file("r.offset")), 0);
	open_fails(ZR_ECORRUPT, "r.offset");
}

Test(corrupt, a_directory_where_a_file_should_be)
{
	build();
	cr_assert_eq(unlink(file("chunk/1.zr")), 0);
	cr_assert_eq(mkdir(file("chunk/1.zr"), 0755), 0);
	damaged_record(1, 150, "chunk/1.zr");
}

/* A symbolic link in a dataset is never followed, even to a valid copy of
 * the file it replaces: readers must not read outside the dataset. */
static void symlinked(const char *rel)
{
	char out[600];
	snprintf(out, sizeof out, "%s/outside", t_dir);
	cr_assert_eq(rename(file(rel), out), 0);
	cr_assert_eq(symlink(out, file(rel)), 0);
	if (strncmp(rel, "chunk/", 6) == 0) { /* opened on first use */
		damaged_as(-ELOOP, 0, 250, "a symbolic link");
	} else {
		open_fails(-ELOOP, "a symbolic link");
		cr_assert_not_null(strstr(zr_errmsg(NULL), rel), "'%s' lacks '%s'",
				   zr_errmsg(NULL), rel);
	}
	cr_assert_eq(unlink(file(rel)), 0);
	cr_assert_eq(rename(out, file(rel)), 0);
	zr_close(t_open(t_ds, ZR_RDONLY)); /* and it was only the link */
}

Test(corrupt, symbolic_links_are_not_followed)
{
	build();
	symlinked("meta.json");
	symlinked("r.offset");
	symlinked("chunk/2.zr");
	symlinked("chunk");
}

Test(corrupt, chunk_truncated)
{
	build();
	/* chunk 3 holds ids 300..399; cut it in half */
	struct stat st;
	cr_assert_eq(stat(file("chunk/3.zr"), &st), 0);
	truncate_to("chunk/3.zr", st.st_size / 2);
	damaged_record(0, 399, "outside chunk/3.zr");
}

/* The last chunk, not full, cut below the data meta.json says it holds:
 * the dataset opens all the same (it did not), its records past the cut
 * are damaged, the others read, and a writer appends elsewhere. */
Test(corrupt, unfull_chunk_truncated)
{
	build();
	append(N, N + 50); /* chunk 4: 400..449, unfull */
	struct stat st;
	cr_assert_eq(stat(file("chunk/4.zr"), &st), 0);
	off_t cut = st.st_size / 2;
	truncate_to("chunk/4.zr", cut);
	damaged_record(0, N + 49, "outside chunk/4.zr");
	zr_dataset *ds = t_open(t_ds, ZR_RDONLY);
	uint64_t first = N;
	zr_batch *b;
	cr_assert_eq(zr_gather(ds, 0, &first, 1, &b), 0, "%s", zr_errmsg(ds));
	zr_batch_release(b);
	zr_close(ds);
	/* a writer appends, and not into the cut chunk */
	ds = t_open(t_ds, ZR_RDWR);
	zr_value v[2] = {{"new", 3}, {"new", 3}};
	uint64_t id;
	cr_assert_eq(zr_append(ds, v, &id), 0, "%s", zr_errmsg(ds));
	cr_assert_eq(zr_commit(ds), 0, "%s", zr_errmsg(ds));
	zr_close(ds);
	cr_assert_eq(stat(file("chunk/4.zr"), &st), 0);
	cr_assert_eq(st.st_size, cut, "the cut chunk changed");
	ds = t_open(t_ds, ZR_RDONLY);
	zr_record_stat rs;
	cr_assert_eq(zr_stat(ds, 0, id, &rs), 0, "%s", zr_errmsg(ds));
	cr_assert_neq(rs.chunk_id, 4u);
	char got[3];
	cr_assert_eq(zr_record_load(ds, 1, id, got, sizeof got), 3);
	cr_assert_eq(memcmp(got, "new", 3), 0);
	zr_close(ds);
}

Test(corrupt, entry_points_outside_its_chunk)
{
	build();
	zr_entry e = {.offset = (1ULL << 40) - 50, .chunk_id = 1, .len = 100};
	uint8_t p[16];
	zr_entry_encode(p, 2, &e);
	poke("r.offset", 16 * 150, p, 16);
	damaged_record(0, 150, "outside chunk/1.zr");
}

Test(corrupt, entry_points_outside_its_chunk_format_1)
{
	build_v(1);
	zr_entry e = {.offset = 1ULL << 40, .chunk_id = 1, .len = 100};
	uint8_t p[16];
	zr_entry_encode(p, 1, &e);
	poke("r.offset", 16 * 150, p, 16);
	damaged_record(0, 150, "outside chunk/1.zr");
	/* offset + len overflowing 64 bits */
	e = (zr_entry){.offset = UINT64_MAX - 10, .chunk_id = 1, .len = 100};
	zr_entry_encode(p, 1, &e);
	poke("r.offset", 16 * 150, p, 16);
	damaged_record(0, 150, "outside chunk/1.zr");
}

/* An entry changed to point at other bytes of its chunk (a table restored
 * from another backup, a stray write): the checksum it holds is not
 * theirs. */
Test(corrupt, entry_pointing_at_other_bytes)
{
	unsigned version;
	build();
	zr_record_stat st = where(0, 151, &version);
	zr_entry e = {.offset = st.offset + 1, .chunk_id = st.chunk_id, .len = st.physical_len - 1,
		      .crc = st.crc};
	uint8_t p[16];
	zr_entry_encode(p, 2, &e);
	poke("r.offset", 16 * 151, p, 16);
	zr_dataset *ds = t_open(t_ds, ZR_RDONLY);
	struct problems pr = {.field = "r", .id = 151};
	cr_assert_eq(zr_verify(ds, collect, &pr), 1);
	cr_assert(pr.found);
	zr_close(ds);
}

Test(corrupt, entry_names_a_chunk_that_does_not_exist)
{
	build();
	zr_entry e = {.offset = 0, .chunk_id = 77, .len = 10};
	uint8_t p[16];
	zr_entry_encode(p, 2, &e);
	poke("z.offset", 16 * 20, p, 16);
	damaged_record(1, 20, "chunk 77 does not exist");
}

Test(corrupt, flate_stream_bit_flip)
{
	unsigned version;
	build();
	zr_record_stat st = where(1, 250, &version);
	cr_assert_eq(version, 2);
	flip(&st, st.physical_len / 2, 0x5a);
	damaged_record(1, 250, "do not match their checksum");
}

/* Format 1 (no checksums): zlib's own check still finds it. */
Test(corrupt, flate_stream_bit_flip_format_1)
{
	unsigned version;
	build_v(1);
	zr_record_stat st = where(1, 250, &version);
	cr_assert_eq(version, 1);
	flip(&st, st.physical_len / 2, 0x5a);
	damaged_record(1, 250, "inflate");
}

/* One bit of a raw value: verify names it; reads asked to check (ZR_CHECK)
 * refuse it, whichever way they read; the other records read. */
Test(corrupt, raw_bit_flip_is_found_by_its_checksum)
{
	unsigned version;
	uint64_t id = 123;
	build();
	zr_record_stat st = where(0, id, &version);
	cr_assert_eq(version, 2);
	flip(&st, st.physical_len / 3, 0x10);

	/* verify: exactly that record */
	zr_dataset *ds = t_open(t_ds, ZR_RDONLY);
	struct problems p = {.field = "r", .id = id};
	cr_assert_eq(zr_verify(ds, collect, &p), 1);
	cr_assert(p.found);
	zr_batch *g;
	cr_assert_eq(zr_gather(ds, 0, &id, 1, &g), 0, "unchecked: served as stored");
	zr_batch_release(g);
	zr_close(ds);

	ds = t_open(t_ds, ZR_RDONLY | ZR_CHECK);
	cr_assert_eq(zr_gather(ds, 0, &id, 1, &g), ZR_ECORRUPT);
	cr_assert_not_null(strstr(zr_errmsg(ds), "do not match their checksum"), "%s",
			   zr_errmsg(ds));
	cr_assert_not_null(strstr(zr_errmsg(ds), "record 123"), "%s", zr_errmsg(ds));
	uint8_t buf[3000];
	cr_assert_eq(zr_record_load(ds, 0, id, buf, sizeof buf), ZR_ECORRUPT);
	char out[512];
	snprintf(out, sizeof out, "%s/copy", t_dir);
	int ofd = open(out, O_RDWR | O_CREAT | O_TRUNC, 0644);
	cr_assert_geq(ofd, 0);
	cr_assert_eq(zr_record_copy(ds, 0, id, ofd), ZR_ECORRUPT);
	close(ofd);
	zr_reader *r;
	cr_assert_eq(zr_reader_open(ds, 0, &r), 0);
	uint64_t ids[3] = {id - 1, id, id + 1};
	static uint8_t many[3 * 3000];
	cr_assert_eq(zr_reader_read(r, 0, ids, 3, many, sizeof many, NULL), ZR_ECORRUPT);
	cr_assert_not_null(strstr(zr_errmsg(ds), "record 123"), "%s", zr_errmsg(ds));
	ids[1] = id + 2;
	cr_assert_eq(zr_reader_read(r, 0, ids, 3, many, sizeof many, NULL), 0, "%s",
		     zr_errmsg(ds));
	zr_reader_close(r);
	uint64_t other = id + 1;
	cr_assert_eq(zr_gather(ds, 0, &other, 1, &g), 0);
	uint8_t want[3000];
	size_t n = 1 + t_len(8, other, 2999);
	t_fill(want, n, 8, other);
	size_t k;
	const zr_slice *s = zr_batch_records(g, &k);
	cr_assert_eq(s[0].len, n);
	cr_assert_eq(memcmp(s[0].data, want, n), 0);
	zr_batch_release(g);
	zr_close(ds);
}

/* A dataset of format 1 (earlier versions', no checksums) reads and takes
 * writes as before, and stays format 1; a rebalance makes it format 2,
 * every value with its checksum. */
Test(corrupt, format_1_reads_writes_and_rebalances_to_2)
{
	build_v(1);
	append(N, N + 50);
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	cr_assert_eq(zr_format_version(ds), 1);
	cr_assert_eq(zr_verify(ds, NULL, NULL), 0);
	zr_info in;
	cr_assert_eq(zr_info_get(ds, &in), 0);
	cr_assert_eq(in.live_bytes, in.chunk_bytes, "no bytes but the values");
	cr_assert_eq(in.utilisation, 1.0);
	cr_assert_eq(zr_rebalance(ds, 0, NULL), 0, "%s", zr_errmsg(ds));
	cr_assert_eq(zr_format_version(ds), 2);
	zr_close(ds);
	ds = t_open(t_ds, ZR_RDONLY | ZR_CHECK);
	cr_assert_eq(zr_format_version(ds), 2);
	cr_assert_eq(zr_verify(ds, NULL, NULL), 0);
	for (unsigned f = 0; f < 2; f++)
		for (uint64_t id = 0; id < N + 50; id++) {
			uint8_t want[3000];
			size_t n = 1 + t_len(8, id, 2999);
			t_fill(want, n, 8, id);
			zr_batch *g;
			size_t k;
			cr_assert_eq(zr_gather(ds, f, &id, 1, &g), 0, "%s", zr_errmsg(ds));
			const zr_slice *s = zr_batch_records(g, &k);
			cr_assert_eq(s[0].len, n);
			cr_assert_eq(memcmp(s[0].data, want, n), 0);
			zr_batch_release(g);
		}
	cr_assert_eq(zr_info_get(ds, &in), 0);
	cr_assert_eq(in.live_bytes, in.chunk_bytes, "no bytes but the values");
	cr_assert_eq(in.utilisation, 1.0);
	zr_close(ds);
}

Test(corrupt, flate_length_header_lies)
{
	build();
	zr_dataset *ds = t_open(t_ds, ZR_RDONLY);
	zr_record_stat st;
	cr_assert_eq(zr_stat(ds, 1, 30, &st), 0);
	zr_close(ds);
	char rel[32];
	snprintf(rel, sizeof rel, "chunk/%u.zr", st.chunk_id);
	uint8_t hdr[8];
	zr_put_le64(hdr, UINT64_C(1) << 39); /* absurd for its physical length */
	poke(rel, (off_t)st.offset, hdr, 8);
	damaged_record(1, 30, "impossible length");
}

/* Random damage: whatever happens, no crash, and errors come with messages. */
Test(corrupt, random_bit_flips_never_crash, .timeout = T_TIMEOUT(120))
{
	build();
	char src[320];
	snprintf(src, sizeof src, "%s/pristine", t_dir);
	cr_assert_eq(rename(t_ds, src), 0);
	const char *files[] = {"meta.json", "r.offset", "z.offset", "chunk/0.zr", "chunk/3.zr"};
	uint64_t rng = 99;
	int opened = 0, refused = 0;
	for (int trial = 0; trial < 150; trial++) {
		char cmd[1024];
		snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", t_ds, src, t_ds);
		cr_assert_eq(system(cmd), 0);
		const char *rel = files[(rng = t_mix(rng)) % 5];
		bool chunk = strncmp(rel, "chunk/", 6) == 0;
		struct stat st;
		cr_assert_eq(stat(file(rel), &st), 0);
		for (int k = 0; k < 1 + (int)((rng = t_mix(rng)) % 4); k++) {
			off_t off = (off_t)((rng = t_mix(rng)) % (uint64_t)st.st_size);
			uint8_t b;
			int fd = open(file(rel), O_RDWR);
			cr_assert_eq(pread(fd, &b, 1, off), 1);
			b ^= (uint8_t)(1u << ((rng = t_mix(rng)) % 8));
			cr_assert_eq(pwrite(fd, &b, 1, off), 1);
			close(fd);
		}
		/* flips that changed a chunk (two may undo each other) */
		snprintf(cmd, sizeof cmd, "cmp -s '%s/%s' '%s/%s'", src, rel, t_ds, rel);
		bool changed = chunk && system(cmd) != 0;
		zr_dataset *ds;
		int rc = zr_open(&ds, t_ds, ZR_RDONLY);
		if (rc < 0) {
			refused++;
			cr_assert_neq(zr_errmsg(NULL)[0], 0);
			continue;
		}
		opened++;
		int64_t problems = zr_verify(ds, NULL, NULL);
		/* every byte of these chunks is a value or its checksum */
		if (changed)
			cr_assert_gt(problems, 0, "trial %d: a changed %s verifies clean", trial, rel);
		for (unsigned f = 0; f < 2; f++)
			for (uint64_t id = 0; id < zr_length(ds); id += 7) {
				zr_batch *b;
				if (zr_gather(ds, f, &id, 1, &b) == 0)
					zr_batch_release(b);
				else
					cr_assert_neq(zr_errmsg(ds)[0], 0);
			}
		zr_close(ds);
	}
	cr_log_info("bit flips: %d datasets refused at open, %d opened", refused, opened);
	cr_assert_gt(opened + refused, 0);
}

Test(corrupt, chunk_truncated_under_an_open_reader_gives_eio)
{
	build();
	zr_dataset *ds = t_open(t_ds, ZR_RDONLY);
	zr_record_stat st;
	cr_assert_eq(zr_stat(ds, 0, 399, &st), 0);
	truncate_to("chunk/3.zr", 0);
	uint8_t buf[3000];
	for (unsigned f = 0; f < 2; f++) {
		int64_t rc = zr_record_load(ds, f, 399, buf, sizeof buf);
		cr_assert_eq(rc, -EIO, "field %u: %lld (%s)", f, (long long)rc, zr_errmsg(ds));
		cr_assert_not_null(strstr(zr_errmsg(ds), "chunk/3.zr"), "%s", zr_errmsg(ds));
	}
	zr_close(ds);
}

/* The writer's own chunk cut short from outside after it appended and
 * committed: its next append fails EIO naming the chunk, rather than
 * writing at the offset it remembers (the file grew back with a hole,
 * and the records before read as zeros that verify called clean); the
 * records past the cut stay damaged to readers and verify. */
Test(corrupt, chunk_cut_under_a_writer_fails_its_next_append)
{
	build();
	zr_dataset *ds = t_open(t_ds, ZR_RDWR);
	uint8_t buf[3000];
	zr_value v[2] = {{buf, 2000}, {buf, 2000}};
	memset(buf, 7, sizeof buf);
	for (int i = 0; i < 10; i++)
		cr_assert_eq(zr_append(ds, v, NULL), 0, "%s", zr_errmsg(ds));
	cr_assert_eq(zr_commit(ds), 0, "%s", zr_errmsg(ds));
	struct stat st;
	cr_assert_eq(stat(file("chunk/4.zr"), &st), 0, "the writer's chunk is chunk/4.zr");
	truncate_to("chunk/4.zr", st.st_size / 2);
	int rc = zr_append(ds, v, NULL);
	if (rc == 0)
		rc = zr_commit(ds);
	cr_assert_eq(rc, -EIO, "append after the cut: %d (%s)", rc, zr_errmsg(ds));
	cr_assert_not_null(strstr(zr_errmsg(ds), "chunk/4.zr"), "%s", zr_errmsg(ds));
	zr_close(ds);
	cr_assert_eq(stat(file("chunk/4.zr"), &st), 0);
	damaged_record(0, N + 9, "outside chunk/4.zr");
}
