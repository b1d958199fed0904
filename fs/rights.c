/*
 * rights.c - what the caller of a request may do, where the kernel leaves
 * the checks to zrfs: without default_permissions (no allow_other: the
 * mounting user alone enters) the kernel asks the daemon for access(2) and
 * lets any SETATTR through, so the daemon applies a local filesystem's
 * rules itself: the mode bits for access(2), chown(2)'s for owners. With
 * allow_other the kernel checks both (default_permissions).
 */
#include "zrfs_i.h"

#include <errno.h>

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
