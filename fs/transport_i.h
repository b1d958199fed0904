/*
 * transport_i.h - the io_uring transport's state, shared by its ring
 * threads (ring.c) and the hooks through which libfuse's replies and
 * /dev/fuse reach them (transport.c, whose comment says how it works).
 */
#ifndef ZRFS_TRANSPORT_I_H
#define ZRFS_TRANSPORT_I_H

#include "zrfs_i.h"

#include <liburing.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <sys/uio.h>

/* ---- the kernel's ABI (FUSE 7.42; Debian 12's linux/fuse.h is 7.38) ---- */

#define RING_OFFER (1u << (41 - 32)) /* FUSE_OVER_IO_URING, as a flags2 bit */
#define MMAP_OFFER (1u << (36 - 32)) /* FUSE_DIRECT_IO_ALLOW_MMAP (7.39), a flags2 bit */
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

/* ---- ring threads (ring.c) ---- */

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
	uint64_t init_unique;        /* the INIT request (0: answered), whether it offered */
	bool offered;                /* ... rings we take (-o uring) */
	bool parallel_dirops;        /* ... parallel lookups and listings */
	bool shared_mmap;            /* ... shared maps of direct_io files (-o writable) */
	struct ring_thread *threads;
	_Atomic(struct ring_ent *) *ents; /* every entry, never moved or freed while serving */
	atomic_uint nents;
};

/* The entry the calling thread serves (a ring thread's, while it serves). */
extern _Thread_local struct ring_ent *zrfs_ring_serving;
/* A ring thread: serves its CPU's queue until stopped. */
void *zrfs_ring_main(void *arg);
/* Say once why the kernel refused the rings (-@err). */
void zrfs_ring_say_refused(struct zrfs_uring *u, int err);
/* Answer request @unique of entry @e with EIO (a reply that cannot go). */
void zrfs_ring_reply_eio(struct ring_ent *e, uint64_t unique);
/* Microseconds on the monotonic clock. */
uint64_t zrfs_now_us(void);

#endif
