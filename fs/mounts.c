/*
 * mounts.c - what this mount namespace has mounted (/proc/self/mountinfo):
 * what a new mount checks before it takes a mount point (a zrfs mount there
 * already) or a dataset for writing (a writer whose mount is gone).
 */
#include "zrfs_i.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* mountinfo writes a space, tab, newline or backslash in a path as \ooo:
 * undone in place */
static void unescape(char *s)
{
	char *out = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = 0;
}

/* The next field of *@line (fields are split by a space), cut out in place */
static char *field(char **line)
{
	char *f = strsep(line, " ");

	while (f && !*f) /* never two spaces in mountinfo; no harm if there were */
		f = strsep(line, " ");
	return f;
}

void zrfs_mounts_each(void (*fn)(const struct zrfs_mount *m, void *ctx), void *ctx)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;

	if (!f)
		return;
	while (getline(&line, &cap, f) > 0) {
		/* id parent major:minor root point options [optional...] - type source super */
		char *rest = line, *dash = strstr(line, " - ");
		struct zrfs_mount m;
		char *opts;

		line[strcspn(line, "\n")] = 0;
		if (!dash)
			continue;
		*dash = 0;
		char *id = field(&rest);
		field(&rest); /* parent */
		char *dev = field(&rest);
		field(&rest); /* root */
		m.point = field(&rest);
		opts = field(&rest);
		rest = dash + 3;
		m.type = field(&rest);
		m.source = field(&rest);
		if (!id || !dev || !m.point || !opts || !m.type || !m.source ||
		    strlen(dev) >= sizeof m.dev)
			continue;
		m.id = strtoull(id, NULL, 10);
		strcpy(m.dev, dev);
		m.rw = strncmp(opts, "rw", 2) == 0 && (opts[2] == 0 || opts[2] == ',');
		unescape((char *)m.point);
		unescape((char *)m.source);
		fn(&m, ctx);
	}
	free(line);
	fclose(f);
}

struct mount_at {
	const char *point, *type; /* what is looked for; type NULL: any */
	char *devno;              /* the device of the last one found */
	uint64_t id;              /* and its id */
	bool found;
};

static void mount_at_one(const struct zrfs_mount *m, void *ctx)
{
	struct mount_at *a = ctx;

	if (strcmp(m->point, a->point) == 0 && (!a->type || strcmp(m->type, a->type) == 0)) {
		memcpy(a->devno, m->dev, sizeof m->dev);
		a->id = m->id;
		a->found = true;
	}
}

bool zrfs_mount_at(const char *mountpoint, const char *type, char devno[32], uint64_t *id)
{
	char want[PATH_MAX];
	struct mount_at a = {want, type, devno, 0, false};

	if (!realpath(mountpoint, want))
		return false;
	zrfs_mounts_each(mount_at_one, &a);
	if (id)
		*id = a.id;
	return a.found;
}
