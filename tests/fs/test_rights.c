/*
 * Description: what the caller of a request may do where the kernel
 * leaves the checks to zrfs (fs/rights.c), as a local filesystem rules:
 * access(2) by the mode bits (root: anything but running a file no x bit
 * lets run), chown(2) (root anything, an owner its file to a group of its
 * own, nothing else).
 */
#include "fs_fixture.h"

static int as(uid_t uid, gid_t gid)
{
	t_ctx.uid = uid;
	t_ctx.gid = gid;
	return 0;
}

Test(rights, access_follows_the_mode_bits)
{
	struct stat f = {.st_mode = S_IFREG | 0640, .st_uid = 1000, .st_gid = 100};
	struct stat d = {.st_mode = S_IFDIR | 0750, .st_uid = 1000, .st_gid = 100};

	as(0, 0);
	cr_assert_eq(zrfs_may_access(NULL, &f, R_OK | W_OK), 0);
	cr_assert_eq(zrfs_may_access(NULL, &f, X_OK), -EACCES, "root runs what no x bit lets run");
	cr_assert_eq(zrfs_may_access(NULL, &d, X_OK | W_OK), 0);
	f.st_mode = S_IFREG | 0001;
	cr_assert_eq(zrfs_may_access(NULL, &f, X_OK), 0, "any x bit lets root run it");
	f.st_mode = S_IFREG | 0640;
	as(1000, 5);
	cr_assert_eq(zrfs_may_access(NULL, &f, R_OK | W_OK), 0, "the owner's bits");
	cr_assert_eq(zrfs_may_access(NULL, &f, X_OK), -EACCES);
	as(2000, 100);
	cr_assert_eq(zrfs_may_access(NULL, &f, R_OK), 0, "the group's bits");
	cr_assert_eq(zrfs_may_access(NULL, &f, W_OK), -EACCES);
	cr_assert_eq(zrfs_may_access(NULL, &d, R_OK | X_OK), 0);
	as(2000, 5);
	cr_assert_eq(zrfs_may_access(NULL, &f, R_OK), -EACCES, "the others' bits: none");
	cr_assert_eq(zrfs_may_access(NULL, &d, X_OK), -EACCES);
	cr_assert_eq(zrfs_may_access(NULL, &f, F_OK), 0, "it is there");
}

Test(rights, chown_as_a_local_filesystem_allows_it)
{
	struct stat now = {.st_uid = 1000, .st_gid = 100}, to = now;
	int both = FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID;

	as(0, 0);
	to.st_uid = 2000, to.st_gid = 200;
	cr_assert(zrfs_may_chown(NULL, &now, &to, both), "root");
	as(1000, 300);
	cr_assert_not(zrfs_may_chown(NULL, &now, &to, both), "the owner gives its file away");
	cr_assert_not(zrfs_may_chown(NULL, &now, &to, FUSE_SET_ATTR_GID), "a group not its own");
	to.st_gid = 300;
	cr_assert(zrfs_may_chown(NULL, &now, &to, FUSE_SET_ATTR_GID), "its own group");
	to.st_uid = 1000;
	cr_assert(zrfs_may_chown(NULL, &now, &to, both), "the same owner, its own group");
	as(1001, 300);
	cr_assert_not(zrfs_may_chown(NULL, &now, &to, FUSE_SET_ATTR_GID), "not the owner");
	to.st_gid = 100;
	cr_assert(zrfs_may_chown(NULL, &now, &to, both), "nothing changes (chown -1 -1)");
}

Test(rights, a_write_drops_set_id_bits_as_a_local_filesystem)
{
	struct stat f = {.st_mode = S_IFREG | 06755, .st_uid = 1000, .st_gid = 100};
	struct stat d = {.st_mode = S_IFDIR | 02755, .st_uid = 1000, .st_gid = 100};

	t_ctx.pid = 0; /* no process to ask for its capabilities: root has them */
	as(0, 0);
	cr_assert_eq(zrfs_mode_after_write(NULL, &f), f.st_mode, "root keeps both");
	as(1000, 100);
	cr_assert_eq(zrfs_mode_after_write(NULL, &f), S_IFREG | 0755,
		     "set-group-ID with group execution goes, even for a member");
	f.st_mode = S_IFREG | 02644;
	cr_assert_eq(zrfs_mode_after_write(NULL, &f), f.st_mode,
		     "without group execution it stays for a member of the group");
	as(1000, 5);
	cr_assert_eq(zrfs_mode_after_write(NULL, &f), S_IFREG | 0644, "and goes for another");
	f.st_mode = S_IFREG | 0755;
	cr_assert_eq(zrfs_mode_after_write(NULL, &f), f.st_mode, "nothing to drop");
	cr_assert_eq(zrfs_mode_after_write(NULL, &d), d.st_mode, "a directory keeps its bits");
}
