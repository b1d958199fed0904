/*
 * export.c - zr export dir, npy and tar: records back out, as files (the
 * dataset's tree where it keeps names), one array, or WebDataset members.
 */
#include "zr_i.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

static const char export_help[] =
	"usage: zr export dir DS [FIELD] OUT_DIR [--by-id]\n"
	"       zr export npy DS FIELD OUT.npy\n"
	"       zr export tar DS OUT.tar [--by-id]\n"
	"\n"
	"dir: write records as files of OUT_DIR (created; files already there are\n"
	"never overwritten: an export into a directory that has them fails).\n"
	"Without FIELD it writes the dataset's tree, the files its records'\n"
	"original names make (zr import dir and tar keep them), as the mount shows\n"
	"them in tree/: a record named by its path (train/cat/1.jpg) is that file,\n"
	"holding the field the directory was imported into; a record named by a\n"
	"WebDataset key (train/s0) is one file KEY.FIELD per value (train/s0.jpg,\n"
	"train/s0.cls), an i64 class as decimal text. Records without a name have\n"
	"no place in the tree: they are counted on stderr. So after zr import dir\n"
	"SRC DS, diff -r SRC OUT_DIR finds them equal.\n"
	"With FIELD it writes that field's records: each at the path its name\n"
	"makes for that field, or, for records without one (and all with\n"
	"--by-id), named as in the mount's field directory: the record id, plus\n"
	"the field's extension. The bytes are the records' logical bytes, a\n"
	"value's holes (runs of zeros the dataset leaves unwritten) left holes.\n"
	"The tree's directories (empty ones too) and symbolic links, which zr\n"
	"import keeps beside the records, are made with it: links after every\n"
	"file (nothing is written through one), directories' modes and times\n"
	"last. Other directories are made as needed. A name that is not a relative path\n"
	"staying below OUT_DIR (.., an absolute path) stops the export, naming the\n"
	"record.\n"
	"npy: write a fixed-shape FIELD as one array of shape (N, *shape), as\n"
	"numpy.save() would (missing records as zeros); OUT.npy must not exist.\n"
	"tar: write every record as a WebDataset sample: members KEY.FIELD for its\n"
	"present fields, KEY the sample's key when zr import tar kept it (the\n"
	"field of names is not a member), else the record id zero-padded to 9\n"
	"digits; an i64 scalar field (a class, as zr import tar makes .cls members)\n"
	"as decimal text; OUT.tar must not exist. A value with holes is a sparse\n"
	"member (GNU tar's format 1.0: its data alone, which GNU tar, Python's\n"
	"tarfile and zr import tar read). With keys, the tree's symbolic links\n"
	"and directories follow the files as members.\n"
	"npy and tar: OUT - (or a FIFO, a device, /dev/stdout) writes to it as it\n"
	"is, the summary then on stderr: zr export tar DS - | ssh host tar x.\n"
	"dir and tar: a progress line (records/s, MB/s, ETA) is shown on a terminal.\n";

/* Header @h's checksum again, after a change. */
static void tar_resum(unsigned char h[512])
{
	unsigned sum = 0;

	memset(h + 148, ' ', 8);
	for (int i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	h[155] = ' ';
}

/* One ustar header for a file of @mode (S_IFREG, S_IFDIR, S_IFLNK to
 * @link, S_IFIFO, S_IFCHR, S_IFBLK: devmajor and devminor 0 until
 * tar_dev; S_IFREG with @link: a hard link to it): -1 if @name or @link
 * does not fit (a name of up to 100 bytes, after a prefix of up to 155
 * ending at a '/'; a link of up to 100). */
static int tar_header(unsigned char h[512], const char *name, uint64_t size, int64_t mtime,
		      unsigned mode, const char *link)
{
	size_t len = strlen(name), cut = 0;

	memset(h, 0, 512);
	if (link && strlen(link) > 100)
		return -1;
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
	snprintf((char *)h + 100, 8, "%07o", mode & 07777);
	snprintf((char *)h + 108, 8, "%07o", 0);
	snprintf((char *)h + 116, 8, "%07o", 0);
	/* 11 octal digits: up to 8 GiB, more than a record holds; times to 2242 */
	snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)(size & 0x1ffffffffULL));
	snprintf((char *)h + 136, 12, "%011llo",
		 (unsigned long long)(mtime > 0 ? mtime & 0x1ffffffffLL : 0));
	memset(h + 148, ' ', 8);
	h[156] = S_ISDIR(mode)	  ? '5'
		 : S_ISLNK(mode)  ? '2'
		 : link		  ? '1' /* a hard link (S_IFREG) */
		 : S_ISFIFO(mode) ? '6'
		 : S_ISCHR(mode)  ? '3'
		 : S_ISBLK(mode)  ? '4'
				  : '0';
	if (link)
		memcpy(h + 157, link, strlen(link));
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	tar_resum(h);
	return 0;
}

/* Header @h's device numbers, those of @rdev: -1 if one is past the 7
 * octal digits of ustar's fields (2^21; Linux's majors take 12 bits). */
static int tar_dev(unsigned char h[512], uint64_t rdev)
{
	unsigned major = major(rdev), minor = minor(rdev);

	if (major > 07777777 || minor > 07777777)
		return -1;
	snprintf((char *)h + 329, 8, "%07o", major);
	snprintf((char *)h + 337, 8, "%07o", minor);
	tar_resum(h);
	return 0;
}

/* Make header @h one of type @type. */
static void tar_retype(unsigned char h[512], char type)
{
	h[156] = (unsigned char)type;
	tar_resum(h);
}

/* An id into the 8-byte field at @at: octal, or past 7 digits GNU tar's
 * base-256 (0x80, then big-endian). */
static void tar_id(unsigned char *at, uint32_t id)
{
	if (id <= 07777777) {
		snprintf((char *)at, 8, "%07o", id);
		return;
	}
	memset(at, 0, 8);
	at[0] = 0x80;
	for (int i = 0; i < 4; i++)
		at[7 - i] = (unsigned char)(id >> (8 * i));
}

/* Make header @h one of a member owned by @uid and @gid (ZR_OWNER_NONE:
 * root's, as one the dataset keeps no owner of). */
static void tar_own(unsigned char h[512], uint32_t uid, uint32_t gid)
{
	tar_id(h + 108, uid == ZR_OWNER_NONE ? 0 : uid);
	tar_id(h + 116, gid == ZR_OWNER_NONE ? 0 : gid);
	tar_resum(h);
}

/* The segments of data of record @id's value of @n bytes (see
 * zr_record_seek) when it has holes; else 0 (written whole). Each starts
 * and ends on a 512-byte block of the file but the one that ends the file
 * (GNU tar reads a segment's data a block at a time, Python's tarfile
 * byte by byte: they agree on such maps), and a value ending in a hole ends
 * with an empty segment at its end, as GNU tar writes. */
static size_t data_segments(zr_dataset *ds, unsigned f, uint64_t id, uint64_t n,
			    struct zr_tar_seg **segs)
{
	size_t k = 0, cap = 0;
	int64_t data, hole;

	*segs = NULL;
	if (n < ZR_HOLE_MIN)
		return 0; /* no room for a hole */
	for (uint64_t at = 0; at < n; at = (uint64_t)hole) {
		if ((data = zr_record_seek(ds, f, id, at, SEEK_DATA)) == -ENXIO)
			break; /* a hole to the end */
		if (data < 0 || (hole = zr_record_seek(ds, f, id, (uint64_t)data, SEEK_HOLE)) < 0)
			goto whole; /* it cannot tell: all of it is data */
		uint64_t from = (uint64_t)data / 512 * 512;
		uint64_t to = ((uint64_t)hole + 511) / 512 * 512;
		to = to < n ? to : n;
		if (k && (*segs)[k - 1].off + (*segs)[k - 1].len >= from) { /* one block */
			(*segs)[k - 1].len = to - (*segs)[k - 1].off;
			continue;
		}
		if (grow(segs, &cap, k, sizeof **segs, 16) < 0)
			goto whole;
		(*segs)[k++] = (struct zr_tar_seg){from, to - from};
	}
	if (k == 1 && (*segs)[0].off == 0 && (*segs)[0].len == n)
		goto whole; /* no hole */
	if ((k == 0 || (*segs)[k - 1].off + (*segs)[k - 1].len < n) &&
	    grow(segs, &cap, k, sizeof **segs, 16) == 0) {
		(*segs)[k++] = (struct zr_tar_seg){n, 0};
		return k;
	}
	if (k && (*segs)[k - 1].off + (*segs)[k - 1].len == n)
		return k;
whole:
	free(*segs);
	*segs = NULL;
	return 0;
}

/* A pax record "LEN KEY=VALUE\n" at @out (room for @cap): its bytes. */
static size_t pax_record(char *out, size_t cap, const char *key, const char *value)
{
	size_t body = strlen(key) + strlen(value) + 3, len = body + 1; /* ' ', '=', '\n' */

	for (;;) { /* LEN counts its own digits */
		int digits = snprintf(NULL, 0, "%zu", len);
		if ((size_t)digits + body == len)
			break;
		len = (size_t)digits + body;
	}
	snprintf(out, cap, "%zu %s=%s\n", len, key, value);
	return len < cap ? len : cap;
}

/* Member @name of @n bytes at @buf, with holes between @segs: GNU tar's
 * sparse format 1.0 (a pax header names the file and its size, and the
 * member holds a map, then the data alone). 0, 1 (a name too long: write
 * it whole), or -1 (errno). */
static int tar_sparse(int fd, const char *name, const uint8_t *buf, uint64_t n,
		      const struct zr_tar_seg *segs, size_t k, int64_t mtime, unsigned mode,
		      const uint32_t owner[2])
{
	static const unsigned char zeros[512];
	char pax[2 * PATH_MAX], num[24], path[PATH_MAX + ZR_NAME_MAX + 32];
	unsigned char h[512];
	size_t plen = 0, maplen = 0, mapcap = 32 + k * 42;
	uint64_t stored = 0;
	char *map = malloc(mapcap);
	int rc = -1;

	if (!map)
		return -1;
	maplen = (size_t)snprintf(map, mapcap, "%zu\n", k);
	for (size_t i = 0; i < k; i++) {
		maplen += (size_t)snprintf(map + maplen, mapcap - maplen, "%llu\n%llu\n",
					   (unsigned long long)segs[i].off,
					   (unsigned long long)segs[i].len);
		stored += segs[i].len;
	}
	snprintf(num, sizeof num, "%llu", (unsigned long long)n);
	plen += pax_record(pax + plen, sizeof pax - plen, "GNU.sparse.major", "1");
	plen += pax_record(pax + plen, sizeof pax - plen, "GNU.sparse.minor", "0");
	plen += pax_record(pax + plen, sizeof pax - plen, "GNU.sparse.name", name);
	plen += pax_record(pax + plen, sizeof pax - plen, "GNU.sparse.realsize", num);
	snprintf(path, sizeof path, "GNUSparseFile.0/%s", name);
	if (tar_header(h, path, (maplen + 511) / 512 * 512 + stored, mtime, S_IFREG | mode,
		       NULL) < 0) {
		free(map);
		return 1;
	}
	tar_own(h, owner[0], owner[1]);
	unsigned char x[512];
	tar_header(x, "PaxHeaders.0/sparse", plen, mtime, S_IFREG | 0644, NULL);
	tar_retype(x, 'x');
	if (write_all(fd, x, 512) < 0 || write_all(fd, pax, plen) < 0 ||
	    write_all(fd, zeros, (512 - plen % 512) % 512) < 0 || write_all(fd, h, 512) < 0 ||
	    write_all(fd, map, maplen) < 0 || write_all(fd, zeros, (512 - maplen % 512) % 512) < 0)
		goto out;
	for (size_t i = 0; i < k; i++)
		if (write_all(fd, buf + segs[i].off, segs[i].len) < 0)
			goto out;
	rc = write_all(fd, zeros, (512 - stored % 512) % 512);
out:
	free(map);
	return rc;
}

/* Where an export writes @out: "-" is standard output, and so is an
 * existing FIFO or device (/dev/stdout, a pipe) or the file standard
 * output is, written as they are (*@stream: nothing to remove on failure,
 * and what the export says goes to stderr); anything else is made, and
 * must not exist. The descriptor, or -1 (said). */
static int open_out(const char *out, bool *stream)
{
	struct stat st, o;
	int fd;

	*stream = strcmp(out, "-") == 0;
	if (!*stream && stat(out, &st) == 0)
		*stream = (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) ||
			  (fstat(STDOUT_FILENO, &o) == 0 && o.st_dev == st.st_dev &&
			   o.st_ino == st.st_ino);
	if (strcmp(out, "-") == 0)
		fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 0);
	else
		fd = open(out, O_WRONLY | O_CLOEXEC | (*stream ? 0 : O_CREAT | O_EXCL), 0644);
	if (fd < 0)
		zr_warn("export: %s: %s", out, strerror(errno));
	return fd;
}

/* Close the file @out written through @fd; on any failure (@status != 0,
 * or the close) remove it, so no half-written file is left behind. */
static int finish_file(int fd, const char *out, bool stream, int status)
{
	if (close(fd) < 0 && status == 0) {
		zr_warn("export: %s: %s", out, strerror(errno));
		status = 1;
	}
	if (status != 0 && !stream)
		unlink(out);
	return status;
}

/* Field @f of record @id as a file holds it, in *@buf (grown as needed):
 * the stored bytes, or with @text an i64 scalar as decimal text (a class,
 * as WebDataset's .cls members have it). The count of bytes, -ENOENT for a
 * missing value, or another negative code (said on stderr). */
static int64_t member_load(zr_dataset *ds, unsigned f, uint64_t id, bool text, uint8_t **buf,
			   size_t *cap)
{
	zr_record_stat st;
	int64_t n;

	if (zr_stat(ds, f, id, &st) < 0) {
		zr_fail(-1, "export");
		return -EIO;
	}
	if (!st.present)
		return -ENOENT;
	if (st.logical_len > *cap || *cap < 24) { /* 24: an i64 as text */
		size_t want = st.logical_len > 24 ? st.logical_len : 24;
		uint8_t *b = realloc(*buf, want);
		if (!b) {
			zr_warn("export: out of memory");
			return -ENOMEM;
		}
		*buf = b;
		*cap = want;
	}
	if ((n = zr_record_load(ds, f, id, *buf, *cap)) < 0) {
		zr_fail((int)n, "export");
		return n;
	}
	if (text) {
		char digits[24];
		int len = zr_names_text_of(*buf, (size_t)n, digits, sizeof digits);
		if (len >= 0) {
			memcpy(*buf, digits, (size_t)len);
			n = len;
		}
	}
	return n;
}

/* Whether field @f is an i64 scalar: a class, decimal text in a tar. */
static bool class_field(const zr_dataset *ds, unsigned f)
{
	const zr_field_spec *fs = zr_field(ds, f);

	return fs->dtype == ZR_I64 && fs->fixed && fs->ndim == 0;
}

/* Records a tree leaves out: their names make no file (not a relative
 * path below OUT, too long, or a key with a dot in its last part), as the
 * mount's tree/ leaves them out. The export writes the others, then says
 * so, naming the first, and fails. */
struct left_out {
	uint64_t n, first;
	char name[128];
};

static void leave_out(struct left_out *lo, uint64_t id, const char *name)
{
	if (lo->n++ == 0) {
		lo->first = id;
		snprintf(lo->name, sizeof lo->name, "%.120s", name);
	}
}

/* 0, or 1 (said) if records were left out. */
static int say_left_out(const struct left_out *lo, const char *how)
{
	if (!lo->n)
		return 0;
	zr_warn("export: %llu record%s a name that makes no file (not a relative path below the "
		"output, too long, or a key with a dot in its last part), so %s left out; the "
		"first: record %llu, '%s' (%s)",
		(unsigned long long)lo->n, lo->n == 1 ? " has" : "s have",
		lo->n == 1 ? "it was" : "they were", (unsigned long long)lo->first, lo->name, how);
	return 1;
}

/* The tree's symbolic links, FIFOs and devices, then its hard links (to
 * them too), then its directories, the deepest first, of @t (@n) as
 * members of @fd: after every file, so that tar x
 * sets a directory's time after the last file it writes into it (tar c
 * puts a directory before its files; tar x then sets its time when it
 * leaves it, and records in id order may come back to it). A socket has no
 * place in a tar file: left out, as tar c leaves it, said once. */
static int tar_tree(int fd, const char *out, const zr_tree_entry *t, size_t n)
{
	unsigned char h[512];
	char name[PATH_MAX + 2];
	size_t sockets = 0, first = 0;

	for (size_t k = 0; k < 3 * n; k++) {
		size_t i = k < 2 * n ? k % n : 3 * n - 1 - k;
		bool links = k < 2 * n, hard = S_ISREG(t[i].mode);
		if (S_ISDIR(t[i].mode) == links || strcmp(t[i].path, ".") == 0 ||
		    (links && hard != (k >= n)))
			continue;
		if (S_ISSOCK(t[i].mode)) {
			first = sockets++ ? first : i;
			continue;
		}
		snprintf(name, sizeof name, "%s%s", t[i].path, links ? "" : "/");
		if (tar_header(h, name, 0, t[i].mtime / 1000000000, t[i].mode, t[i].target) < 0) {
			zr_warn("export: %s: '%s'%s%s is too long for a tar header", out, t[i].path,
				t[i].target ? " -> " : "", t[i].target ? t[i].target : "");
			return -1;
		}
		if ((S_ISCHR(t[i].mode) || S_ISBLK(t[i].mode)) && tar_dev(h, t[i].rdev) < 0) {
			zr_warn("export: %s: device '%s' is %u:%u, past what a tar header holds", out,
				t[i].path, major(t[i].rdev), minor(t[i].rdev));
			return -1;
		}
		if (t[i].owned)
			tar_own(h, t[i].uid, t[i].gid);
		if (write_all(fd, h, 512) < 0) {
			zr_warn("export: %s: %s", out, strerror(errno));
			return -1;
		}
	}
	if (sockets)
		zr_warn("export: %s: %zu socket%s left out (a tar file holds none); the first: %s",
			out, sockets, sockets == 1 ? "" : "s", t[first].path);
	return 0;
}

static int export_tar(zr_dataset *ds, const char *out, bool by_id)
{
	static const unsigned char zeros[1024];
	static char key[PATH_MAX], name[PATH_MAX + ZR_NAME_MAX + 2];
	unsigned char h[512];
	uint8_t *buf = NULL;
	size_t cap = 0;
	uint64_t members = 0, bytes = 0;
	struct zr_progress line;
	bool stream;
	int fd = open_out(out, &stream), status = 1;
	int64_t mtime = 0;
	struct left_out lo = {0};
	zr_tree_entry *tree = NULL;
	size_t ntree = 0;
	zr_names nm;
	zr_info in;

	if (fd < 0)
		return 1;
	if (zr_info_get(ds, &in) == 0)
		mtime = in.mtime;
	if (zr_names_get(ds, &nm) < 0)
		goto out;
	int names = nm.field; /* not a member, as the times are not */
	if (!nm.key || by_id)
		nm.field = -1; /* paths are not keys: ids then */
	/* the tree's directories and links, where members are named by keys */
	if (nm.field >= 0 && zr_tree_get(ds, &tree, &ntree) < 0) {
		zr_warn("export: out of memory");
		goto out;
	}
	zr_progress_start(&line, "records");
	for (uint64_t id = 0; id < zr_length(ds); id++) {
		int got = nm.field >= 0 ? names_get(ds, &nm, id, key, sizeof key) : 0;
		zr_progress_show(&line, id, zr_length(ds), bytes, false);
		if (got == -EINVAL) {
			leave_out(&lo, id, key);
			continue;
		}
		if (got < 0)
			goto out;
		if (got == 0)
			snprintf(key, sizeof key, "%09llu", (unsigned long long)id);
		for (unsigned f = 0; f < zr_field_count(ds); f++) {
			int64_t n, ns;
			uint32_t mode;
			if ((int)f == names || zr_names_own(&nm, f))
				continue; /* the key itself, the members' times and modes */
			if ((n = member_load(ds, f, id, class_field(ds, f), &buf, &cap)) == -ENOENT)
				continue;
			if (n < 0)
				goto out;
			snprintf(name, sizeof name, "%s.%s", key, zr_field(ds, f)->name);
			if (zr_name_mtime(ds, &nm, id, f, &ns) != 1)
				ns = mtime * 1000000000;
			/* a file's mode is its member's (with paths: the files') */
			if ((!nm.key && (int)f != nm.files) || zr_name_mode(ds, &nm, id, f, &mode) != 1)
				mode = 0644;
			/* and so is its owner (none kept: root's) */
			uint32_t owner[2] = {ZR_OWNER_NONE, ZR_OWNER_NONE};
			if (nm.key || (int)f == nm.files)
				zr_name_owner(ds, &nm, id, f, &owner[0], &owner[1]);
			/* a value with holes as a sparse member: its data alone */
			struct zr_tar_seg *segs = NULL;
			size_t k = 0;
			if (!class_field(ds, f))
				k = data_segments(ds, f, id, (uint64_t)n, &segs);
			int sparse = k ? tar_sparse(fd, name, buf, (uint64_t)n, segs, k,
						    ns / 1000000000, mode & 07777, owner)
				       : 1;
			free(segs);
			if (sparse < 0) {
				zr_warn("export: %s: %s", out, strerror(errno));
				goto out;
			}
			if (sparse == 0) {
				members++;
				bytes += (uint64_t)n;
				continue;
			}
			if (tar_header(h, name, (uint64_t)n, ns / 1000000000, S_IFREG | (mode & 07777),
				       NULL) < 0) {
				zr_warn("export: %s: record %llu: member name '%s' is too long for "
					"a tar header (--by-id names members by id)", out,
					(unsigned long long)id, name);
				goto out;
			}
			tar_own(h, owner[0], owner[1]);
			if (write_all(fd, h, 512) < 0 || write_all(fd, buf, (size_t)n) < 0 ||
			    write_all(fd, zeros, (512 - (size_t)n % 512) % 512) < 0) {
				zr_warn("export: %s: %s", out, strerror(errno));
				goto out;
			}
			members++;
			bytes += (uint64_t)n;
		}
	}
	zr_progress_show(&line, zr_length(ds), zr_length(ds), bytes, true);
	if (tar_tree(fd, out, tree, ntree) < 0)
		goto out;
	if (write_all(fd, zeros, sizeof zeros) < 0) {
		zr_warn("export: %s: %s", out, strerror(errno));
		goto out;
	}
	fprintf(stream ? stderr : stdout, "%s: %llu records, %llu members\n", out,
		(unsigned long long)(zr_length(ds) - lo.n), (unsigned long long)members);
	status = 0;
out:
	free(buf);
	free(tree);
	/* the archive of the others is kept, and the export fails */
	status = finish_file(fd, out, stream, status);
	return status ? status : say_left_out(&lo, "--by-id names every member by id");
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
	bool stream;
	if ((fd = open_out(out, &stream)) < 0)
		return 1;
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
			fprintf(stream ? stderr : stdout, "%s: %llu rows\n", out,
				(unsigned long long)id);
			status = 0;
		}
	}
	free(buf);
	return finish_file(fd, out, stream, status);
}

/* The tree's directories (@links false) or symbolic links, FIFOs, sockets
 * and devices, then hard links (true) of @t (@n) under @dfd (@out):
 * directories made before the files go in them, links after every file
 * (no file is written through one), hard links after what they name. 0,
 * or 1 (said). */
static int tree_make(int dfd, const char *out, const zr_tree_entry *t, size_t n, bool links)
{
	int status = 0;

	for (size_t k = 0; k < (links ? 2 * n : n) && status == 0; k++) {
		size_t i = k % n;
		const char *leaf;
		int at;
		if (S_ISDIR(t[i].mode) == links || strcmp(t[i].path, ".") == 0 ||
		    (links && S_ISREG(t[i].mode) != (k >= n)))
			continue;
		if ((at = names_parent_at(dfd, t[i].path, out, &leaf)) < 0)
			return 1;
		/* writable until its files are in: its own mode comes last (a
		 * FIFO's, a socket's too: mknod's is the umask's) */
		if (S_ISLNK(t[i].mode)	 ? symlinkat(t[i].target, at, leaf) < 0
		    : S_ISREG(t[i].mode) ? linkat(dfd, t[i].target, at, leaf, 0) < 0
		    : links ? mknodat(at, leaf, t[i].mode & S_IFMT, (dev_t)t[i].rdev) < 0
			    : mkdirat(at, leaf, 0700) < 0 && errno != EEXIST) {
			/* a hard link naming nothing the dataset has (a record
			 * removed by zr rm): none, as the mount shows none */
			if (S_ISREG(t[i].mode) && errno == ENOENT) {
				if (at != dfd)
					close(at);
				continue;
			}
			zr_warn("export: %s/%s: %s", out, t[i].path,
				errno == EEXIST ? "exists (OUT_DIR must be empty, and names differ)"
						: strerror(errno));
			status = 1;
		}
		if (at != dfd)
			close(at);
	}
	return status;
}

/* The modes and times of @t's directories, links, FIFOs, sockets and devices under
 * @dfd, the deepest first: a directory's time is set after every change in
 * it. */
static int tree_finish(int dfd, const char *out, const zr_tree_entry *t, size_t n)
{
	for (size_t i = n; i-- > 0;) {
		bool top = strcmp(t[i].path, ".") == 0;
		int64_t atime = t[i].atime == ZR_MTIME_NONE ? t[i].mtime : t[i].atime;
		if (S_ISREG(t[i].mode))
			continue; /* a hard link: what it names has its own */
		struct timespec ts[2] = {zr_ns_time(atime), zr_ns_time(t[i].mtime)};
		const char *leaf = ".";
		int at = top ? dfd : names_parent_at(dfd, t[i].path, out, &leaf), rc = 0;
		if (at < 0)
			return 1;
		/* root gives each its owner back (as tar x and cp -a do) */
		bool own = t[i].owned && geteuid() == 0;
		if (!S_ISDIR(t[i].mode)) { /* the link itself; a FIFO or socket opened not */
			rc = (own && fchownat(at, leaf, t[i].uid, t[i].gid, AT_SYMLINK_NOFOLLOW) < 0) ||
					     (!S_ISLNK(t[i].mode) &&
					      fchmodat(at, leaf, t[i].mode & 07777, 0) < 0)
				     ? -1
				     : utimensat(at, leaf, ts, AT_SYMLINK_NOFOLLOW);
		} else { /* the directory itself, never what a link there points to */
			int fd = openat(at, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			rc = fd < 0 || (own && fchown(fd, t[i].uid, t[i].gid) < 0) ||
					     fchmod(fd, t[i].mode & 07777) < 0 ||
					     futimens(fd, ts) < 0
				     ? -1
				     : 0;
			if (fd >= 0)
				close(fd);
		}
		if (rc < 0)
			zr_warn("export: %s/%s: %s", out, t[i].path, strerror(errno));
		if (at != dfd)
			close(at);
		if (rc < 0)
			return 1;
	}
	return 0;
}

/* Write records as files of @out (made if need be; files already there are
 * not overwritten): field @field's, or with @field -1 the dataset's tree
 * (every field's files). A record's file is at the path its name makes
 * (zr_names_file); one field's records without one (no name, --by-id, a
 * field whose files the names do not make) are named by id. */

static int export_dir(zr_dataset *ds, int field, const char *out, bool by_id)
{
	static char name[PATH_MAX + 1], path[PATH_MAX + ZR_NAME_MAX + 2];
	zr_tree_entry *tree = NULL;
	size_t ntree = 0;
	zr_names nm, kept;
	uint64_t count = 0, unnamed = 0, bytes = 0;
	struct zr_progress line;
	struct left_out lo = {0};
	uint8_t *buf = NULL;
	size_t cap = 0;
	int dfd = -1, status = 1;

	if (zr_names_get(ds, &nm) < 0) {
		zr_warn("export: out of memory");
		return 1;
	}
	kept = nm;
	if (by_id)
		nm.field = -1; /* names unused; the times are the files' still */
	if (field < 0 && nm.field < 0) {
		zr_warn("export: %s keeps no original names, so it makes no tree: 'zr export dir "
			"DS FIELD OUT_DIR' writes a field's records by id", zr_path(ds));
		return 1;
	}
	if (mkdir(out, 0755) < 0 && errno != EEXIST) {
		zr_warn("export: %s: %s", out, strerror(errno));
		return 1;
	}
	if ((dfd = open(out, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		zr_warn("export: %s: %s", out, strerror(errno));
		return 1;
	}
	/* the tree's directories and links: with the tree, not one field's */
	if (field < 0 && zr_tree_get(ds, &tree, &ntree) < 0) {
		zr_warn("export: out of memory");
		goto out;
	}
	if (tree_make(dfd, out, tree, ntree, false) != 0)
		goto out;
	zr_progress_start(&line, "records");
	for (uint64_t id = 0; id < zr_length(ds); id++) {
		int named = nm.field >= 0 ? names_get(ds, &nm, id, name, sizeof name) : 0;
		zr_progress_show(&line, id, zr_length(ds), bytes, false);
		if (named == -EINVAL && field < 0) { /* no place in the tree */
			leave_out(&lo, id, name);
			continue;
		}
		if (named == -EINVAL)
			named = 0; /* one field's records: by id */
		if (named < 0)
			goto out;
		if (!named && field < 0) {
			unnamed++;
			continue;
		}
		for (unsigned f = field < 0 ? 0 : (unsigned)field;
		     f < (field < 0 ? zr_field_count(ds) : (unsigned)field + 1); f++) {
			int len = named ? zr_names_file(ds, &nm, f, name, strlen(name), path,
							sizeof path)
					: 0;
			int64_t n;
			if (len < 0 && field < 0) {
				leave_out(&lo, id, name);
				break;
			}
			if (len < 0)
				len = 0; /* one field's records: by id */
			if (len == 0 && field < 0)
				continue; /* not a file of the tree */
			if (len == 0)
				zr_record_file_name(ds, &kept, f, id, path, sizeof path);
			/* a class as text is loaded; bytes are copied a piece at a
			 * time, whatever their size, and their holes stay holes */
			bool text = len > 0 && zr_names_text(ds, &nm, f);
			zr_record_stat st;
			if (zr_stat(ds, f, id, &st) < 0) {
				zr_fail(-1, "export");
				goto out;
			}
			if (!st.present)
				continue;
			if (text && (n = member_load(ds, f, id, true, &buf, &cap)) < 0)
				goto out;
			int fd = names_create_at(dfd, path, out);
			if (fd < 0)
				goto out;
			if (!text && (n = zr_record_copy(ds, f, id, fd)) < 0) {
				char what[PATH_MAX + ZR_NAME_MAX + 64];
				snprintf(what, sizeof what, "export: %s/%s", out, path);
				zr_fail((int)n, what);
				close(fd);
				goto out;
			}
			if (text && write_all(fd, buf, (size_t)n) < 0) {
				zr_warn("export: %s/%s: %s", out, path, strerror(errno));
				close(fd);
				goto out;
			}
			/* the file's owner (for root), mode and time, where the
			 * dataset keeps them (zr import does): as they were, as
			 * rsync -a sets them; the owner first (chown clears set-id bits) */
			int64_t ns;
			uint32_t mode, uid, gid;
			if (geteuid() == 0 && zr_name_owner(ds, &nm, id, f, &uid, &gid) == 1 &&
			    fchown(fd, uid, gid) < 0) { /* ZR_OWNER_NONE: (uid_t)-1, kept */
				zr_warn("export: %s/%s: %s", out, path, strerror(errno));
				close(fd);
				goto out;
			}
			if (zr_name_mode(ds, &nm, id, f, &mode) == 1 && fchmod(fd, mode & 07777) < 0) {
				zr_warn("export: %s/%s: %s", out, path, strerror(errno));
				close(fd);
				goto out;
			}
			if (zr_name_mtime(ds, &nm, id, f, &ns) == 1) {
				int64_t atime;
				struct timespec ts[2] = {zr_ns_time(ns), zr_ns_time(ns)};
				if (zr_name_atime(ds, &nm, id, f, &atime) == 1)
					ts[0] = zr_ns_time(atime);
				futimens(fd, ts);
			}
			close(fd);
			count++;
			bytes += (uint64_t)n;
		}
	}
	zr_progress_show(&line, zr_length(ds), zr_length(ds), bytes, true);
	if (unnamed)
		zr_warn("export: %llu record%s no name, so no place in the tree: 'zr export dir "
			"DS FIELD OUT_DIR' writes a field's records, those by id",
			(unsigned long long)unnamed, unnamed == 1 ? " has" : "s have");
	if (tree_make(dfd, out, tree, ntree, true) != 0 || tree_finish(dfd, out, tree, ntree) != 0)
		goto out;
	printf("%s: %llu file%s\n", out, (unsigned long long)count, count == 1 ? "" : "s");
	status = say_left_out(&lo, "'zr export dir DS FIELD OUT_DIR' writes a field's records, "
				   "those by id");
out:
	close(dfd);
	free(buf);
	free(tree);
	return status;
}

int cmd_export(int argc, char **argv)
{
	static const struct option opts[] = {{"by-id", no_argument, 0, 'i'}, ZR_OPT_HELP,
					     ZR_OPT_END};
	zr_dataset *ds = NULL;
	bool by_id = false;
	int f, status = 1;

	while ((f = zr_getopt(argc, argv, "h", opts, "export")) != -1)
		if (f == 'i')
			by_id = true;
		else
			return f == 'h' ? (fputs(export_help, stdout), 0) : EXIT_USAGE;
	argc -= optind - 1; /* the operands from argv[1] on */
	argv += optind - 1;
	if (argc == 4 && (strcmp(argv[1], "tar") == 0 || (strcmp(argv[1], "dir") == 0 && !by_id))) {
		int rc = zr_open(&ds, argv[2], ZR_RDONLY | ZR_CHECK);
		if (rc < 0)
			return zr_fail(rc, "export");
		status = argv[1][0] == 't' ? export_tar(ds, argv[3], by_id)
					   : export_dir(ds, -1, argv[3], false);
		zr_close(ds);
		return status;
	}
	if (argc != 5 || (strcmp(argv[1], "dir") != 0 && strcmp(argv[1], "npy") != 0)) {
		zr_warn("export: expected 'dir DS [FIELD] OUT_DIR [--by-id]', 'npy DS FIELD OUT.npy' "
			"or 'tar DS OUT.tar [--by-id]' (see 'zr export --help')");
		return EXIT_USAGE;
	}
	if ((f = zr_open_field("export", argv[2], argv[3], &ds)) < 0)
		return 1;
	status = strcmp(argv[1], "npy") == 0 ? export_npy(ds, (unsigned)f, argv[4])
					     : export_dir(ds, f, argv[4], by_id);
	zr_close(ds);
	return status;
}
