/*
 * manifest.c - a rebalance's commit point and its rolling forward
 * (rebalance.c has the whole story): rebalance.json, the new meta.json of
 * the next generation, written durably; at open, a pending manifest is
 * finished by a writer (its .offset.new tables renamed into place, meta.json
 * replaced, the manifest removed) or read as the state by a reader. Used
 * by store.c's open and by rebalance.c, and calls neither.
 */
#include "store_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int zr_new_table_name(char *buf, size_t cap, const char *field)
{
	return snprintf(buf, cap, "%s.offset.new", field);
}

/* Steps 2-4; idempotent, so a writer's open can repeat them after a crash. */
int zr_manifest_finish(int dirfd, int chunkdirfd, const char *dir, const zr_meta *m)
{
	char from[ZR_NAME_MAX + 16], to[ZR_NAME_MAX + 16];

	for (unsigned i = 0; i < m->nfields; i++) {
		zr_new_table_name(from, sizeof from, m->fields[i].name);
		snprintf(to, sizeof to, "%s.offset", m->fields[i].name);
		if (zr_sys.renameat(dirfd, from, dirfd, to) < 0 && errno != ENOENT)
			return zr_err(-errno, "%s/%s: rename failed: %s", dir, from, strerror(errno));
	}
	FORWARD_IF_ERR(zr_meta_write(dirfd, dir, m));
	(void)chunkdirfd; /* old chunks go with the writer's stale-chunk sweep */
	zr_sys.unlinkat(dirfd, MANIFEST, 0);
	return 0;
}

/* The committed manifest, if one is pending: 1 and @m filled, or 0. */
int zr_manifest_pending(int dirfd, const char *dir, uint64_t generation, zr_meta *m)
{
	struct stat st;
	int rc;

	if (fstatat(dirfd, MANIFEST, &st, 0) < 0)
		return 0;
	rc = zr_meta_read(dirfd, dir, MANIFEST, m);
	if (rc == -ENOENT)
		return 0; /* finished and removed since it was seen */
	FORWARD_IF_ERR(rc);
	if (m->generation == generation + 1)
		return 1;
	zr_meta_free(m); /* finished earlier; only its removal was lost */
	return 0;
}

int zr_manifest_write(zr_dataset *ds, const zr_meta *m)
{
	char *s = zr_meta_dump(m);
	int rc;

	RETURN_IF(!s, -ENOMEM, "out of memory");
	rc = zr_replace_durable(ds->dirfd, ds->path, MANIFEST ".tmp", MANIFEST, s, strlen(s));
	free(s);
	return rc;
}
