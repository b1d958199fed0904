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
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
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

#define STOP_TAG 1 /* user_data of the stop and wake reads; entries are pointers */
#define WAKE_TAG 2
#define REQ_HEAD ZRFS_RING_HEAD
_Static_assert(ZRFS_RING_HEAD == sizeof(struct fuse_in_header) + RING_AREA, "ZRFS_RING_HEAD");
#define MAX_ENTRIES 65536 /* all threads' entries; beyond, a deferred request holds its thread */

/* An entry: a request's buffers, registered with a queue by one thread's
 * ring. One per thread to begin with; a request answered later by another
 * thread (one waiting for a commit to be followed) keeps its entry until
 * then, and its thread registers another if it has none left with the
 * kernel, so it keeps serving its CPU. */
struct ring_ent {
	struct ring_thread *t;       /* whose ring registered it */
	struct ring_header hdr;      /* registered: iov[0] */
	char *payload;               /* registered: iov[1], u->payload_cap bytes */
	struct iovec iov[2];
	atomic_uint_fast64_t unique; /* the request it holds until answered; 0: none */
	bool self_replied;           /* answered by its thread while serving it */
	struct ring_ent *next_done;  /* on t->done */
};

struct ring_thread {
	struct zrfs_uring *u;
	unsigned qid;
	pthread_t thread;
	bool running;
	struct io_uring ring;
	unsigned with_kernel;        /* entries waiting for a request */
	int wake_fd;                 /* an eventfd: answers on done to commit */
	uint64_t wake_buf;
	pthread_mutex_t done_lock;   /* protects done */
	struct ring_ent *done;       /* answered by other threads, to commit */
	char *req;                   /* a request put back together: REQ_HEAD + cap */
};

struct zrfs_uring {
	struct fuse_session *se;
	int fd;                      /* the session's /dev/fuse */
	unsigned per_cpu, nthreads;
	unsigned dev_poll_us, ring_poll_us; /* -o poll_us, for each transport */
	size_t payload_cap;
	int stop_fd;                 /* an eventfd: readable when stopping */
	atomic_bool stopping;
	atomic_bool said_refused;
	atomic_bool polling;          /* a thread polls /dev/fuse (poll_us) */
	uint64_t init_unique;        /* the INIT request, and whether it offered rings */
	bool offered;
	struct ring_thread *threads;
	struct ring_ent **ents;      /* every entry, never moved or freed while serving */
	atomic_uint nents;
};

static _Thread_local struct ring_ent *serving; /* the entry this thread serves */
_Thread_local struct fuse_bufvec *zrfs_reply_mapped;

static void say_refused(struct zrfs_uring *u, int err)
{
	if (atomic_exchange(&u->said_refused, true))
		return;
	fuse_log(FUSE_LOG_WARNING,
		 "zrfs: -o uring: the kernel refused a ring or a ring command (%s): until every "
		 "CPU's queue has an entry, requests are served through /dev/fuse\n", strerror(err));
}

static struct ring_ent *ent_new(struct ring_thread *t)
{
	struct zrfs_uring *u = t->u;
	struct ring_ent *e = calloc(1, sizeof *e);
	unsigned k;

	if (!e)
		return NULL;
	/* reserved, not resident: pages are touched only as payloads need */
	e->payload = mmap(NULL, u->payload_cap, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (e->payload == MAP_FAILED) {
		free(e);
		return NULL;
	}
	e->t = t;
	e->iov[0] = (struct iovec){&e->hdr, sizeof e->hdr};
	e->iov[1] = (struct iovec){e->payload, u->payload_cap};
	/* entries are added by their threads one at a time per thread: the
	 * slot is taken atomically, then published */
	k = atomic_fetch_add(&u->nents, 1);
	if (k >= MAX_ENTRIES) {
		atomic_fetch_sub(&u->nents, 1);
		munmap(e->payload, u->payload_cap);
		free(e);
		return NULL;
	}
	__atomic_store_n(&u->ents[k], e, __ATOMIC_RELEASE);
	return e;
}

/* A free SQE of @t's ring; if it is full, what is queued goes to the
 * kernel first. NULL only if that fails. */
static struct io_uring_sqe *get_sqe(struct ring_thread *t)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&t->ring);

	if (!sqe) {
		io_uring_submit(&t->ring);
		sqe = io_uring_get_sqe(&t->ring);
	}
	return sqe;
}

static bool ring_cmd(struct ring_thread *t, struct ring_ent *e, unsigned op, uint64_t commit_id)
{
	struct io_uring_sqe *sqe = get_sqe(t);

	if (!sqe)
		return false;
	memset(sqe, 0, 2 * sizeof *sqe); /* SQE128 */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = t->u->fd;
	sqe->cmd_op = op;
	if (op == RING_CMD_REGISTER) {
		sqe->addr = (uint64_t)(uintptr_t)e->iov;
		sqe->len = 2;
	}
	struct ring_cmd *c = (struct ring_cmd *)sqe->cmd;
	c->commit_id = commit_id;
	c->qid = (uint16_t)t->qid;
	io_uring_sqe_set_data(sqe, e);
	t->with_kernel++;
	return true;
}

static void arm_read(struct ring_thread *t, int fd, uint64_t *buf, uint64_t tag)
{
	struct io_uring_sqe *sqe = get_sqe(t);

	if (!sqe)
		return;
	io_uring_prep_read(sqe, fd, buf, sizeof *buf, 0);
	io_uring_sqe_set_data64(sqe, tag);
}

/* Reply EIO to a request that cannot be served as it came. */
static void reply_eio(struct ring_ent *e, uint64_t unique)
{
	struct fuse_out_header out = {.len = sizeof out, .error = -EIO, .unique = unique};

	memcpy(e->hdr.in_out, &out, sizeof out);
	e->hdr.ent.payload_sz = 0;
}

char *zrfs_ring_request(const void *in_out, const void *op_in, const void *payload,
			uint32_t payload_len, size_t payload_cap, char *buf)
{
	struct fuse_in_header in;
	size_t op;

	memcpy(&in, in_out, sizeof in);
	if (in.len < sizeof in + (uint64_t)payload_len || payload_len > payload_cap ||
	    (op = in.len - sizeof in - payload_len) > RING_AREA)
		return NULL;
	char *at = buf + REQ_HEAD - sizeof in - op;
	memcpy(at, &in, sizeof in);
	memcpy(at + sizeof in, op_in, op);
	memcpy(buf + REQ_HEAD, payload, payload_len);
	return at;
}

/* Serve the request in @e: true if it was answered meanwhile (commit it);
 * false if another thread answers it later (it commits through t->done). */
static bool serve(struct ring_thread *t, struct ring_ent *e)
{
	struct zrfs_uring *u = t->u;
	struct fuse_in_header in;
	uint32_t psz = e->hdr.ent.payload_sz;

	memcpy(&in, e->hdr.in_out, sizeof in);
	/* as /dev/fuse delivers it, in a buffer of our own: a handler may read
	 * its request after it answered, when the payload holds the answer */
	char *at = zrfs_ring_request(e->hdr.in_out, e->hdr.op_in, e->payload, psz, u->payload_cap,
				     t->req);
	if (!at) {
		fuse_log(FUSE_LOG_ERR, "zrfs: -o uring: a request of %u bytes with a payload of "
			 "%u: answered EIO\n", in.len, psz);
		reply_eio(e, in.unique);
		return true;
	}
	e->self_replied = false;
	atomic_store(&e->unique, in.unique);
	serving = e;
	fuse_session_process_buf(u->se, &(struct fuse_buf){.size = in.len, .mem = at});
	serving = NULL;
	return e->self_replied;
}

/* Commit the entries other threads answered. */
static void commit_done(struct ring_thread *t)
{
	struct ring_ent *e, *next;

	pthread_mutex_lock(&t->done_lock);
	e = t->done;
	t->done = NULL;
	pthread_mutex_unlock(&t->done_lock);
	for (; e; e = next) {
		next = e->next_done;
		ring_cmd(t, e, RING_CMD_COMMIT_AND_FETCH, atomic_exchange(&e->unique, 0));
	}
}

/* An entry of @t's lost to the kernel (held by a request answered later, or
 * by a command that failed): if none is left with the kernel, register a
 * fresh one, so that the thread keeps serving its CPU's queue. */
static void keep_serving(struct ring_thread *t)
{
	struct ring_ent *more;

	if (t->with_kernel == 0 && (more = ent_new(t)) != NULL)
		ring_cmd(t, more, RING_CMD_REGISTER, 0);
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

/* Not IORING_SETUP_DEFER_TASKRUN: with it, a request the kernel handed to
 * a thread killed before it ran that hand-over stays with its entry for
 * good (Linux 6.18), and an aborted connection (umount -f) cannot end it;
 * ordinary task work is run as the thread dies, and the abort ends it. */
static int ring_open(struct ring_thread *t)
{
	struct io_uring_params p = {.flags = IORING_SETUP_SQE128 | IORING_SETUP_SINGLE_ISSUER |
					     IORING_SETUP_COOP_TASKRUN};
	int rc = io_uring_queue_init_params(64, &t->ring, &p);

	if (rc == -EINVAL) { /* before 6.0 */
		p = (struct io_uring_params){.flags = IORING_SETUP_SQE128};
		rc = io_uring_queue_init_params(64, &t->ring, &p);
	}
	return rc;
}

static uint64_t now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000 + (uint64_t)t.tv_nsec / 1000;
}

/* The next completion. With -o poll_us=US, a ring thread looks for it
 * (yielding its CPU between looks) for US microseconds before it sleeps:
 * the reader its reply woke makes its next request on this CPU without
 * waiting for this thread to wake up. */
static int ring_wait(struct ring_thread *t)
{
	unsigned poll_us = t->u->ring_poll_us;
	int rc;

	if (!poll_us)
		return io_uring_submit_and_wait(&t->ring, 1);
	rc = io_uring_submit(&t->ring);
	if (rc < 0 && rc != -EINTR && rc != -EBUSY)
		return rc;
	uint64_t until = now_us() + poll_us;
	while (io_uring_cq_ready(&t->ring) == 0) {
		if (now_us() >= until)
			return io_uring_submit_and_wait(&t->ring, 1);
		sched_yield(); /* a system call: the ring's task work runs on return */
	}
	return 0;
}

static void *ring_main(void *arg)
{
	struct ring_thread *t = arg;
	struct zrfs_uring *u = t->u;
	struct ring_ent *e;
	int rc, refused = 0; /* failed commands since the last request */

	pin(t->qid);
	if ((rc = ring_open(t)) < 0) {
		say_refused(u, -rc);
		return NULL;
	}
	/* polled, not read: every thread sees the one write */
	struct io_uring_sqe *sqe = get_sqe(t); /* an empty ring: never NULL */
	io_uring_prep_poll_add(sqe, u->stop_fd, POLLIN);
	io_uring_sqe_set_data64(sqe, STOP_TAG);
	arm_read(t, t->wake_fd, &t->wake_buf, WAKE_TAG);
	if (!(e = ent_new(t)) || !ring_cmd(t, e, RING_CMD_REGISTER, 0)) {
		say_refused(u, ENOMEM);
		goto out;
	}
	for (;;) {
		struct io_uring_cqe *cqe;
		rc = ring_wait(t);
		if (rc < 0 && rc != -EINTR && rc != -EBUSY)
			break;
		if (io_uring_peek_cqe(&t->ring, &cqe) < 0)
			continue;
		uint64_t tag = cqe->user_data;
		int res = cqe->res;
		io_uring_cqe_seen(&t->ring, cqe);
		if (tag == STOP_TAG || atomic_load(&u->stopping))
			break;
		if (tag == WAKE_TAG) {
			arm_read(t, t->wake_fd, &t->wake_buf, WAKE_TAG);
			commit_done(t);
			continue;
		}
		e = (struct ring_ent *)(uintptr_t)tag;
		t->with_kernel--;
		if (res < 0) {
			/* ENOTCONN: unmounted. Anything else is said once; the
			 * entry is lost, so the thread registers another
			 * rather than leave its CPU's queue short, unless the
			 * kernel keeps refusing (a ring turned off) */
			if (res == -ENOTCONN || res == -ECANCELED || ++refused > 3)
				break;
			say_refused(u, -res);
			keep_serving(t);
			continue;
		}
		refused = 0;
		if (serve(t, e)) {
			ring_cmd(t, e, RING_CMD_COMMIT_AND_FETCH, atomic_exchange(&e->unique, 0));
			continue;
		}
		keep_serving(t); /* it is answered later */
	}
out:
	io_uring_queue_exit(&t->ring); /* cancels what the kernel holds */
	return NULL;
}

/* ---- hooks ---- */

static struct ring_ent *owner(struct zrfs_uring *u, uint64_t unique)
{
	if (serving && atomic_load(&serving->unique) == unique)
		return serving;
	unsigned n = atomic_load(&u->nents);
	for (unsigned i = 0; u->ents && i < n; i++) {
		struct ring_ent *e = __atomic_load_n(&u->ents[i], __ATOMIC_ACQUIRE);
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
		reply_eio(e, out.unique); /* the reader gets EIO, as through writev */
	}
	if (e == serving) {
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
	struct ring_ent *e;

	if (u && out->unique && (e = owner(u, out->unique)) != NULL)
		return commit_reply(e, iov, count);
	if (u && u->offered && out->unique == u->init_unique && out->error == 0 && count == 2 &&
	    iov[1].iov_len >= sizeof(struct fuse_init_out) && !u->threads)
		return reply_init(u, fd, iov, count);
	return writev(fd, iov, count);
}

/* With -o poll_us=US, one serving thread at a time polls /dev/fuse this
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
		uint64_t until = now_us() + u->dev_poll_us;
		while (poll(&p, 1, 0) == 0 && now_us() < until)
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
	struct ring_thread *ts;

	if (ncpu < 1 || ncpu > 4096)
		return;
	ts = calloc((size_t)ncpu * u->per_cpu, sizeof *ts);
	u->ents = calloc(MAX_ENTRIES, sizeof *u->ents);
	if (!ts || !u->ents) {
		free(ts);
		say_refused(u, ENOMEM);
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
			say_refused(u, ENOMEM);
			break;
		}
		t->running = pthread_create(&t->thread, NULL, ring_main, t) == 0;
	}
}

int zrfs_transport_start(struct zrfs *fs, struct fuse_session *se)
{
	static const struct fuse_custom_io io = {.read = hook_read, .writev = hook_writev};
	struct zrfs_uring *u;
	int fd = fuse_session_fd(se);

	bool dflt = fs->opts.poll_us == ZRFS_POLL_DEFAULT;

	if (!fs->opts.uring && (dflt || !fs->opts.poll_us))
		return 0;
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
		munmap(u->ents[i]->payload, u->payload_cap);
		free(u->ents[i]);
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
