/*
 * export.c - zr export dir, zr ls, zr stat: records back out, and where
 * they are.
 */
#include "zr_i.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char export_help[] =
	"usage: zr export dir DS FIELD OUT_DIR [--by-id]\n"
	"       zr export npy DS FIELD OUT.npy\n"
	"       zr export tar DS OUT.tar [--by-id]\n"
	"\n"
	"dir: write every present record of FIELD as a file of OUT_DIR (created; it\n"
	"must not exist or be empty). A dataset that keeps original names (zr\n"
	"import dir and tar keep them) writes each record under its name: the\n"
	"file's path under the imported directory, directories made as needed\n"
	"(so diff -r against that directory finds them equal), or a WebDataset\n"
	"key plus the field's extension (or name). Otherwise, with --by-id, and\n"
	"for a record without a name, the file is named as in the mount: the\n"
	"record id, plus the field's extension. The bytes are the records'\n"
	"logical bytes. A name that is not a relative path staying below OUT_DIR\n"
	"(.., an absolute path) stops the export, naming the record.\n"
	"npy: write a fixed-shape FIELD as one array of shape (N, *shape), as\n"
	"numpy.save() would (missing records as zeros); OUT.npy must not exist.\n"
	"tar: write every record as a WebDataset sample: members KEY.FIELD for its\n"
	"present fields, KEY the sample's key when zr import tar kept it (the\n"
	"field of names is not a member), else the record id zero-padded to 9\n"
	"digits; an i64 scalar field (a class, as zr import tar makes .cls members)\n"
	"as decimal text; OUT.tar must not exist.\n";

/* One ustar header for a regular file: -1 if @name does not fit (a name of
 * up to 100 bytes, after a prefix of up to 155 ending at a '/'). */
static int tar_header(unsigned char h[512], const char *name, uint64_t size, int64_t mtime)
{
	size_t len = strlen(name), cut = 0;
	unsigned sum = 0;

	memset(h, 0, 512);
	if (len > 100) {
		const char *slash = NULL;
		for (const char *p = name; (p = strchr(p, '/')) != NULL; p++)
			if ((size_t)(p - name) <= 155 && len - (size_t)(p - name) - 1 <= 100)
				slash = p;
			else if ((size_t)(p - name) > 155)
				break;
		if (!slash || slash == name)
			return -1;
		cut = (size_t)(slash - name);
		memcpy(h + 345, name, cut);
		cut++;
	}
	memcpy(h, name + cut, len - cut);
	snprintf((char *)h + 100, 8, "%07o", 0644);
	snprintf((char *)h + 108, 8, "%07o", 0);
	snprintf((char *)h + 116, 8, "%07o", 0);
	/* 11 octal digits: up to 8 GiB, more than a record holds; times to 2242 */
	snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)(size & 0x1ffffffffULL));
	snprintf((char *)h + 136, 12, "%011llo",
		 (unsigned long long)(mtime > 0 ? mtime & 0x1ffffffffLL : 0));
	memset(h + 148, ' ', 8);
	h[156] = '0';
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	for (int i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	h[155] = ' ';
	return 0;
}

/* Close the file @out written through @fd; on any failure (@status != 0,
 * or the close) remove it, so no half-written file is left behind. */
static int finish_file(int fd, const char *out, int status)
{
	if (close(fd) < 0 && status == 0) {
		zr_warn("export: %s: %s", out, strerror(errno));
		status = 1;
	}
	if (status != 0)
		unlink(out);
	return status;
}

static int export_tar(zr_dataset *ds, const char *out, bool by_id)
{
	static const unsigned char zeros[1024];
	static char key[PATH_MAX], name[PATH_MAX + ZR_NAME_MAX + 2];
	unsigned char h[512];
	uint8_t *buf = NULL;
	size_t cap = 0;
	uint64_t members = 0;
	int fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644), status = 1;
	int64_t mtime = 0;
	struct zr_names nm = {-1, false};
	zr_info in;

	if (fd < 0) {
		zr_warn("export: %s: %s", out, strerror(errno));
		return 1;
	}
	if (zr_info_get(ds, &in) == 0)
		mtime = in.mtime;
	if (!by_id && names_open(ds, &nm) < 0)
		goto out;
	if (!nm.key)
		nm.field = -1; /* paths are not keys: ids then */
	for (uint64_t id = 0; id < zr_length(ds); id++) {
		int got = nm.field >= 0 ? names_get(ds, &nm, id, key, sizeof key) : 0;
		if (got < 0)
			goto out;
		if (got == 0)
			snprintf(key, sizeof key, "%09llu", (unsigned long long)id);
		for (unsigned f = 0; f < zr_field_count(ds); f++) {
			zr_record_stat st;
			int64_t n;
			if ((int)f == nm.field)
				continue; /* the key itself */
			if (zr_stat(ds, f, id, &st) < 0) {
				zr_fail(-1, "export");
				goto out;
			}
			if (!st.present)
				continue;
			if (st.logical_len > cap || cap < 24) { /* 24: an i64 as text */
				size_t want = st.logical_len > 24 ? st.logical_len : 24;
				uint8_t *b = realloc(buf, want);
				if (!b)
					goto out;
				buf = b;
				cap = want;
			}
			if ((n = zr_record_load(ds, f, id, buf, cap)) < 0) {
				zr_fail((int)n, "export");
				goto out;
			}
			/* an i64 scalar (a class: .cls) as WebDataset has it: decimal text */
			const zr_field_spec *fs = zr_field(ds, f);
			if (fs->dtype == ZR_I64 && fs->fixed && fs->ndim == 0 && n == 8) {
				int64_t v;
				memcpy(&v, buf, 8);
				n = snprintf((char *)buf, cap, "%lld", (long long)v);
			}
			snprintf(name, sizeof name, "%s.%s", key, fs->name);
			if (tar_header(h, name, (uint64_t)n, mtime) < 0) {
				zr_warn("export: %s: record %llu: member name '%s' is too long for "
					"a tar header (--by-id names members by id)", out,
					(unsigned long long)id, name);
				goto out;
			}
			if (write_all(fd, h, 512) < 0 || write_all(fd, buf, (size_t)n) < 0 ||
			    write_all(fd, zeros, (512 - (size_t)n % 512) % 512) < 0) {
				zr_warn("export: %s: %s", out, strerror(errno));
				goto out;
			}
			members++;
		}
	}
	if (write_all(fd, zeros, sizeof zeros) < 0) {
		zr_warn("export: %s: %s", out, strerror(errno));
		goto out;
	}
	printf("%s: %llu records, %llu members\n", out, (unsigned long long)zr_length(ds),
	       (unsigned long long)members);
	status = 0;
out:
	free(buf);
	return finish_file(fd, out, status);
}

static int export_npy(zr_dataset *ds, unsigned f, const char *out)
{
	const zr_field_spec *spec = zr_field(ds, f);
	uint64_t rsz = zr_field_record_size(ds, f);
	char hdr[ZR_NPY_HEADER_MAX];
	uint8_t *buf;
	int n = zr_npy_header(spec, zr_length(ds), hdr, sizeof hdr), fd, status = 1;

	if (n < 0)
		return zr_fail(n, "export");
	fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		zr_warn("export: %s: %s", out, strerror(errno));
		return 1;
	}
	buf = malloc(rsz ? rsz : 1);
	if (buf && write_all(fd, hdr, (size_t)n) == 0) {
		uint64_t id;
		for (id = 0; id < zr_length(ds); id++) {
			int64_t got = zr_record_load(ds, f, id, buf, rsz);
			if (got == -ENOENT) { /* missing: zeros */
				memset(buf, 0, rsz);
				got = (int64_t)rsz;
			}
			if (got < 0) {
				zr_fail((int)got, "export");
				break;
			}
			if (write_all(fd, buf, rsz) < 0) {
				zr_warn("export: %s: %s", out, strerror(errno));
				break;
			}
		}
		if (id == zr_length(ds)) {
			printf("%s: %llu rows\n", out, (unsigned long long)id);
			status = 0;
		}
	}
	free(buf);
	return finish_file(fd, out, status);
}

static const char ls_help[] =
	"usage: zr ls DIR FIELD [--long]\n"
	"\n"
	"List the present records of FIELD by their names in the mount; with\n"
	"--long: id, logical size, stored size, chunk and offset.\n";

static const char stat_help[] =
	"usage: zr stat DIR FIELD ID\n"
	"\n"
	"Show where record ID of FIELD is stored and its sizes.\n";

static int open_field(const char *what, const char *dir, const char *field, zr_dataset **ds)
{
	int rc = zr_open(ds, dir, ZR_RDONLY), f;

	if (rc < 0)
		return zr_fail(rc, what) ? -1 : -1;
	f = zr_field_find(*ds, field);
	if (f < 0) {
		zr_fail(f, what);
		zr_close(*ds);
		*ds = NULL;
	}
	return f;
}

static void record_name(const zr_dataset *ds, unsigned f, uint64_t id, char *buf, size_t cap)
{
	const char *ext = zr_field(ds, f)->ext;

	if (ext)
		snprintf(buf, cap, "%llu.%s", (unsigned long long)id, ext);
	else
		snprintf(buf, cap, "%llu", (unsigned long long)id);
}

int cmd_export(int argc, char **argv)
{
	zr_dataset *ds = NULL;
	uint8_t *buf = NULL;
	size_t cap = 0;
	uint64_t count = 0;
	int f, status = 1;

	if (argc >= 2 && is_help(argv[1])) {
		fputs(export_help, stdout);
		return 0;
	}
	bool by_id = argc > 2 && strcmp(argv[argc - 1], "--by-id") == 0;
	if (by_id)
		argc--;
	if (argc == 4 && strcmp(argv[1], "tar") == 0) {
		int rc = zr_open(&ds, argv[2], ZR_RDONLY);
		if (rc < 0)
			return zr_fail(rc, "export");
		status = export_tar(ds, argv[3], by_id);
		zr_close(ds);
		return status;
	}
	if (argc != 5 || (strcmp(argv[1], "dir") != 0 && strcmp(argv[1], "npy") != 0)) {
		zr_warn("export: expected 'dir DS FIELD OUT_DIR [--by-id]', 'npy DS FIELD OUT.npy' "
			"or 'tar DS OUT.tar [--by-id]' (see 'zr export --help')");
		return EXIT_USAGE;
	}
	if ((f = open_field("export", argv[2], argv[3], &ds)) < 0)
		return 1;
	if (strcmp(argv[1], "npy") == 0) {
		status = export_npy(ds, (unsigned)f, argv[4]);
		zr_close(ds);
		return status;
	}
	if (mkdir(argv[4], 0755) < 0 && errno != EEXIST) {
		zr_warn("export: %s: %s", argv[4], strerror(errno));
		goto out;
	}
	int dfd = open(argv[4], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		zr_warn("export: %s: %s", argv[4], strerror(errno));
		goto out;
	}
	struct zr_names nm = {-1, false};
	if (!by_id && names_open(ds, &nm) < 0) {
		zr_warn("export: out of memory");
		goto close_out;
	}
	if (nm.field == f)
		nm.field = -1; /* the names themselves: by id */
	for (uint64_t id = 0; id < zr_length(ds); id++) {
		zr_record_stat st;
		static char name[PATH_MAX + ZR_EXT_MAX + 2];
		int64_t n;
		int named;
		if (zr_stat(ds, (unsigned)f, id, &st) < 0) {
			zr_fail(-1, "export");
			goto close_out;
		}
		if (!st.present)
			continue;
		if (st.logical_len > cap) {
			uint8_t *b = realloc(buf, st.logical_len);
			if (!b) {
				zr_warn("export: out of memory");
				goto close_out;
			}
			buf = b;
			cap = st.logical_len;
		}
		if ((n = zr_record_load(ds, (unsigned)f, id, buf, cap)) < 0) {
			zr_fail((int)n, "export");
			goto close_out;
		}
		if ((named = nm.field >= 0 ? names_get(ds, &nm, id, name, PATH_MAX) : 0) < 0)
			goto close_out;
		if (named && nm.key) { /* a WebDataset key: the member's extension */
			const char *ext = zr_field(ds, (unsigned)f)->ext;
			size_t len = strlen(name);
			snprintf(name + len, sizeof name - len, ".%s",
				 ext ? ext : zr_field(ds, (unsigned)f)->name);
		}
		if (!named)
			record_name(ds, (unsigned)f, id, name, sizeof name);
		int fd = names_create_at(dfd, name, argv[4]);
		if (fd < 0)
			goto close_out;
		if (write_all(fd, buf, (size_t)n) < 0) {
			zr_warn("export: %s/%s: %s", argv[4], name, strerror(errno));
			close(fd);
			goto close_out;
		}
		close(fd);
		count++;
	}
	printf("%s: %llu files\n", argv[4], (unsigned long long)count);
	status = 0;
close_out:
	close(dfd);
out:
	free(buf);
	zr_close(ds);
	return status;
}

int cmd_ls(int argc, char **argv)
{
	zr_dataset *ds = NULL;
	bool lng = argc == 4 && strcmp(argv[3], "--long") == 0;
	int f, status = 0;

	if (argc >= 2 && is_help(argv[1])) {
		fputs(ls_help, stdout);
		return 0;
	}
	if (argc != 3 && !lng) {
		zr_warn("ls: expected DIR FIELD [--long] (see 'zr ls --help')");
		return EXIT_USAGE;
	}
	if ((f = open_field("ls", argv[1], argv[2], &ds)) < 0)
		return 1;
	for (uint64_t id = 0; id < zr_length(ds); id++) {
		zr_record_stat st;
		char name[64];
		if (zr_stat(ds, (unsigned)f, id, &st) < 0) {
			zr_fail(-1, "ls"); /* listed so far; the rest unknown */
			status = 1;
			break;
		}
		if (!st.present)
			continue;
		record_name(ds, (unsigned)f, id, name, sizeof name);
		if (lng && st.physical_len == 0)
			printf("%-20s %12llu %12u  empty\n", name, (unsigned long long)st.logical_len, 0u);
		else if (lng)
			printf("%-20s %12llu %12u  chunk %u @ %llu\n", name,
			       (unsigned long long)st.logical_len, st.physical_len, st.chunk_id,
			       (unsigned long long)st.offset);
		else
			printf("%s\n", name);
	}
	zr_close(ds);
	return status;
}

int cmd_stat(int argc, char **argv)
{
	zr_dataset *ds = NULL;
	zr_record_stat st;
	uint64_t id;
	int f, rc;

	if (argc >= 2 && is_help(argv[1])) {
		fputs(stat_help, stdout);
		return 0;
	}
	if (argc != 4) {
		zr_warn("stat: expected DIR FIELD ID (see 'zr stat --help')");
		return EXIT_USAGE;
	}
	if (parse_u64(argv[3], 0, UINT64_MAX, "stat: ID", &id) < 0)
		return EXIT_USAGE;
	if ((f = open_field("stat", argv[1], argv[2], &ds)) < 0)
		return 1;
	if ((rc = zr_stat(ds, (unsigned)f, id, &st)) < 0) {
		zr_fail(rc, "stat");
		zr_close(ds);
		return 1;
	}
	printf("record     %llu\nfield      %s (%s, %s)\n", (unsigned long long)id, argv[2],
	       zr_dtype_name(zr_field(ds, (unsigned)f)->dtype),
	       zr_compress_name(zr_field(ds, (unsigned)f)->compress));
	if (!st.present)
		printf("state      missing\n");
	else if (st.physical_len == 0)
		printf("state      present, empty\nsize       0 bytes\n");
	else
		printf("state      present\nsize       %llu bytes\nstored     %u bytes in chunk/%u.zr "
		       "at offset %llu\n",
		       (unsigned long long)st.logical_len, st.physical_len, st.chunk_id,
		       (unsigned long long)st.offset);
	zr_close(ds);
	return 0;
}
