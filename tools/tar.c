/*
 * tar.c - list the members of a WebDataset-style tar shard for `zr import
 * tar`: ustar headers, GNU long names ('L') and pax paths and times ('x'),
 * each member's modification time with it. Every number read from a header
 * is checked against the shard's size before it is used, so a damaged or
 * hostile archive gives a message, never a read outside the file or an
 * allocation it asks for.
 */
#include "zr_i.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
static int tar_member(struct zr_tar *t, const char *open_as, const char *shard, const char *path,
		      uint64_t off, uint64_t len, int64_t mtime, char *err, size_t errlen)
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
	t->m[t->n++] = (struct zr_tar_member){t->keys - 1, field, open_as, off, len, mtime};
	return 0;
}

/* A directory or symbolic link member @path (@target: a link's), kept
 * for the tree: "./" the top, as "."; names that make no path below it
 * (.., absolute) are left to the import, which says so. */
static int tar_entry(struct zr_tar *t, const char *path, const char *target, uint32_t mode,
		     int64_t mtime)
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
	*e = (struct zr_tar_entry){.mode = mode, .mtime = mtime};
	e->path = len ? strndup(path, len) : strdup(".");
	if (!e->path || (target && !(e->target = strdup(target)))) {
		free(e->path);
		return -1;
	}
	t->ne++;
	return 0;
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
	return i == len ? sec * 1000000000 + ns : -1;
}

/* The path, the link target and the mtime a pax extended header ("LEN
 * KEY=VALUE\n" records) sets, if any, into @out, @link (PATH_MAX bytes
 * each) and *@mtime; records that do not add up end the scan. */
static void pax_header(const char *data, size_t len, char *out, char *link, int64_t *mtime)
{
	for (size_t at = 0; at < len;) {
		const char *p = data + at, *end;
		size_t rl = 0, i = 0;

		while (at + i < len && p[i] >= '0' && p[i] <= '9' && rl < len)
			rl = rl * 10 + (size_t)(p[i++] - '0');
		if (i == 0 || rl > len - at || i >= rl || p[i] != ' ')
			return;
		end = p + rl - 1; /* the record's '\n' */
		if (*end != '\n')
			return;
		if ((size_t)(end - (p + i + 1)) >= 5 && memcmp(p + i + 1, "path=", 5) == 0)
			snprintf(out, PATH_MAX, "%.*s", (int)(end - (p + i + 6)), p + i + 6);
		if ((size_t)(end - (p + i + 1)) >= 9 && memcmp(p + i + 1, "linkpath=", 9) == 0)
			snprintf(link, PATH_MAX, "%.*s", (int)(end - (p + i + 10)), p + i + 10);
		if ((size_t)(end - (p + i + 1)) >= 6 && memcmp(p + i + 1, "mtime=", 6) == 0)
			*mtime = pax_time(p + i + 7, (size_t)(end - (p + i + 7)));
		at += rl;
	}
}

int zr_tar_scan(struct zr_tar *t, int fd, const char *path, const char *shard, char *err,
		size_t errlen)
{
	unsigned char h[512];
	char longname[PATH_MAX] = "", longlink[PATH_MAX] = "", name[PATH_MAX];
	int64_t pax_mtime = -1; /* the next member's, from a pax header */
	uint64_t off = 0, size;
	struct stat st;

	if (fstat(fd, &st) < 0) {
		snprintf(err, errlen, "%s: %s", shard, strerror(errno));
		return -1;
	}
	size = (uint64_t)st.st_size;
	for (;;) {
		ssize_t r = pread(fd, h, sizeof h, (off_t)off);
		bool ok = true, zero = true;

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
			if (type == 'L')
				snprintf(longname, sizeof longname, "%s", data);
			else if (type == 'K')
				snprintf(longlink, sizeof longlink, "%s", data);
			else
				pax_header(data, len, longname, longlink, &pax_mtime);
			free(data);
		} else if (type == '0' || type == 0 || type == '7' || type == '5' || type == '2') {
			if (longname[0])
				snprintf(name, sizeof name, "%s", longname);
			else if (memcmp(h + 257, "ustar", 5) == 0 && h[345])
				snprintf(name, sizeof name, "%.155s/%.100s", (char *)h + 345, (char *)h);
			else
				snprintf(name, sizeof name, "%.100s", (char *)h);
			if (type == '2' && !longlink[0])
				snprintf(longlink, sizeof longlink, "%.100s", (char *)h + 157);
			int64_t mtime = pax_mtime >= 0 ? pax_mtime
					: (int64_t)tar_num(h + 136, 12, &ok) * 1000000000;
			uint32_t mode = (uint32_t)tar_num(h + 100, 8, &ok) & 07777;
			longname[0] = 0;
			pax_mtime = -1;
			if (type == '5' || type == '2') {
				mode |= type == '5' ? S_IFDIR : S_IFLNK;
				if (tar_entry(t, name, type == '2' ? longlink : NULL, mode, mtime) < 0)
					return -1;
			} else if (tar_member(t, path, shard, name, off + 512, len, mtime, err,
					      errlen) < 0) {
				return -1;
			}
			longlink[0] = 0;
		} else {
			/* links, FIFOs, devices: counted, said once (import); a
			 * directory's members carry their paths; globals, tar's
			 * own extensions: nothing to say */
			if (type >= '1' && type <= '6' && type != '5' && t->unfiled++ == 0)
				snprintf(t->first_unfiled, sizeof t->first_unfiled, "%s: %s", shard,
					 longname[0] ? longname : (char *)h);
			longname[0] = longlink[0] = 0;
			pax_mtime = -1;
		}
		off += 512 + (len + 511) / 512 * 512;
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
	memset(t, 0, sizeof *t);
}
