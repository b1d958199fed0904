#!/bin/sh
# valgrind.sh TEST-PROGRAM [ARGS]: run a Criterion test program under
# valgrind's memcheck, following the processes Criterion forks for each
# test. Fails when the tests fail or when memcheck reports anything in any
# process: an invalid access, a use of uninitialised memory, or a definite
# leak (Criterion's own bookkeeping in its workers is only "possibly" lost
# and is not reported). --fair-sched: the concurrency tests' threads poll
# each other, and valgrind's default scheduler can starve one of them for
# minutes. The system's programs a test runs (system(): sh, cp, rm, cmp)
# run natively: under memcheck each took half a second to start, and
# test_corrupt's 150 damaged copies cost five minutes of them.
set -u
logs=$(mktemp -d /tmp/zr-valgrind-XXXXXX)
trap 'rm -rf "$logs"' EXIT
valgrind -q --trace-children=yes --trace-children-skip='/bin/*,/usr/bin/*' --fair-sched=yes \
	--leak-check=full --show-leak-kinds=definite \
	--errors-for-leak-kinds=definite --log-file="$logs/%p.log" "$@"
rc=$?
for f in "$logs"/*.log; do
	# valgrind 3.19 does not know pidfd_open (434), which zr_holder_wait
	# tries before it falls back to a pause: it says so, and it is no error
	sed -i '/WARNING: unhandled amd64-linux syscall: 434$/,+4d' "$f"
	if [ -s "$f" ]; then
		cat "$f"
		rc=1
	fi
done
[ "$rc" = 0 ] && echo "valgrind: no errors in $(ls "$logs" | wc -l) processes"
exit $rc
