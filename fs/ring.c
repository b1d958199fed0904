/*
 * ring.c - the ring threads of FUSE over io_uring (-o uring; transport.c
 * says how the transport works): each bound to a CPU, registering entries
 * with that CPU's queue, putting each request back together as /dev/fuse
 * would have delivered it for libfuse, committing replies and fetching the
 * next request in one io_uring_enter(2), and polling for it poll_us before
 * sleeping.
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

_Thread_local struct ring_ent *zrfs_ring_serving; /* the entry this thread serves */
_Thread_local struct fuse_bufvec *zrfs_reply_mapped;

void zrfs_ring_say_refused(struct zrfs_uring *u, int err)
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
	atomic_store_explicit(&u->ents[k], e, memory_order_release);
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
void zrfs_ring_reply_eio(struct ring_ent *e, uint64_t unique)
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
static bool ring_serve(struct ring_thread *t, struct ring_ent *e)
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
		zrfs_ring_reply_eio(e, in.unique);
		return true;
	}
	e->self_replied = false;
	atomic_store(&e->unique, in.unique);
	zrfs_ring_serving = e;
	fuse_session_process_buf(u->se, &(struct fuse_buf){.size = in.len, .mem = at});
	zrfs_ring_serving = NULL;
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
 * fresh one, so that the thread keeps zrfs_ring_serving its CPU's queue. */
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

uint64_t zrfs_now_us(void)
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
	uint64_t until = zrfs_now_us() + poll_us;
	while (io_uring_cq_ready(&t->ring) == 0) {
		if (zrfs_now_us() >= until)
			return io_uring_submit_and_wait(&t->ring, 1);
		sched_yield(); /* a system call: the ring's task work runs on return */
	}
	return 0;
}

void *zrfs_ring_main(void *arg)
{
	struct ring_thread *t = arg;
	struct zrfs_uring *u = t->u;
	struct ring_ent *e;
	int rc, refused = 0; /* failed commands since the last request */

	pin(t->qid);
	if ((rc = ring_open(t)) < 0) {
		zrfs_ring_say_refused(u, -rc);
		return NULL;
	}
	/* polled, not read: every thread sees the one write */
	struct io_uring_sqe *sqe = get_sqe(t); /* an empty ring: never NULL */
	io_uring_prep_poll_add(sqe, u->stop_fd, POLLIN);
	io_uring_sqe_set_data64(sqe, STOP_TAG);
	arm_read(t, t->wake_fd, &t->wake_buf, WAKE_TAG);
	if (!(e = ent_new(t)) || !ring_cmd(t, e, RING_CMD_REGISTER, 0)) {
		zrfs_ring_say_refused(u, ENOMEM);
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
			zrfs_ring_say_refused(u, -res);
			keep_serving(t);
			continue;
		}
		refused = 0;
		if (ring_serve(t, e)) {
			ring_cmd(t, e, RING_CMD_COMMIT_AND_FETCH, atomic_exchange(&e->unique, 0));
			continue;
		}
		keep_serving(t); /* it is answered later */
	}
out:
	io_uring_queue_exit(&t->ring); /* cancels what the kernel holds */
	return NULL;
}
