/*
 * names.c - records' original names, as zr import dir and zr import tar
 * keep them (a field of names, named in attrs.names), and zr find.
 *
 * A name is a file's path under the imported directory ("kind": "path") or
 * a WebDataset sample's key ("kind": "key", a member's extension added to
 * make a file name): the rule is the core's (zr_names). Names come from
 * outside: before one becomes a path it is checked to be relative and to
 * stay below the directory it is written into (zr_name_safe).
 */
#include "zr_i.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int names_get(zr_dataset *ds, const zr_names *n, uint64_t id, char *buf, size_t cap)
{
	int64_t got = zr_name_load(ds, n, id, buf, cap);

	if (got == -ENAMETOOLONG) {
		snprintf(buf, cap, "%s", "(longer than a path may be)");
		return -EINVAL;
	}
	if (got < 0) {
		zr_fail((int)got, "export");
		return (int)got;
	}
	if (got > 0 && !zr_name_safe(buf, (size_t)got))
		return -EINVAL;
	return got > 0;
}

/* OUT_DIR as given, without the slashes that end it ("out/": out/a.jpg). */
static int shown_len(const char *shown)
{
	size_t n = strlen(shown);

	while (n > 1 && shown[n - 1] == '/')
		n--;
	return (int)n;
}

int names_parent_at(int dfd, const char *path, const char *shown, const char **leaf)
{
	char dir[PATH_MAX];
	const char *last = strrchr(path, '/');
	int at = dfd;

	/* each directory made (or entered) without following a link */
	for (const char *p = path; last && p < last;) {
		const char *slash = strchr(p, '/');
		snprintf(dir, sizeof dir, "%.*s", (int)(slash - p), p);
		if (mkdirat(at, dir, 0755) < 0 && errno != EEXIST)
			goto fail;
		int next = openat(at, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (at != dfd)
			close(at);
		if ((at = next) < 0)
			goto fail;
		p = slash + 1;
	}
	*leaf = last ? last + 1 : path;
	return at;
fail:
	zr_warn("export: %.*s/%s: %s", shown_len(shown), shown, path, strerror(errno));
	if (at >= 0 && at != dfd)
		close(at);
	return -1;
}

int names_create_at(int dfd, const char *path, const char *shown)
{
	const char *leaf;
	int at = names_parent_at(dfd, path, shown, &leaf), fd;

	if (at < 0)
		return -1;
	fd = openat(at, leaf, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0 && errno == EEXIST)
		zr_warn("export: %.*s/%s: exists (OUT_DIR must be empty, and names differ)",
			shown_len(shown), shown, path);
	else if (fd < 0)
		zr_warn("export: %.*s/%s: %s", shown_len(shown), shown, path, strerror(errno));
	if (at != dfd)
		close(at);
	return fd;
}

static const char find_help[] =
	"usage: zr find DS NAME [NAME...]\n"
	"\n"
	"Print the id of the record each NAME names, one line each: the original\n"
	"name zr import dir (the file's path under SRC) or zr import tar (the\n"
	"sample's key) kept in the dataset's field of names (attrs.names in\n"
	"meta.json), in the order given. Reads every name once. A NAME that\n"
	"names no record is said on stderr (no line) and the exit status is 1,\n"
	"as when the dataset keeps no names.\n";

int cmd_find(int argc, char **argv)
{
	zr_dataset *ds = NULL;
	zr_names n;
	uint64_t *ids;
	char *buf;
	int rc, status = 0;

	if ((rc = zr_no_options(argc, argv, "find", find_help)) >= 0)
		return rc;
	if (!zr_operands(argc, "find", 2, -1, "DS NAME [NAME...]"))
		return EXIT_USAGE;
	argc -= optind - 1; /* the operands from argv[1] on */
	argv += optind - 1;
	if ((rc = zr_open(&ds, argv[1], ZR_RDONLY)) < 0)
		return zr_fail(rc, "find");
	ids = malloc((size_t)(argc - 2) * sizeof *ids);
	buf = malloc(PATH_MAX + 1);
	if (!ids || !buf || zr_names_get(ds, &n) < 0) {
		zr_warn("find: out of memory");
		status = 1;
		goto out;
	}
	if (n.field < 0) {
		zr_warn("find: %s keeps no original names (zr import dir and tar keep them, "
			"unless --no-names)", argv[1]);
		status = 1;
		goto out;
	}
	for (int i = 2; i < argc; i++)
		ids[i - 2] = UINT64_MAX;
	for (uint64_t id = 0; id < zr_length(ds); id++) {
		int64_t got;
		if (zr_present(ds, (unsigned)n.field, id) != 1)
			continue;
		got = zr_record_load(ds, (unsigned)n.field, id, buf, PATH_MAX);
		if (got == -ENOBUFS)
			continue; /* longer than any NAME */
		if (got < 0) {
			zr_fail((int)got, "find");
			status = 1;
			goto out;
		}
		for (int i = 2; i < argc; i++)
			if (ids[i - 2] == UINT64_MAX && strlen(argv[i]) == (size_t)got &&
			    memcmp(argv[i], buf, (size_t)got) == 0)
				ids[i - 2] = id;
	}
	for (int i = 2; i < argc; i++) {
		if (ids[i - 2] == UINT64_MAX) {
			zr_warn("find: %s: no record has this name", argv[i]);
			status = 1;
		} else {
			printf("%llu\n", (unsigned long long)ids[i - 2]);
		}
	}
out:
	free(ids);
	free(buf);
	zr_close(ds);
	return status;
}
