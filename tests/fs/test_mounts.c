/*
 * Description: the mounts zrfs finds in /proc/self/mountinfo (fs/mounts.c):
 * each one listed, with its point and source as the kernel has them (the
 * kernel writes a space, tab or backslash in them as \ooo), its type and
 * whether it is read-write. Mounting needs root: those cases skip without.
 */
#include "fs_fixture.h"

#include <stdlib.h>
#include <sys/mount.h>

struct look {
	const char *point;
	int seen;
	bool rw;
	char type[64], source[256];
};

static void look_one(const struct zrfs_mount *m, void *ctx)
{
	struct look *l = ctx;

	if (strcmp(m->point, l->point) != 0)
		return;
	l->seen++;
	l->rw = m->rw;
	snprintf(l->type, sizeof l->type, "%s", m->type);
	snprintf(l->source, sizeof l->source, "%s", m->source);
}

Test(mounts, the_root_is_listed)
{
	struct look l = {.point = "/"};

	zrfs_mounts_each(look_one, &l);
	cr_assert_geq(l.seen, 1);
	cr_assert_neq(l.type[0], 0);
}

static char odd[] = "/tmp/zrfs mounts\t\\ XXXXXX";
static bool mounted;

static void unmount_odd(void)
{
	if (mounted)
		umount2(odd, MNT_DETACH);
	rmdir(odd);
}

Test(mounts, escaped_names_and_read_only, .fini = unmount_odd)
{
	if (geteuid() != 0)
		cr_skip_test("mounting needs root");
	cr_assert_not_null(mkdtemp(odd));
	cr_assert_eq(mount("src with space", odd, "tmpfs", 0, "size=1M"), 0, "%s",
		     strerror(errno));
	mounted = true;
	struct look l = {.point = odd};
	zrfs_mounts_each(look_one, &l);
	cr_assert_eq(l.seen, 1, "'%s' listed %d times", odd, l.seen);
	cr_assert_str_eq(l.type, "tmpfs");
	cr_assert_str_eq(l.source, "src with space");
	cr_assert(l.rw);
	cr_assert_eq(mount(NULL, odd, NULL, MS_REMOUNT | MS_RDONLY, NULL), 0, "%s",
		     strerror(errno));
	l.seen = 0;
	zrfs_mounts_each(look_one, &l);
	cr_assert_eq(l.seen, 1);
	cr_assert_not(l.rw, "a read-only mount listed read-write");
}
