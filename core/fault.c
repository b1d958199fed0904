/*
 * fault.c - a mapping cut short under a reader: SIGBUS turned into an
 * error.
 *
 * Offset tables are read through shared mappings. If another program cuts
 * a table short in place while a handle maps it (cp of a backup over it,
 * rsync --inplace, a partial restore), a load from the pages past its new
 * end raises SIGBUS, which kills the process. A process that reads
 * datasets others can write (zrfs) calls zr_guard_mappings() once: table
 * loads then run guarded, and the SIGBUS of a guarded load jumps back to
 * it, which fails with -EIO for that entry only. A guarded load holds no
 * lock and allocates nothing, so jumping out of it leaves nothing behind.
 * Any other SIGBUS takes its course: the handler that was there before,
 * or the default action.
 */
#include "store_i.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

atomic_bool zr_guarded;
_Thread_local sigjmp_buf *zr_fault_jump;

static struct sigaction before;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	sigjmp_buf *jump = zr_fault_jump;

	if (jump) {
		zr_fault_jump = NULL;
		siglongjmp(*jump, 1);
	}
	if ((before.sa_flags & SA_SIGINFO) && before.sa_sigaction) {
		before.sa_sigaction(sig, si, uc);
	} else if (before.sa_handler != SIG_DFL && before.sa_handler != SIG_IGN) {
		before.sa_handler(sig);
	} else {
		/* the default action: returning re-runs the faulting load */
		signal(SIGBUS, SIG_DFL);
	}
}

int zr_guard_mappings(void)
{
	static atomic_flag done = ATOMIC_FLAG_INIT;
	struct sigaction sa;

	if (atomic_flag_test_and_set(&done))
		return 0;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_sigbus;
	/* not blocked in the handler: the jump leaves it without restoring
	 * a mask (sigsetjmp(..., 0) is the cheap kind) */
	sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGBUS, &sa, &before) < 0)
		return zr_err(-errno, "cannot catch SIGBUS: %s", strerror(errno));
	atomic_store(&zr_guarded, true);
	return 0;
}
