/*
 * transport.c - how requests reach the daemon and replies the kernel.
 *
 * By default libfuse's: a thread waiting for a request sleeps in read(2) of
 * /dev/fuse and the kernel wakes it. With -o poll_us=US (and -s: one thread
 * serves), the thread first polls the descriptor, without sleeping, for US
 * microseconds after each request: a program making many small requests in
 * a row (cp -r into a -o rw mount) then finds it awake. It costs a CPU
 * while requests come, and nothing once they stop.
 *
 * With -o uring, FUSE over io_uring: each request is served on the CPU that
 * made it.
 * Through /dev/fuse, a request wakes a daemon thread that slept in read(2),
 * wherever the scheduler put it, and the reply wakes the reader back: on a
 * machine whose idle CPUs halt, two cross-CPU wake-ups per request cost more
 * than serving it (BENCHMARKS.md). With the kernel's io_uring transport each
 * CPU has a queue; a request goes to the queue of the CPU its reader runs
 * on, and to a thread of ours that is pinned there, which commits the reply
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
 *   2. Each ring thread (zrfs_opts.uring_threads per CPU, pinned to it) has
 *      its own ring of 128-byte SQEs and registers one entry with the queue
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
 *      payload, and the ring thread submits COMMIT_AND_FETCH.
 * One entry per thread: a thread busy with a slow request (a cold read, a
 * request waiting for a commit) holds only its own entry, and the kernel
 * gives the next request of that CPU to another thread of the queue.
 *
 * Sections: the kernel's ABI, ring threads, hooks, start and stop.
 */
#include "zrfs_i.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/fuse.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* ---- the kernel's ABI (FUSE 7.42; Debian 12's linux/fuse.h is 7.38) ---- */

#define RING_OFFER (1u << (41 - 32)) /* FUSE_OVER_IO_URING, as a flags2 bit */
#define RING_AREA 128                /* the in_out and op_in areas */

enum { RING_CMD_REGISTER = 1, RING_CMD_COMMIT_AND_FETCH = 2 };

struct ring_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;  /* the request's unique id */
	uint32_t payload_sz; /* bytes of the payload, either way */
	uint32_t padding;
	uint64_t reserved;
};

struct ring_header {
	char in_out[RING_AREA]; /* fuse_in_header in, fuse_out_header out */
	char op_in[RING_AREA];  /* the opcode's fixed argument (in_args[0]) */
	struct ring_ent_in_out ent;
};

struct ring_cmd {               /* in the command area of an SQE128 */
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};

_Static_assert(sizeof(struct ring_header) == 288, "fuse_uring_req_header");
_Static_assert(sizeof(struct ring_cmd) == 24, "fuse_uring_cmd_req");
_Static_assert(offsetof(struct fuse_init_out, flags2) == 32, "fuse_init_out");

/* ---- ring threads ---- */

#define STOP_TAG UINT64_MAX
#define REQ_HEAD (sizeof(struct fuse_in_header) + RING_AREA)

struct ring_thread {
	struct zrfs_uring *u;
	unsigned qid;
	pthread_t thread;
	bool running;
	struct io_uring ring;
	struct ring_header hdr;   /* registered: iov[0] */
	char *payload;            /* registered: iov[1], u->payload_cap bytes */
	char *req;                /* a request put back together: REQ_HEAD + cap */
	atomic_uint_fast64_t unique; /* the request being served, 0 if none */
	bool self_replied;        /* this thread sent the reply (while serving) */
	sem_t replied;            /* another thread sent it */
};

struct zrfs_uring {
	struct fuse_session *se;
	int fd;                   /* the session's /dev/fuse */
	unsigned per_cpu, nthreads, poll_us;
	size_t payload_cap;
	int stop_fd;              /* an eventfd: readable when stopping */
	atomic_bool stopping;
	atomic_bool said_refused;
	uint64_t init_unique;     /* the INIT request, and whether it offered rings */
	bool offered;
	struct ring_thread *threads;
};

static _Thread_local struct ring_thread *serving; /* the ring thread we are */
_Thread_local bool zrfs_reply_from_maps;

static struct io_uring_sqe *ring_cmd(struct ring_thread *t, unsigned op, uint64_t commit_id)
{
	static struct iovec none;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&t->ring);

	if (!sqe)
		return NULL;
	memset(sqe, 0, 2 * sizeof *sqe); /* SQE128 */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = t->u->fd;
	sqe->cmd_op = op;
	if (op == RING_CMD_REGISTER) {
		/* the kernel copies the iovecs at submission */
		static _Thread_local struct iovec iov[2];
		iov[0] = (struct iovec){&t->hdr, sizeof t->hdr};
		iov[1] = (struct iovec){t->payload, t->u->payload_cap};
		sqe->addr = (uint64_t)(uintptr_t)iov;
		sqe->len = 2;
	} else {
		sqe->addr = (uint64_t)(uintptr_t)&none;
	}
	struct ring_cmd *c = (struct ring_cmd *)sqe->cmd;
	c->commit_id = commit_id;
	c->qid = (uint16_t)t->qid;
	sqe->user_data = t->qid;
	return sqe;
}

static void say_refused(struct zrfs_uring *u, int err)
{
	if (atomic_exchange(&u->said_refused, true))
		return;
	fuse_log(FUSE_LOG_WARNING,
		 "zrfs: -o uring: the kernel refused a ring (%s): requests are served through "
		 "/dev/fuse\n", strerror(err));
}

/* Reply EIO to a request that cannot be served as it came. */
static void reply_eio(struct ring_thread *t, uint64_t unique)
{
	struct fuse_out_header out = {.len = sizeof out, .error = -EIO, .unique = unique};

	memcpy(t->hdr.in_out, &out, sizeof out);
	t->hdr.ent.payload_sz = 0;
}

/* Serve the request in the entry; its reply is in the entry on return
 * (false: stopping, nothing to commit). */
static bool serve(struct ring_thread *t)
{
	struct zrfs_uring *u = t->u;
	struct fuse_in_header in;
	uint32_t psz = t->hdr.ent.payload_sz;
	size_t op;

	memcpy(&in, t->hdr.in_out, sizeof in);
	if (in.len < sizeof in + (uint64_t)psz || psz > u->payload_cap ||
	    (op = in.len - sizeof in - psz) > RING_AREA) {
		fuse_log(FUSE_LOG_ERR, "zrfs: -o uring: a request of %u bytes with a payload of "
			 "%u: answered EIO\n", in.len, psz);
		reply_eio(t, in.unique);
		return true;
	}
	char *at = t->req + REQ_HEAD - sizeof in - op;
	memcpy(at, &in, sizeof in);
	memcpy(at + sizeof in, t->hdr.op_in, op);
	memcpy(t->req + REQ_HEAD, t->payload, psz);
	t->self_replied = false;
	atomic_store(&t->unique, in.unique);
	serving = t;
	fuse_session_process_buf(u->se, &(struct fuse_buf){.size = in.len, .mem = at});
	serving = NULL;
	/* a request answered later by another thread (one waiting for a
	 * commit to be followed) holds this thread until then */
	while (!t->self_replied && sem_wait(&t->replied) < 0 && errno == EINTR)
		;
	atomic_store(&t->unique, 0);
	return !atomic_load(&u->stopping);
}

static void pin(unsigned cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	/* a CPU outside our allowed set (taskset, cgroups) leaves the thread
	 * free: its queue is still served, from elsewhere */
	pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static int ring_open(struct ring_thread *t)
{
	struct io_uring_params p = {.flags = IORING_SETUP_SQE128 | IORING_SETUP_SINGLE_ISSUER |
					     IORING_SETUP_DEFER_TASKRUN};
	int rc = io_uring_queue_init_params(4, &t->ring, &p);

	if (rc == -EINVAL) { /* before 6.1: no deferred task work */
		p = (struct io_uring_params){.flags = IORING_SETUP_SQE128};
		rc = io_uring_queue_init_params(4, &t->ring, &p);
	}
	return rc;
}

static void *ring_main(void *arg)
{
	struct ring_thread *t = arg;
	struct zrfs_uring *u = t->u;
	int rc;

	pin(t->qid);
	if ((rc = ring_open(t)) < 0) {
		say_refused(u, -rc);
		return NULL;
	}
	struct io_uring_sqe *sqe = io_uring_get_sqe(&t->ring);
	io_uring_prep_poll_add(sqe, u->stop_fd, POLLIN);
	io_uring_sqe_set_data64(sqe, STOP_TAG);
	ring_cmd(t, RING_CMD_REGISTER, 0);
	for (;;) {
		struct io_uring_cqe *cqe;
		rc = io_uring_submit_and_wait(&t->ring, 1);
		if (rc < 0 && rc != -EINTR)
			break;
		if (io_uring_peek_cqe(&t->ring, &cqe) < 0)
			continue;
		uint64_t tag = cqe->user_data;
		int res = cqe->res;
		io_uring_cqe_seen(&t->ring, cqe);
		if (tag == STOP_TAG || atomic_load(&u->stopping))
			break;
		if (res < 0) {
			/* ENOTCONN: unmounted; anything else, said once */
			if (res != -ENOTCONN && res != -ECANCELED)
				say_refused(u, -res);
			break;
		}
		uint64_t unique;
		memcpy(&unique, t->hdr.in_out + offsetof(struct fuse_in_header, unique),
		       sizeof unique);
		if (!serve(t))
			break;
		ring_cmd(t, RING_CMD_COMMIT_AND_FETCH, unique);
	}
	io_uring_queue_exit(&t->ring); /* cancels what the kernel holds */
	return NULL;
}

/* ---- hooks ---- */

static struct ring_thread *owner(struct zrfs_uring *u, uint64_t unique)
{
	if (serving && atomic_load(&serving->unique) == unique)
		return serving;
	for (unsigned i = 0; u->threads && i < u->nthreads; i++)
		if (atomic_load(&u->threads[i].unique) == unique)
			return &u->threads[i];
	return NULL;
}

/* The arguments of a reply into the payload: mapped chunk bytes with
 * process_vm_readv, which fails (EFAULT) where a chunk cut short under the
 * mount would make a plain copy raise SIGBUS. */
static bool copy_reply(char *to, const struct iovec *iov, int count, size_t total)
{
	if (zrfs_reply_from_maps) {
		struct iovec local = {to, total};
		return process_vm_readv(getpid(), &local, 1, iov, (unsigned long)count, 0) ==
		       (ssize_t)total;
	}
	for (int i = 0; i < count; i++) {
		memcpy(to, iov[i].iov_base, iov[i].iov_len);
		to += iov[i].iov_len;
	}
	return true;
}

static ssize_t commit_reply(struct ring_thread *t, struct iovec *iov, int count)
{
	struct fuse_out_header out;
	size_t total = 0;
	bool ok;

	memcpy(&out, iov[0].iov_base, sizeof out);
	for (int i = 1; i < count; i++)
		total += iov[i].iov_len;
	ok = total <= t->u->payload_cap && copy_reply(t->payload, iov + 1, count - 1, total);
	if (ok) {
		memcpy(t->hdr.in_out, &out, sizeof out);
		t->hdr.ent.payload_sz = (uint32_t)total;
	} else {
		reply_eio(t, out.unique); /* the reader gets EIO, as through writev */
	}
	if (t == serving)
		t->self_replied = true;
	else
		sem_post(&t->replied);
	if (!ok) {
		errno = EFAULT;
		return -1;
	}
	return out.len;
}

static void ring_start(struct zrfs_uring *u);

/* The INIT reply says we take the rings, if the kernel offered them. */
static ssize_t reply_init(struct zrfs_uring *u, int fd, struct iovec *iov, int count)
{
	struct fuse_init_out o;
	struct iovec with[2] = {iov[0], {&o, iov[1].iov_len}};
	long page = sysconf(_SC_PAGESIZE);
	ssize_t n;

	memcpy(&o, iov[1].iov_base, sizeof o);
	o.flags |= FUSE_INIT_EXT;
	o.flags2 |= RING_OFFER;
	/* what the kernel sizes a payload to (fuse_uring_create) */
	u->payload_cap = 8192;
	if (o.max_write > u->payload_cap)
		u->payload_cap = o.max_write;
	if ((size_t)o.max_pages * (size_t)page > u->payload_cap)
		u->payload_cap = (size_t)o.max_pages * (size_t)page;
	n = writev(fd, with, count);
	if (n >= 0)
		ring_start(u);
	return n;
}

static ssize_t hook_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct zrfs *fs = userdata;
	struct zrfs_uring *u = fs->uring;
	struct fuse_out_header *out = iov[0].iov_base;
	struct ring_thread *t;

	if (out->unique && (t = owner(u, out->unique)) != NULL)
		return commit_reply(t, iov, count);
	if (u->offered && out->unique == u->init_unique && out->error == 0 && count == 2 &&
	    iov[1].iov_len >= sizeof(struct fuse_init_out) && !u->threads)
		return reply_init(u, fd, iov, count);
	return writev(fd, iov, count);
}

static uint64_t now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000 + (uint64_t)t.tv_nsec / 1000;
}

/* With -o poll_us=US (and -s), a thread polls /dev/fuse this long after
 * each request before it sleeps: neither side pays a sleep and a wake-up
 * per request while they come in a row. */
static ssize_t polling_read(int fd, void *buf, size_t len, unsigned poll_us)
{
	uint64_t until = now_us() + poll_us;

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

static ssize_t hook_read(int fd, void *buf, size_t len, void *userdata)
{
	struct zrfs *fs = userdata;
	struct zrfs_uring *u = fs->uring;
	ssize_t n = u->poll_us ? polling_read(fd, buf, len, u->poll_us) : read(fd, buf, len);
	const struct fuse_in_header *in = buf;

	if (n >= (ssize_t)(sizeof *in + sizeof(struct fuse_init_in)) && in->opcode == FUSE_INIT &&
	    fs->opts.uring) {
		const struct fuse_init_in *init = (const void *)(in + 1);
		u->init_unique = in->unique;
		u->offered = (init->flags & FUSE_INIT_EXT) && (init->flags2 & RING_OFFER);
		if (!u->offered)
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
	long page = sysconf(_SC_PAGESIZE);

	if (ncpu < 1 || ncpu > 4096)
		return;
	u->nthreads = (unsigned)ncpu * u->per_cpu;
	struct ring_thread *ts = calloc(u->nthreads, sizeof *ts);
	if (!ts)
		goto fail;
	for (unsigned i = 0; i < u->nthreads; i++) {
		struct ring_thread *t = &ts[i];
		t->u = u;
		t->qid = i / u->per_cpu;
		sem_init(&t->replied, 0, 0);
		if (posix_memalign((void **)&t->payload, (size_t)page, u->payload_cap) ||
		    !(t->req = malloc(REQ_HEAD + u->payload_cap)))
			goto fail;
	}
	u->threads = ts;
	for (unsigned i = 0; i < u->nthreads; i++)
		ts[i].running = pthread_create(&ts[i].thread, NULL, ring_main, &ts[i]) == 0;
	return;
fail:
	u->nthreads = 0;
	if (ts) {
		for (unsigned i = 0; i < (unsigned)ncpu * u->per_cpu; i++) {
			free(ts[i].payload);
			free(ts[i].req);
		}
		free(ts);
	}
	say_refused(u, ENOMEM);
}

int zrfs_transport_start(struct zrfs *fs, struct fuse_session *se)
{
	static const struct fuse_custom_io io = {.read = hook_read, .writev = hook_writev};
	struct zrfs_uring *u;
	int fd = fuse_session_fd(se);

	if (!fs->opts.uring && !fs->opts.poll_us)
		return 0;
	u = calloc(1, sizeof *u);
	if (!u)
		return -ENOMEM;
	u->se = se;
	u->fd = fd;
	u->per_cpu = fs->opts.uring_threads;
	u->poll_us = fs->opts.poll_us;
	u->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (u->stop_fd < 0) {
		free(u);
		return -errno;
	}
	if (u->poll_us) {
		int fl = fcntl(fd, F_GETFL);
		if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
			close(u->stop_fd);
			free(u);
			return -errno;
		}
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
	for (unsigned i = 0; u->threads && i < u->nthreads; i++) {
		sem_post(&u->threads[i].replied);
		if (u->threads[i].running)
			pthread_join(u->threads[i].thread, NULL);
	}
}

void zrfs_transport_destroy(struct zrfs *fs)
{
	struct zrfs_uring *u = fs->uring;

	if (!u)
		return;
	zrfs_transport_stop(fs);
	for (unsigned i = 0; u->threads && i < u->nthreads; i++) {
		sem_destroy(&u->threads[i].replied);
		free(u->threads[i].payload);
		free(u->threads[i].req);
	}
	free(u->threads);
	close(u->stop_fd);
	free(u);
	fs->uring = NULL;
}
