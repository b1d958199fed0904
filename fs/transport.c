/*
 * transport.c - how requests reach the daemon. By default libfuse's: a
 * thread waiting for a request sleeps in read(2) of /dev/fuse and the
 * kernel wakes it. With -o poll_us=US (and -s: one thread serves), the
 * thread first polls the descriptor, without sleeping, for US microseconds
 * after each request: a program making many small requests in a row (cp -r
 * into a -o rw mount) then finds it awake, and neither side pays for a
 * sleep and a wake-up per request. It costs a CPU while requests come, and
 * nothing once they stop.
 *
 * Sections: polling.
 */
#include "zrfs_i.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* ---- polling ---- */

static uint64_t now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000 + (uint64_t)t.tv_nsec / 1000;
}

static unsigned poll_us; /* one session per process */

static ssize_t polling_read(int fd, void *buf, size_t len, void *userdata)
{
	uint64_t until = now_us() + poll_us;

	(void)userdata;
	for (;;) {
		ssize_t n = read(fd, buf, len);
		if (n >= 0 || errno != EAGAIN)
			return n; /* a request, or what libfuse handles (ENODEV: unmounted) */
		if (now_us() >= until) { /* quiet: sleep until the next one */
			struct pollfd p = {.fd = fd, .events = POLLIN};
			if (poll(&p, 1, -1) < 0 && errno != EINTR)
				return -1;
			until = now_us() + poll_us;
		}
	}
}

static ssize_t plain_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	(void)userdata;
	return writev(fd, iov, count);
}

int zrfs_transport_poll(struct zrfs *fs, struct fuse_session *se)
{
	static const struct fuse_custom_io io = {.read = polling_read, .writev = plain_writev};
	int fd = fuse_session_fd(se);
	int fl = fcntl(fd, F_GETFL);

	poll_us = fs->opts.poll_us;
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return fuse_session_custom_io(se, &io, fd) < 0 ? -EIO : 0;
}
