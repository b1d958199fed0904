/*
 * transport.c - how requests reach the daemon and replies the kernel.
 *
 * By default libfuse's: a thread waiting for a request sleeps in read(2) of
 * /dev/fuse and the kernel wakes it. With -o poll_us=US, one serving thread
 * at a time first looks for the next request, without sleeping, for US
 * microseconds after each request, yielding its CPU to any other runnable
 * task between looks: a program making many small requests in a row then
 * finds it awake. It costs CPU time while requests come (none that another
 * task wanted), and nothing once they stop.
 *
 * With -o uring, FUSE over io_uring: each request is served on the CPU that
 * made it. Through /dev/fuse, a request wakes a daemon thread that slept in read(2),
 * wherever the scheduler put it, and the reply wakes the reader back: on a
 * machine whose idle CPUs halt, two cross-CPU wake-ups per request cost more
 * than serving it (BENCHMARKS.md). With the kernel's io_uring transport each
 * CPU has a queue; a request goes to the queue of the CPU its reader runs
 * on, and to a thread of ours bound to that CPU, which commits the reply
 * and fetches the next request in one io_uring_enter(2).
 *
 * libfuse 3.14 predates that transport, so it is spliced in underneath:
 * libfuse still parses requests (fuse_session_process_buf) and builds
 * replies; its custom-I/O hooks (fuse_session_custom_io) see every reply,
 * and a reply whose request came through a ring goes back through it.
 * The steps, as the kernel wants them (Documentation/filesystems/
 * fuse-io-uring.rst, fs/fuse/dev_uring.c):
 *   1. INIT comes through /dev/fuse. If the kernel offers the transport
 *      (flags2 of the request: the module parameter enable_uring is Y), the
 *      reply says we take it, and once the kernel has that reply the ring
 *      threads start.
 *   2. Each ring thread (zrfs_opts.uring_threads per CPU, bound to it) has
 *      its own ring of 128-byte SQEs and registers an entry with the queue
 *      of its CPU: a header buffer and a payload buffer. When every CPU's
 *      queue has an entry the kernel sends requests through the queues; until
 *      then, and always for FORGET, INTERRUPT and notifications, /dev/fuse
 *      carries them, served as before.
 *   3. A request arrives as a completion: the fuse_in_header and the
 *      opcode's fixed argument in the header buffer, the rest in the payload.
 *      It is put back together as /dev/fuse would have delivered it, in a
 *      buffer of the thread's own (so a handler may read its request after
 *      it replied), and handed to libfuse.
 *   4. The reply, from whichever thread sends it, is found by its unique
 *      id: its header goes to the header buffer, its arguments to the
 *      payload, and the thread whose ring registered the entry submits
 *      COMMIT_AND_FETCH (at once if it sent the reply; else told through an
 *      eventfd).
 * After each request a ring thread looks for the next one for poll_us (50
 * by default) before it sleeps, yielding its CPU meanwhile: the reader its
 * reply woke runs, often on the other CPU, and the next request of either
 * CPU finds its thread awake (BENCHMARKS.md).
 * A thread busy with a slow request (a cold read) holds only its entry, and
 * the kernel gives the next request of that CPU to another thread of the
 * queue. A request answered later by another thread (a flush waiting for
 * its commit to be shown) holds its entry but not its thread, which
 * registers a fresh entry if it has none left with the kernel: a CPU's
 * queue is never left without a thread to serve it (the request the
 * following thread waits for may be queued there).
 *
 * Where the time goes, and why this is an option rather than the default:
 * BENCHMARKS.md, "FUSE over io_uring".
 *
 * The ABI and the ring threads' state are transport_i.h's, the threads
 * ring.c's.
 *
 * Sections: hooks, start and stop.
 */
#include "transport_i.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/fuse.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* ---- hooks ---- */

static struct ring_ent *ring_ent_of(struct zrfs_uring *u, uint64_t unique)
{
	if (zrfs_ring_serving && atomic_load(&zrfs_ring_serving->unique) == unique)
		return zrfs_ring_serving;
	unsigned n = atomic_load(&u->nents);
	for (unsigned i = 0; u->ents && i < n; i++) {
		struct ring_ent *e = atomic_load_explicit(&u->ents[i], memory_order_acquire);
		if (e && atomic_load(&e->unique) == unique)
			return e;
	}
	return NULL;
}

/* The arguments of a reply into the payload. Mapped chunk bytes are read
 * from their file (libfuse's fuse_buf_copy: pread, a page-cache copy; a
 * chunk cut short under the mount ends it short, where a copy from the
 * mapping would raise SIGBUS); the rest is copied. */
static bool copy_reply(char *to, const struct iovec *iov, int count, size_t total)
{
	struct fuse_bufvec *bv = zrfs_reply_mapped;

	if (bv && bv->count == (size_t)count) {
		struct fuse_bufvec dst = FUSE_BUFVEC_INIT(total);
		dst.buf[0].mem = to;
		bv->idx = 0;
		bv->off = 0;
		return fuse_buf_copy(&dst, bv, 0) == (ssize_t)total;
	}
	for (int i = 0; i < count; i++) {
		memcpy(to, iov[i].iov_base, iov[i].iov_len);
		to += iov[i].iov_len;
	}
	return true;
}

static ssize_t commit_reply(struct ring_ent *e, struct iovec *iov, int count)
{
	struct ring_thread *t = e->t;
	struct fuse_out_header out;
	size_t total = 0;
	bool ok;

	memcpy(&out, iov[0].iov_base, sizeof out);
	for (int i = 1; i < count; i++)
		total += iov[i].iov_len;
	ok = total <= t->u->payload_cap && copy_reply(e->payload, iov + 1, count - 1, total);
	if (ok) {
		memcpy(e->hdr.in_out, &out, sizeof out);
		e->hdr.ent.payload_sz = (uint32_t)total;
	} else {
		zrfs_ring_reply_eio(e, out.unique); /* the reader gets EIO, as through writev */
	}
	if (e == zrfs_ring_serving) {
		e->self_replied = true;
	} else {
		pthread_mutex_lock(&t->done_lock);
		e->next_done = t->done;
		t->done = e;
		pthread_mutex_unlock(&t->done_lock);
		eventfd_write(t->wake_fd, 1);
	}
	if (!ok) {
		errno = EFAULT;
		return -1;
	}
	return out.len;
}

static void ring_start(struct zrfs_uring *u);

/* The INIT reply, as libfuse made it, with what libfuse 3.14 cannot say:
 * that lookups and listings of one directory may run in parallel (its
 * FUSE_CAP_PARALLEL_DIROPS never reaches the kernel, which then takes a
 * mutex of the directory around each: readers of one field's files queue
 * there, BENCHMARKS.md), that a writable mount's direct_io files may be
 * mapped shared (libfuse 3.14 has no FUSE_CAP_DIRECT_IO_ALLOW_MMAP), and
 * that we take the rings, if the kernel offered them. */
static ssize_t reply_init(struct zrfs_uring *u, int fd, struct iovec *iov, int count)
{
	struct fuse_init_out o;
	struct iovec with[2] = {iov[0], {&o, iov[1].iov_len}};
	long page = sysconf(_SC_PAGESIZE);
	ssize_t n;

	memcpy(&o, iov[1].iov_base, sizeof o);
	u->init_unique = 0; /* one INIT */
	if (u->parallel_dirops)
		o.flags |= FUSE_PARALLEL_DIROPS;
	if (u->shared_mmap) {
		o.flags |= FUSE_INIT_EXT;
		o.flags2 |= MMAP_OFFER;
	}
	if (u->offered) {
		o.flags |= FUSE_INIT_EXT;
		o.flags2 |= RING_OFFER;
		/* what the kernel sizes a payload to (fuse_uring_create) */
		u->payload_cap = 8192;
		if (o.max_write > u->payload_cap)
			u->payload_cap = o.max_write;
		if ((size_t)o.max_pages * (size_t)page > u->payload_cap)
			u->payload_cap = (size_t)o.max_pages * (size_t)page;
	}
	n = writev(fd, with, count);
	if (n >= 0 && u->offered)
		ring_start(u);
	return n;
}

static ssize_t hook_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct zrfs *fs = userdata;
	struct zrfs_uring *u = fs->uring;
	struct fuse_out_header *out = iov[0].iov_base;
	struct ring_ent *e;

	if (out->unique && (e = ring_ent_of(u, out->unique)) != NULL)
		return commit_reply(e, iov, count);
	if (u->init_unique && out->unique == u->init_unique && out->error == 0 && count == 2 &&
	    iov[1].iov_len >= sizeof(struct fuse_init_out) && !u->threads)
		return reply_init(u, fd, iov, count);
	return writev(fd, iov, count);
}

/* With -o poll_us=US, one zrfs_ring_serving thread at a time polls /dev/fuse this
 * long after its request before it sleeps in read(2): while requests come
 * in a row, neither side pays a sleep and a cross-CPU wake-up for each.
 * It yields between looks, so a runnable program on its CPU (the reader
 * whose next request it waits for) runs first. The descriptor stays
 * blocking: the other threads sleep in read(2), and the kernel wakes one
 * of them, not all, for a request the poller cannot take. */
static ssize_t polling_read(struct zrfs_uring *u, int fd, void *buf, size_t len)
{
	if (!atomic_exchange(&u->polling, true)) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		uint64_t until = zrfs_now_us() + u->dev_poll_us;
		while (poll(&p, 1, 0) == 0 && zrfs_now_us() < until)
			sched_yield();
		atomic_store(&u->polling, false);
	}
	return read(fd, buf, len);
}

static ssize_t hook_read(int fd, void *buf, size_t len, void *userdata)
{
	struct zrfs *fs = userdata;
	struct zrfs_uring *u = fs->uring;
	ssize_t n = u->dev_poll_us ? polling_read(u, fd, buf, len) : read(fd, buf, len);
	const struct fuse_in_header *in = buf;

	/* The kernel ends the connection at an unmount, and a request it had
	 * begun to hand over is then ended with ECONNABORTED, not ENODEV (its
	 * RELEASEs, when a program dies with many files open): the unmount
	 * it is, not a failure (libfuse 3.14 exits 1 on any other errno) */
	if (n < 0 && errno == ECONNABORTED)
		errno = ENODEV;
	if (n >= (ssize_t)(sizeof *in + sizeof(struct fuse_init_in)) && in->opcode == FUSE_INIT) {
		const struct fuse_init_in *init = (const void *)(in + 1);
		u->init_unique = in->unique;
		u->parallel_dirops = (init->flags & FUSE_PARALLEL_DIROPS) != 0;
		/* a writable mount's files are direct_io (their readers must see
		 * each write): a shared map of one (sqlite's WAL index) is ENODEV
		 * unless we say the kernel may map them through its page cache */
		u->shared_mmap = fs->writes && (init->flags & FUSE_INIT_EXT) &&
				 (init->flags2 & MMAP_OFFER);
		u->offered = fs->opts.uring && (init->flags & FUSE_INIT_EXT) &&
			     (init->flags2 & RING_OFFER);
		if (fs->opts.uring && !u->offered)
			fuse_log(FUSE_LOG_WARNING,
				 "zrfs: -o uring: this kernel does not offer FUSE over io_uring (it "
				 "needs Linux 6.14 or later and, as root, echo Y > "
				 "/sys/module/fuse/parameters/enable_uring): requests are served "
				 "through /dev/fuse\n");
	}
	return n;
}

/* ---- start and stop ---- */

static void ring_start(struct zrfs_uring *u)
{
	long ncpu = sysconf(_SC_NPROCESSORS_CONF); /* the kernel has a queue per possible CPU */
	struct ring_thread *ts;

	if (ncpu < 1 || ncpu > 4096)
		return;
	ts = calloc((size_t)ncpu * u->per_cpu, sizeof *ts);
	u->ents = calloc(MAX_ENTRIES, sizeof *u->ents);
	if (!ts || !u->ents) {
		free(ts);
		zrfs_ring_say_refused(u, ENOMEM);
		return;
	}
	u->threads = ts;
	for (unsigned i = 0; i < (unsigned)ncpu * u->per_cpu; i++) {
		struct ring_thread *t = &ts[i];
		t->u = u;
		t->qid = i / u->per_cpu;
		pthread_mutex_init(&t->done_lock, NULL);
		t->wake_fd = eventfd(0, EFD_CLOEXEC);
		t->req = malloc(REQ_HEAD + u->payload_cap);
		u->nthreads = i + 1;
		if (t->wake_fd < 0 || !t->req) {
			zrfs_ring_say_refused(u, ENOMEM);
			break;
		}
		t->running = zrfs_thread_start(&t->thread, zrfs_ring_main, t) == 0;
	}
}

int zrfs_transport_start(struct zrfs *fs, struct fuse_session *se)
{
	static const struct fuse_custom_io io = {.read = hook_read, .writev = hook_writev};
	struct zrfs_uring *u;
	int fd = fuse_session_fd(se);

	bool dflt = fs->opts.poll_us == ZRFS_POLL_DEFAULT;

	/* the hooks are always there: the INIT reply needs them (reply_init) */
	u = calloc(1, sizeof *u);
	if (!u)
		return -ENOMEM;
	u->se = se;
	u->fd = fd;
	u->per_cpu = fs->opts.uring_threads;
	u->dev_poll_us = dflt ? 0 : fs->opts.poll_us;
	u->ring_poll_us = dflt ? ZRFS_RING_POLL_US : fs->opts.poll_us;
	u->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (u->stop_fd < 0) {
		free(u);
		return -errno;
	}
	fs->uring = u;
	if (fuse_session_custom_io(se, &io, fd) < 0) {
		zrfs_transport_destroy(fs);
		return -EIO;
	}
	return 0;
}

void zrfs_transport_stop(struct zrfs *fs)
{
	struct zrfs_uring *u = fs->uring;

	if (!u || atomic_exchange(&u->stopping, true))
		return;
	eventfd_write(u->stop_fd, 1);
	for (unsigned i = 0; u->threads && i < u->nthreads; i++)
		if (u->threads[i].running)
			pthread_join(u->threads[i].thread, NULL);
}

void zrfs_transport_destroy(struct zrfs *fs)
{
	struct zrfs_uring *u = fs->uring;

	if (!u)
		return;
	zrfs_transport_stop(fs);
	for (unsigned i = 0; u->ents && i < atomic_load(&u->nents); i++) {
		struct ring_ent *e = atomic_load(&u->ents[i]);
		munmap(e->payload, u->payload_cap);
		free(e);
	}
	for (unsigned i = 0; u->threads && i < u->nthreads; i++) {
		struct ring_thread *t = &u->threads[i];
		if (t->wake_fd >= 0)
			close(t->wake_fd);
		pthread_mutex_destroy(&t->done_lock);
		free(t->req);
	}
	free(u->ents);
	free(u->threads);
	close(u->stop_fd);
	free(u);
	fs->uring = NULL;
}
