#!/bin/sh
# -o uring: requests are served through io_uring rings when the kernel
# offers them (one ring per thread, threads per CPU, the log says so) and the
# bytes are the reference's; where the kernel does not offer them (the
# module parameter off), the mount says so once and serves through
# /dev/fuse; -o uring with splice is refused; unmounting ends the daemon.
. "$(dirname "$0")/lib.sh"
param=/sys/module/fuse/parameters/enable_uring
why=$(sh "$HERE/uring_ready.sh") || { echo "SKIP: $why"; exit 77; }
make_ds

# every file of every field, byte for byte, from 4 readers at once (so the
# requests come from both CPUs' queues)
check_reads() {
	"$PY" - "$MNT" "$REF" <<'PY' || fail "reads through the rings"
import os, sys, threading
mnt, ref = sys.argv[1:]
files = [f"{d}/{n}" for d in ("img", "txt", "lab", "vec") for n in os.listdir(f"{ref}/{d}")]
bad = []
def worker(k):
    for rel in files[k::4]:
        got = open(f"{mnt}/{rel}", "rb").read()
        if got != open(f"{ref}/{rel}", "rb").read():
            bad.append(rel)
ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
[t.start() for t in ts]
[t.join() for t in ts]
assert not bad, bad[:5]
assert len(files) > 100
PY
}

mount_ds -o uring,log="$T/log"
pid=$(pgrep -nf "zrfs $DS $MNT") || fail "no daemon"
check_reads
grep . "$T/log" && fail "the daemon logged the above"
# completions its rings delivered (CqHead of each ring): requests served
served() {
	n=0
	for fd in $(ls -l /proc/"$pid"/fd | awk '/io_uring/ {print $9}'); do
		n=$((n + $(awk '/^CqHead/ {print $2}' /proc/"$pid"/fdinfo/"$fd")))
	done
	echo $n
}
cpus=$(getconf _NPROCESSORS_CONF)
rings=$(ls -l /proc/"$pid"/fd | grep -c 'io_uring')
[ "$rings" -ge "$cpus" ] || fail "$rings rings for $cpus CPUs"
files=$(find "$REF"/img "$REF"/txt "$REF"/lab "$REF"/vec -type f | wc -l)
[ "$(served)" -ge "$files" ] || fail "the rings served $(served) requests for $files files"
# a batch file (large replies through the payload buffers) equals zr sample's ids
"$PY" - "$MNT" <<'PY' || fail "a batch file through the rings"
import numpy as np, os, sys
d = f"{sys.argv[1]}/.batches/seq,batch=64/epoch-0/0"
ids = np.fromfile(f"{d}/ids", dtype="<u8")
assert list(ids) == list(range(64)), ids[:8]
lab = np.load(f"{d}/lab.npy")
assert lab.shape[0] == 64
PY
fusermount3 -u "$MNT" || fail "unmount"
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && fail "the daemon is still running after unmount"

# uring and splice do not go together
out=$("$ZRFS" "$DS" "$MNT" -o uring,splice 2>&1) && fail "-o uring,splice mounted"
case $out in *"use one of uring and splice"*) ;; *) fail "uring,splice: $out" ;; esac

# the kernel not offering rings (as root: turned off for this mount only)
if [ "$(id -u)" = 0 ]; then
	echo N >"$param"
	trap 'echo Y >"$param"; cleanup' EXIT
	mount_ds -o uring,log="$T/log2"
	check_reads
	echo Y >"$param"
	grep -q "does not offer FUSE over io_uring" "$T/log2" || fail "no line says rings are off: $(cat "$T/log2")"
	pid=$(pgrep -nf "zrfs $DS $MNT") || fail "no daemon"
	[ "$(served)" = 0 ] || fail "rings served though they were off"
	fusermount3 -u "$MNT" || fail "unmount"
else
	echo "not root: the case of rings turned off is not checked"
fi
exit 0
