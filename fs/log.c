/*
 * log.c - log lines about what a user asked for.
 *
 * A name comes from whoever makes the request: it is logged escaped (a
 * byte outside printable ASCII, or a backslash, as \xNN), so that a name
 * holding a newline cannot forge a line of the log. Lines any user can
 * cause by asking (a bad spec under /.batches looked up in a loop, a
 * damaged record read again, a killed writer's files, a refused value)
 * are admitted so that at most ZRFS_LOG_BURST lines a second reach the
 * log, these two included: the first line left out says so, and the next
 * second's first line says how many were.
 */
#include "zrfs_i.h"

#include <stdio.h>
#include <time.h>

const char *zrfs_log_name(const char *name, char *buf, size_t cap)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = 0;

	for (const unsigned char *p = (const unsigned char *)name; *p && n + 5 < cap; p++) {
		if (*p >= 0x20 && *p < 0x7f && *p != '\\') {
			buf[n++] = (char)*p;
		} else {
			buf[n++] = '\\';
			buf[n++] = 'x';
			buf[n++] = hex[*p >> 4];
			buf[n++] = hex[*p & 15];
		}
	}
	buf[n] = 0;
	return buf;
}

static pthread_mutex_t admit_lock = PTHREAD_MUTEX_INITIALIZER;
static time_t admit_second;
static unsigned admitted;
static unsigned long long left_out;

bool zrfs_log_admit(void)
{
	struct timespec now;
	unsigned long long told = 0;
	bool ok, first_out = false;

	clock_gettime(CLOCK_MONOTONIC, &now);
	pthread_mutex_lock(&admit_lock);
	if (now.tv_sec != admit_second) {
		admit_second = now.tv_sec;
		admitted = 0;
	}
	/* the last line of a second is kept for saying the next are left out,
	 * and a count of those left out takes one of the next second's */
	ok = admitted + (left_out ? 1 : 0) < ZRFS_LOG_BURST - 1;
	if (ok) {
		told = left_out;
		admitted += told ? 2 : 1;
		left_out = 0;
	} else if ((first_out = left_out++ == 0)) {
		admitted++;
	}
	pthread_mutex_unlock(&admit_lock);
	if (first_out)
		fuse_log(FUSE_LOG_ERR, "zrfs: more than %d lines a second about requests: the "
			 "next are left out (and counted)\n", ZRFS_LOG_BURST);
	if (told)
		fuse_log(FUSE_LOG_ERR, "zrfs: %llu lines about requests were left out\n", told);
	return ok;
}
