/*
 * Description: log lines about requests (fs/log.c): a name is escaped so
 * that it cannot forge a line; lines any user can cause reach the log at
 * most ZRFS_LOG_BURST a second, the line saying the next are left out and
 * the one counting them included, and a few a second all do.
 */
#include "fs_fixture.h"

#include <time.h>

TestSuite(log);

/* The lines logged, by the second of the monotonic clock they came in. */
#define SECONDS 8
static struct {
	time_t first;
	unsigned per_second[SECONDS];
	unsigned notices, counts;
} seen;

static void count_line(enum fuse_log_level level, const char *fmt, va_list ap)
{
	struct timespec now;

	(void)level, (void)ap;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (!seen.first)
		seen.first = now.tv_sec;
	if (now.tv_sec - seen.first < SECONDS)
		seen.per_second[now.tv_sec - seen.first]++;
	seen.notices += strstr(fmt, "the next are left out") != NULL;
	seen.counts += strstr(fmt, "were left out") != NULL;
}

Test(log, a_name_cannot_forge_a_line)
{
	char buf[ZRFS_LOG_NAME_MAX];

	cr_assert_str_eq(zrfs_log_name("a\nzrfs: forged\\x", buf, sizeof buf),
			 "a\\x0azrfs: forged\\x5cx");
}

Test(log, lines_users_cause_are_at_most_ten_a_second_all_told)
{
	struct timespec start, now;
	unsigned admitted = 0;

	fuse_set_log_func(count_line);
	clock_gettime(CLOCK_MONOTONIC, &start);
	/* a flood for two seconds and more: whole seconds of it */
	do {
		if (zrfs_log_admit()) {
			admitted++;
			fuse_log(FUSE_LOG_ERR, "zrfs: a line\n");
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (now.tv_sec < start.tv_sec + 3);
	for (int k = 0; k < SECONDS; k++)
		cr_assert_leq(seen.per_second[k], ZRFS_LOG_BURST, "%u lines in second %d",
			      seen.per_second[k], k);
	cr_assert_geq(admitted, 2 * (ZRFS_LOG_BURST - 2), "lines go on being admitted");
	cr_assert_geq(seen.notices, 2, "each flooded second says the next are left out");
	cr_assert_geq(seen.counts, 2, "and the next second how many were");
}

Test(log, a_few_lines_a_second_all_reach_the_log)
{
	fuse_set_log_func(count_line);
	for (int k = 0; k < ZRFS_LOG_BURST - 1; k++)
		cr_assert(zrfs_log_admit(), "line %d of a quiet second left out", k);
	cr_assert_eq(seen.notices, 0);
}
