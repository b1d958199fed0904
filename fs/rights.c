/*
 * rights.c - what the caller of a request may do, where the kernel leaves
 * the checks to zrfs: without default_permissions (no allow_other: the
 * mounting user alone enters) the kernel asks the daemon for access(2) and
 * lets any SETATTR through, so the daemon applies a local filesystem's
 * rules itself: the mode bits for access(2), chown(2)'s for owners. With
 * allow_other the kernel checks both (default_permissions). Either way the
 * kernel leaves a write's dropping of set-ID bits to the daemon (libfuse
 * asks for FUSE_CAP_HANDLE_KILLPRIV and does not say which writer lacks
 * CAP_FSETID): zrfs_mode_after_write.
 */
#include "zrfs_i.h"

#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>

/* Whether the caller of @req is in group @gid, its own or a supplementary
 * one. */
static bool in_group(fuse_req_t req, gid_t gid)
{
	gid_t groups[64];
	int n;

	if (fuse_req_ctx(req)->gid == gid)
		return true;
	n = fuse_req_getgroups(req, (int)(sizeof groups / sizeof *groups), groups);
	for (int k = 0; k < n && k < (int)(sizeof groups / sizeof *groups); k++)
		if (groups[k] == gid)
			return true;
	return false;
}

int zrfs_may_access(fuse_req_t req, const struct stat *st, int mask)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	unsigned bits;

	/* root reads and writes anything, and runs what an x bit lets run */
	if (c->uid == 0)
		bits = S_ISDIR(st->st_mode) || (st->st_mode & 0111) ? 7 : 6;
	else if (st->st_uid == c->uid)
		bits = (st->st_mode >> 6) & 7;
	else if (in_group(req, st->st_gid))
		bits = (st->st_mode >> 3) & 7;
	else
		bits = st->st_mode & 7;
	return (unsigned)mask & 7 & ~bits ? -EACCES : 0;
}

bool zrfs_may_chown(fuse_req_t req, const struct stat *now, const struct stat *attr, int to_set)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	bool uid = (to_set & FUSE_SET_ATTR_UID) && attr->st_uid != now->st_uid;
	bool gid = (to_set & FUSE_SET_ATTR_GID) && attr->st_gid != now->st_gid;

	/* root gives anything to anyone, an owner its file to a group of its
	 * own; nothing else changes an owner or a group */
	return c->uid == 0 ||
	       (!uid && (!gid || (now->st_uid == c->uid && in_group(req, attr->st_gid))));
}

/* Whether the caller of @req has capability @cap in effect, as
 * /proc/PID/status says; if it cannot be read, whether it is root. */
static bool has_cap(fuse_req_t req, unsigned cap)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	unsigned long long eff = 0;
	char path[64], line[256];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%ld/status", (long)c->pid);
	if (c->pid > 0 && (f = fopen(path, "re"))) {
		while (!found && fgets(line, sizeof line, f))
			found = sscanf(line, "CapEff: %llx", &eff) == 1;
		fclose(f);
	}
	return found ? (eff >> cap & 1) != 0 : c->uid == 0;
}

mode_t zrfs_mode_after_write(fuse_req_t req, const struct stat *st)
{
	mode_t m = st->st_mode, drop = m & S_ISUID;

	/* set-group-ID with group execution, or of a group the writer is not
	 * in (setattr_should_drop_sgid) */
	if ((m & S_ISGID) && ((m & S_IXGRP) || !in_group(req, st->st_gid)))
		drop |= S_ISGID;
	if (!drop || !S_ISREG(m) || has_cap(req, CAP_FSETID))
		return m;
	return m & ~drop;
}
