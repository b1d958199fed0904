/*
 * tar.c - list the members of a WebDataset-style tar shard for `zr import
 * tar`: ustar headers, GNU long names ('L') and pax paths and times ('x'),
 * each member's modification time with it, and GNU tar's sparse files
 * (tar --sparse: old GNU 'S' members, pax formats 0.0, 0.1 and 1.0), whose
 * maps say where their data goes and the rest is zeros. Every number read from a header
 * is checked against the shard's size before it is used, so a damaged or
 * hostile archive gives a message, never a read outside the file or an
 * allocation it asks for.
 */
#include "zr_i.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

/* Long names and pax headers larger than this are refused. */
#define TAR_EXT_MAX (1u << 20)

/* A numeric header field: octal (space or NUL terminated) or base-256. */
static uint64_t tar_num(const unsigned char *f, size_t n, bool *ok)
{
	uint64_t v = 0;
	size_t i = 0;

	if (f[0] & 0x80) { /* base-256: only what fits 64 bits */
		for (i = 1; i < n; i++) {
			if (v >> 56)
				*ok = false;
			v = v << 8 | f[i];
		}
		return v;
	}
	while (i < n && f[i] == ' ')
		i++;
	for (; i < n && f[i] >= '0' && f[i] <= '7'; i++)
		v = v * 8 + (uint64_t)(f[i] - '0');
	if (i < n && f[i] != 0 && f[i] != ' ')
		*ok = false;
	return v;
}

/* Member @path of the shard the writers open as @open_as (messages: @shard). */
/* Of a sparse member, the segments from @seg_at on are its own (nsegs: none). */
static int tar_member(struct zr_tar *t, const char *open_as, const char *shard, const char *path,
		      uint64_t off, uint64_t len, int64_t mtime, size_t seg_at, char *err,
		      size_t errlen)
{
	const char *base, *dot;
	size_t keylen;
	uint32_t field;

	/* tar -C DIR . names members ./x: the name is x, as extracting makes it */
	while (path[0] == '.' && path[1] == '/')
		for (path += 2; *path == '/';)
			path++;
	base = strrchr(path, '/');
	base = base ? base + 1 : path;
	dot = strchr(base, '.');
	if (!dot || dot == base || !dot[1]) {
		/* not a sample's member (a README, a manifest): WebDataset skips it */
		t->nsegs = seg_at;
		if (t->skipped++ == 0)
			snprintf(t->first_skipped, sizeof t->first_skipped, "%s: %s", shard, path);
		return 0;
	}
	if (len > ZR_RECORD_MAX) {
		snprintf(err, errlen, "%s: member '%s' has %llu bytes, more than a record holds",
			 shard, path, (unsigned long long)len);
		return -1;
	}
	keylen = (size_t)(dot - path);
	for (field = 0; field < t->fields.n; field++)
		if (strcmp(t->fields.v[field], dot + 1) == 0)
			break;
	if (field == t->fields.n) {
		if (zr_name_check(dot + 1) < 0 || t->fields.n + 1 >= ZR_FIELDS_MAX) {
			snprintf(err, errlen, "%s: member '%s': '%s' cannot name a field (%s)", shard,
				 path, dot + 1,
				 t->fields.n + 1 >= ZR_FIELDS_MAX ? "too many fields" : zr_errmsg(NULL));
			return -1;
		}
		if (strs_add(&t->fields, strdup(dot + 1)) < 0)
			return -1;
	}
	/* WebDataset keeps a sample's members together: a new key starts a record */
	if (t->keys == 0 || keylen >= sizeof t->last_key || strncmp(t->last_key, path, keylen) != 0 ||
	    t->last_key[keylen] != 0) {
		if (t->keys == UINT32_MAX) {
			snprintf(err, errlen, "%s: too many samples", shard);
			return -1;
		}
		snprintf(t->last_key, sizeof t->last_key, "%.*s", (int)keylen, path);
		if (strs_add(&t->key_names, strdup(t->last_key)) < 0)
			return -1;
		t->keys++;
	} else {
		for (size_t i = t->n; i-- > 0 && t->m[i].key == t->keys - 1;)
			if (t->m[i].field == field) {
				snprintf(err, errlen, "%s: member '%s' appears twice in one sample",
					 shard, path);
				return -1;
			}
	}
	if (grow(&t->m, &t->cap, t->n, sizeof *t->m, 1024) < 0)
		return -1;
	t->m[t->n++] = (struct zr_tar_member){t->keys - 1, field, open_as, off, len, mtime,
					      (uint32_t)(t->nsegs - seg_at), seg_at};
	return 0;
}

/* A directory or symbolic link member @path (@target: a link's), kept
 * for the tree: "./" the top, as "."; names that make no path below it
 * (.., absolute) are left to the import, which says so. */
static int tar_entry(struct zr_tar *t, const char *path, const char *target, uint32_t mode,
		     uint64_t rdev, int64_t mtime)
{
	size_t len;

	while (path[0] == '.' && path[1] == '/')
		for (path += 2; *path == '/';)
			path++;
	len = strlen(path);
	while (len > 0 && path[len - 1] == '/')
		len--;
	if (grow(&t->e, &t->ecap, t->ne, sizeof *t->e, 64) < 0)
		return -1;
	struct zr_tar_entry *e = &t->e[t->ne];
	*e = (struct zr_tar_entry){.mode = mode, .rdev = rdev, .mtime = mtime};
	e->path = len ? strndup(path, len) : strdup(".");
	if (!e->path || (target && !(e->target = strdup(target)))) {
		free(e->path);
		return -1;
	}
	t->ne++;
	return 0;
}

/* @sec seconds and @ns nanoseconds after 1970 as the names keep a time
 * (clamped to what they keep: zr_time_ns). */
static int64_t tar_time(uint64_t sec, int64_t ns)
{
	struct timespec ts = {sec > ZR_TIME_MAX_S ? ZR_TIME_MAX_S + 1 : (time_t)sec, ns};

	return zr_time_ns(ts);
}

/* A pax mtime ("SECONDS[.FRACTION]") in nanoseconds; -1 if it is none. */
static int64_t pax_time(const char *s, size_t len)
{
	int64_t sec = 0, ns = 0, scale = 100000000;
	size_t i = 0;

	for (; i < len && s[i] >= '0' && s[i] <= '9' && sec < INT64_MAX / 10000000000; i++)
		sec = sec * 10 + (s[i] - '0');
	if (i == 0)
		return -1;
	if (i < len && s[i] == '.')
		for (i++; i < len && s[i] >= '0' && s[i] <= '9'; i++, scale /= 10)
			ns += (s[i] - '0') * scale;
	return i == len ? tar_time((uint64_t)sec, ns) : -1;
}

/* What pax extended headers say of the next member. */
struct pax {
	char *path, *link;     /* PATH_MAX bytes each (shared with 'L' and 'K') */
	int64_t mtime;         /* -1: none */
	/* GNU tar's sparse file (--sparse --format=posix): its segments from
	 * seg_at on, in the map keys (0.0, 0.1) or heading its data (1.0) */
	bool sparse, bad, have_off;
	int major;
	char name[PATH_MAX];   /* GNU.sparse.name: the file's own name */
	uint64_t size, off;    /* its size; 0.0: an offset waiting for its size */
	size_t seg_at;
};

static void pax_reset(struct pax *x, const struct zr_tar *t)
{
	x->mtime = -1;
	x->sparse = x->bad = x->have_off = false;
	x->major = 0;
	x->name[0] = 0;
	x->size = x->off = 0;
	x->seg_at = t->nsegs;
}

/* A decimal number of @n bytes at @s (all of them digits, fitting 63 bits). */
static bool decimal(const char *s, size_t n, uint64_t *v)
{
	*v = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9' || *v > (UINT64_MAX >> 1) / 10)
			return false;
		*v = *v * 10 + (uint64_t)(s[i] - '0');
	}
	return n > 0;
}

static int seg_add(struct zr_tar *t, uint64_t off, uint64_t len)
{
	if (grow(&t->segs, &t->segcap, t->nsegs, sizeof *t->segs, 16) < 0)
		return -1;
	t->segs[t->nsegs++] = (struct zr_tar_seg){off, len};
	return 0;
}

/* GNU.sparse.map (format 0.1): "OFFSET,SIZE,..." of @n bytes at @s. */
static int pax_map(struct zr_tar *t, struct pax *x, const char *s, size_t n)
{
	uint64_t v[2];
	size_t k = 0;

	for (size_t at = 0; at <= n && !x->bad;) {
		const char *comma = memchr(s + at, ',', n - at);
		size_t len = comma ? (size_t)(comma - (s + at)) : n - at;
		x->bad = !decimal(s + at, len, &v[k % 2]);
		if (!x->bad && k++ % 2 == 1 && seg_add(t, v[0], v[1]) < 0)
			return -1;
		at += len + 1;
	}
	x->bad |= k % 2 != 0;
	return 0;
}

/* One pax record KEY=VALUE (@klen bytes of key, @vlen of value) into @x. */
static int pax_record(struct zr_tar *t, struct pax *x, const char *key, size_t klen,
		      const char *val, size_t vlen)
{
#define KEY(k) (klen == sizeof(k) - 1 && memcmp(key, k, klen) == 0)
	uint64_t v = 0;

	if (KEY("path"))
		snprintf(x->path, PATH_MAX, "%.*s", (int)vlen, val);
	else if (KEY("linkpath"))
		snprintf(x->link, PATH_MAX, "%.*s", (int)vlen, val);
	else if (KEY("mtime"))
		x->mtime = pax_time(val, vlen);
	if (klen < 11 || memcmp(key, "GNU.sparse.", 11) != 0)
		return 0; /* other keys change nothing kept */
	x->sparse = true;
	if (KEY("GNU.sparse.name"))
		snprintf(x->name, sizeof x->name, "%.*s", (int)vlen, val);
	else if (KEY("GNU.sparse.major"))
		x->bad |= !decimal(val, vlen, &v) || v > 1, x->major = (int)v;
	else if (KEY("GNU.sparse.size") || KEY("GNU.sparse.realsize"))
		x->bad |= !decimal(val, vlen, &x->size);
	else if (KEY("GNU.sparse.offset")) /* 0.0: pairs of records */
		x->bad |= !decimal(val, vlen, &x->off) || x->have_off, x->have_off = true;
	else if (KEY("GNU.sparse.numbytes")) {
		x->bad |= !decimal(val, vlen, &v) || !x->have_off;
		x->have_off = false;
		if (!x->bad && seg_add(t, x->off, v) < 0)
			return -1;
	} else if (KEY("GNU.sparse.map")) {
		return pax_map(t, x, val, vlen);
	}
	return 0;
#undef KEY
}

/* The records ("LEN KEY=VALUE\n") of a pax extended header into @x;
 * records that do not add up end the scan. 0, or -1: out of memory. */
static int pax_header(struct zr_tar *t, struct pax *x, const char *data, size_t len)
{
	for (size_t at = 0; at < len;) {
		const char *p = data + at, *end, *eq;
		size_t rl = 0, i = 0;

		while (at + i < len && p[i] >= '0' && p[i] <= '9' && rl < len)
			rl = rl * 10 + (size_t)(p[i++] - '0');
		if (i == 0 || rl > len - at || i >= rl || p[i] != ' ')
			return 0;
		end = p + rl - 1; /* the record's '\n' */
		if (*end != '\n' || !(eq = memchr(p + i + 1, '=', (size_t)(end - (p + i + 1)))))
			return 0;
		if (pax_record(t, x, p + i + 1, (size_t)(eq - (p + i + 1)), eq + 1,
			       (size_t)(end - (eq + 1))) < 0)
			return -1;
		at += rl;
	}
	return 0;
}

/* A sparse file of format 1.0: the map heads its @len bytes of data at
 * @at of @fd, decimal numbers a line each (how many segments, then the
 * offset and the size of each), padded to a block. The map's bytes, or
 * -1 (the reason in @err), -2 (out of memory). */
static int64_t map_v1(struct zr_tar *t, int fd, uint64_t at, uint64_t len, const char *what,
		      char *err, size_t errlen)
{
	char b[512];
	uint64_t v = 0, count = 0, off = 0, k = 0;
	size_t digits = 0;

	for (uint64_t used = 0; used + 512 <= len && used < TAR_EXT_MAX; used += 512) {
		if (pread(fd, b, sizeof b, (off_t)(at + used)) != (ssize_t)sizeof b)
			break;
		for (size_t i = 0; i < sizeof b; i++) {
			if (b[i] >= '0' && b[i] <= '9' && v <= (UINT64_MAX >> 1) / 10) {
				v = v * 10 + (uint64_t)(b[i] - '0');
				digits++;
				continue;
			}
			if (b[i] != '\n' || !digits)
				goto bad;
			if (k == 0 && (count = v) > TAR_EXT_MAX / 4) /* "0\n0\n" a segment */
				goto bad;
			if (k > 0 && k % 2 == 1)
				off = v;
			else if (k > 0 && seg_add(t, off, v) < 0)
				return -2;
			v = digits = 0;
			if (++k == 2 * count + 1)
				return (int64_t)(used + 512);
		}
	}
bad:
	snprintf(err, errlen, "%s: a damaged sparse map (format 1.0)", what);
	return -1;
}

/* The segments of a sparse member from @seg_at on: in order, apart, in its
 * @size bytes, their data no more than the @data bytes it stores. */
static int segs_check(const struct zr_tar *t, size_t seg_at, uint64_t size, uint64_t data,
		      const char *what, char *err, size_t errlen)
{
	uint64_t end = 0, sum = 0;

	for (size_t i = seg_at; i < t->nsegs; i++) {
		const struct zr_tar_seg *s = &t->segs[i];
		if (s->off < end || s->len > size || s->off > size - s->len ||
		    s->len > data - sum || i - seg_at >= UINT32_MAX) {
			snprintf(err, errlen,
				 "%s: a damaged sparse map (segment %zu: %llu bytes at %llu, in a "
				 "file of %llu bytes that stores %llu)",
				 what, i - seg_at, (unsigned long long)s->len,
				 (unsigned long long)s->off, (unsigned long long)size,
				 (unsigned long long)data);
			return -1;
		}
		end = s->off + s->len;
		sum += s->len;
	}
	return 0;
}

/* An old GNU sparse member ('S') in header @h at @off: its map (four
 * segments in the header, 21 in each extension block that follows) into
 * t->segs; the blocks of extension in *@ext. 0, -1 (said), -2. */
static int gnu_sparse(struct zr_tar *t, int fd, const unsigned char *h, uint64_t off,
		      uint64_t size, uint64_t *ext, const char *what, char *err, size_t errlen)
{
	unsigned char b[512];
	const unsigned char *e = h + 386; /* the header's four entries */
	unsigned n = 4;
	bool more = h[482] != 0, ok = true;

	*ext = 0;
	for (;;) {
		for (unsigned i = 0; i < n && e[i * 24]; i++) {
			uint64_t at = tar_num(e + i * 24, 12, &ok);
			if (seg_add(t, at, tar_num(e + i * 24 + 12, 12, &ok)) < 0)
				return -2;
		}
		if (!ok)
			break;
		if (!more)
			return 0;
		if (off + 1024 + *ext * 512 > size ||
		    pread(fd, b, sizeof b, (off_t)(off + 512 + *ext * 512)) != (ssize_t)sizeof b)
			break;
		++*ext;
		e = b;
		n = 21;
		more = b[504] != 0;
	}
	snprintf(err, errlen, "%s: a damaged sparse map (old GNU format)", what);
	return -1;
}

/* Regular file member @name (header @h at @off, @len bytes after it; a
 * sparse one with @x's map or type 'S'): one of a sample's values. The
 * blocks it takes past its header in *@blocks. 0, or -1 (@err; empty: out
 * of memory). */
static int file_member(struct zr_tar *t, int fd, const char *path, const char *shard,
		       const unsigned char *h, uint64_t off, uint64_t len, uint64_t size,
		       const char *name, struct pax *x, int64_t mtime, uint64_t *blocks,
		       char *err, size_t errlen)
{
	char what[PATH_MAX + 64];
	uint64_t at = off + 512, data = len, ext = 0;
	bool ok = true;
	int rc = 0;

	*blocks = (len + 511) / 512;
	snprintf(what, sizeof what, "%s: member '%s'", shard, name);
	if (h[156] == 'S') {
		x->size = tar_num(h + 483, 12, &ok);
		x->seg_at = t->nsegs;
		if ((rc = gnu_sparse(t, fd, h, off, size, &ext, what, err, errlen)) == 0 &&
		    len > size - off - 512 - ext * 512) {
			snprintf(err, errlen,
				 "%s: truncated tar (member at byte %llu needs %llu bytes)", shard,
				 (unsigned long long)off, (unsigned long long)len);
			rc = -1;
		}
		at += ext * 512;
		*blocks += ext;
	} else if (x->sparse && (x->bad || x->have_off)) {
		snprintf(err, errlen, "%s: a damaged sparse map (its GNU.sparse pax keys), or one "
			 "of a format not known", what);
		rc = -1;
	} else if (x->sparse && x->major == 1) {
		int64_t map = map_v1(t, fd, at, len, what, err, errlen);
		rc = map < 0 ? (int)map : 0;
		at += map > 0 ? (uint64_t)map : 0;
		data -= map > 0 ? (uint64_t)map : 0;
	}
	if (rc == -2)
		err[0] = 0;
	if (rc < 0)
		return -1;
	if (!(h[156] == 'S' || x->sparse)) {
		x->seg_at = t->nsegs;
		return tar_member(t, path, shard, name, at, len, mtime, x->seg_at, err, errlen);
	}
	if (segs_check(t, x->seg_at, x->size, data, what, err, errlen) < 0)
		return -1;
	/* all holes: one empty segment at its end keeps it a sparse member */
	if (t->nsegs == x->seg_at && seg_add(t, x->size, 0) < 0) {
		err[0] = 0;
		return -1;
	}
	return tar_member(t, path, shard, name, at, x->size, mtime, x->seg_at, err, errlen);
}

int zr_tar_scan(struct zr_tar *t, int fd, const char *path, const char *shard, char *err,
		size_t errlen)
{
	unsigned char h[512];
	char longname[PATH_MAX] = "", longlink[PATH_MAX] = "", name[PATH_MAX];
	struct pax x = {.path = longname, .link = longlink}; /* the next member's */
	uint64_t off = 0, size;
	struct stat st;

	if (fstat(fd, &st) < 0) {
		snprintf(err, errlen, "%s: %s", shard, strerror(errno));
		return -1;
	}
	size = (uint64_t)st.st_size;
	pax_reset(&x, t);
	for (;;) {
		ssize_t r = pread(fd, h, sizeof h, (off_t)off);
		bool ok = true, zero = true;
		uint64_t blocks;

		if (r != (ssize_t)sizeof h) { /* every archive ends with zero blocks */
			if (r < 0)
				snprintf(err, errlen, "%s: %s", shard, strerror(errno));
			else
				snprintf(err, errlen,
					 "%s: truncated tar (a header at byte %llu is cut short)",
					 shard, (unsigned long long)off);
			return -1;
		}
		for (int i = 0; i < 512 && zero; i++)
			zero = h[i] == 0;
		if (zero)
			return 0;
		uint64_t sum = 0, want = tar_num(h + 148, 8, &ok), len = tar_num(h + 124, 12, &ok);
		for (int i = 0; i < 512; i++)
			sum += (i >= 148 && i < 156) ? ' ' : h[i];
		if (!ok || sum != want) {
			snprintf(err, errlen, "%s: not a tar archive, or damaged (bad header at byte %llu)",
				 shard, (unsigned long long)off);
			return -1;
		}
		if (len > size - off - 512) { /* off + 512 <= size: the header was read */
			snprintf(err, errlen, "%s: truncated tar (member at byte %llu needs %llu bytes)",
				 shard, (unsigned long long)off, (unsigned long long)len);
			return -1;
		}
		blocks = (len + 511) / 512;
		char type = (char)h[156];
		if (type == 'L' || type == 'K' || type == 'x') { /* the next member's name */
			char *data = len <= TAR_EXT_MAX ? malloc(len + 1) : NULL;
			if (!data || pread(fd, data, len, (off_t)(off + 512)) != (ssize_t)len) {
				free(data);
				snprintf(err, errlen, "%s: cannot read the extended header at byte %llu%s",
					 shard, (unsigned long long)off,
					 len > TAR_EXT_MAX ? " (larger than 1 MiB)" : "");
				return -1;
			}
			data[len] = 0;
			int rc = 0;
			if (type == 'L')
				snprintf(longname, sizeof longname, "%s", data);
			else if (type == 'K')
				snprintf(longlink, sizeof longlink, "%s", data);
			else
				rc = pax_header(t, &x, data, len);
			free(data);
			if (rc < 0)
				return -1;
		} else if (type == '0' || type == 0 || type == '7' || type == '5' || type == '2' ||
			   type == '6' || type == '3' || type == '4' || type == 'S') {
			if (x.sparse && x.name[0])
				snprintf(name, sizeof name, "%s", x.name);
			else if (longname[0])
				snprintf(name, sizeof name, "%s", longname);
			else if (memcmp(h + 257, "ustar", 6) == 0 && h[345]) /* POSIX's prefix */
				snprintf(name, sizeof name, "%.155s/%.100s", (char *)h + 345, (char *)h);
			else
				snprintf(name, sizeof name, "%.100s", (char *)h);
			if (type == '2' && !longlink[0])
				snprintf(longlink, sizeof longlink, "%.100s", (char *)h + 157);
			int64_t mtime = x.mtime >= 0 ? x.mtime : tar_time(tar_num(h + 136, 12, &ok), 0);
			uint32_t mode = (uint32_t)tar_num(h + 100, 8, &ok) & 07777;
			if (type == '5' || type == '2' || type == '6' || type == '3' || type == '4') {
				mode |= type == '5'   ? S_IFDIR
					: type == '2' ? S_IFLNK
					: type == '6' ? S_IFIFO
					: type == '3' ? S_IFCHR
						      : S_IFBLK;
				/* a device's numbers: devmajor, devminor */
				uint64_t rdev = type == '3' || type == '4'
							? makedev(tar_num(h + 329, 8, &ok),
								  tar_num(h + 337, 8, &ok))
							: 0;
				t->nsegs = x.seg_at; /* a map of no file */
				if (tar_entry(t, name, type == '2' ? longlink : NULL, mode, rdev,
					      mtime) < 0)
					return -1;
			} else if (file_member(t, fd, path, shard, h, off, len, size, name, &x,
					       mtime, &blocks, err, errlen) < 0) {
				return -1;
			}
			longname[0] = longlink[0] = 0;
			pax_reset(&x, t);
		} else {
			/* hard links: counted, said once (import); a
			 * directory's members carry their paths; globals, tar's
			 * own extensions: nothing to say */
			if (type == '1' && t->unfiled++ == 0)
				snprintf(t->first_unfiled, sizeof t->first_unfiled, "%s: %s", shard,
					 longname[0] ? longname : (char *)h);
			longname[0] = longlink[0] = 0;
			t->nsegs = x.seg_at;
			pax_reset(&x, t);
		}
		off += 512 + blocks * 512;
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

uint64_t zr_tar_split_keys(const struct zr_tar *t, const char **first)
{
	char **v = t->key_names.n ? malloc(t->key_names.n * sizeof *v) : NULL;
	uint64_t again = 0;

	*first = NULL;
	if (!v)
		return 0;
	memcpy(v, t->key_names.v, t->key_names.n * sizeof *v);
	qsort(v, t->key_names.n, sizeof *v, cmp_str);
	for (size_t i = 1; i < t->key_names.n; i++)
		if (strcmp(v[i - 1], v[i]) == 0 && (i == 1 || strcmp(v[i - 2], v[i]) != 0) &&
		    again++ == 0)
			*first = v[i]; /* owned by t->key_names */
	free(v);
	return again;
}

void zr_tar_free(struct zr_tar *t)
{
	strs_free(&t->fields);
	strs_free(&t->key_names);
	for (size_t i = 0; i < t->ne; i++) {
		free(t->e[i].path);
		free(t->e[i].target);
	}
	free(t->e);
	free(t->m);
	free(t->segs);
	memset(t, 0, sizeof *t);
}
