#!/bin/sh
# The cases of a writable mount that once went wrong (new files listed late,
# a rename then a write, a file opened twice, O_APPEND, a large record
# opened by many writers, a file being written at SIGTERM), each with real
# system calls on a real mount: tests/fs/write_cases.py. Then, here: a
# mount unmounted as a program with 1,200 of its files open dies, 20 times,
# ends its daemon with status 0 each time (the kernel ends the RELEASEs it
# was handing over with ECONNABORTED when the unmount ends the connection;
# the daemon took that for a failure and exited 1, about once in four).
. "$(dirname "$0")/lib.sh"
: "${ZR:?ZR must name the zr binary}"
"$PY" "$(dirname "$0")/write_cases.py" "$ZR" "$ZRFS" "$MKDS" "$T" || fail "write_cases.py"

"$MKDS" "$T/dies" "$T/dies.ref" --records 1200 >/dev/null || fail "mkds failed"
for k in $(seq 20); do
	"$ZRFS" "$T/dies" "$MNT" -o writable -f 2>"$T/dies.log" &
	pid=$!
	until mountpoint -q "$MNT"; do
		kill -0 "$pid" 2>/dev/null || fail "unmount $k: zrfs exited before mounting: $(tail -3 "$T/dies.log")"
	done
	"$PY" -c 'if 1:
		import os, signal, sys
		img = sys.argv[1] + "/img/"
		fds = [os.open(img + n, os.O_WRONLY if k % 2 else os.O_RDONLY)
		       for k, n in enumerate(os.listdir(img))]
		os.kill(os.getpid(), signal.SIGKILL)' "$MNT" 2>/dev/null
	fusermount3 -u "$MNT" || fail "unmount $k"
	wait "$pid" || fail "unmount $k as a program with 1,200 files open died: zrfs exited $?: $(tail -3 "$T/dies.log")"
done
echo "20 unmounts as a program with 1,200 files open died: each daemon exited 0"
