/*
 * memcheck_i.h - io_uring completions are written by the kernel behind
 * valgrind's back: ZR_URING_FILLED(p, n) tells memcheck that the n bytes a
 * completed read filled at p are defined. A no-op unless run under valgrind,
 * and nothing at all where valgrind's header is not installed. Private to
 * libzrecord: its batch reader (batch_read.c) is the one place of the
 * project that reads through io_uring.
 */
#ifndef ZR_MEMCHECK_I_H
#define ZR_MEMCHECK_I_H

#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define ZR_URING_FILLED(p, n) ((void)VALGRIND_MAKE_MEM_DEFINED((p), (n)))
#endif
#endif
#ifndef ZR_URING_FILLED
#define ZR_URING_FILLED(p, n) ((void)0)
#endif

#endif
