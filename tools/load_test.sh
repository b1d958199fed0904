#!/bin/sh
# Load test of a mount (figures in RELIABILITY.md).
#
#   tools/load_test.sh [SECONDS] [ZRFS-OPTIONS]     (root; default 60 s)
#
# Uses $ZRFS and $MKDS when set (the test suite runs it for 10 s that way),
# else builds build/ci if needed. Makes a 5,000-record dataset with the test
# helper (raw and flate fields, fixed and variable sizes, missing records),
# mounts it and runs fio with 16 jobs of random reads for SECONDS:
#   4 jobs over the record files of img (raw), 4 over txt (flate),
#   8 over every file of every batch directory of one epoch;
# while a verifier compares random record files and whole random batches
# (ids, FIELD, FIELD.offsets) with the reference, byte for byte. Then it
# prints fio's totals and errors, the verifier's counts and the daemon's
# peak resident memory (VmHWM), and unmounts while readers are still busy.
# Exit status is non-zero on any fio error, any mismatch, or a hang.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-60}
opts=${2:-cache=64M}
b=$top/build/ci
if [ -z "${ZRFS:-}" ] || [ -z "${MKDS:-}" ]; then
	[ -x "$b/fs/zrfs" ] && [ -x "$b/tests/mkds" ] ||
		{ cmake -S "$top" -B "$b" >/dev/null && cmake --build "$b" -j2 >/dev/null; }
	ZRFS=$b/fs/zrfs MKDS=$b/tests/mkds
fi
case ",$opts," in
*,uring,*) # skipped (77) where the kernel cannot serve through io_uring rings
	why=$(sh "$top/tests/fs/uring_ready.sh") || { echo "SKIP: $why"; exit 77; } ;;
esac
T=$(mktemp -d /var/tmp/zr-load-XXXXXX)
trap 'mountpoint -q "$T/mnt" && fusermount3 -uz "$T/mnt"; rm -rf "$T"' EXIT
trap 'exit 1' INT TERM
mkdir "$T/mnt"
"$MKDS" "$T/ds" "$T/ref" --records 5000 >/dev/null
"$ZRFS" "$T/ds" "$T/mnt" -o "$opts"
pid=$(pgrep -nf "zrfs $T/ds $T/mnt")
spec="shuffle,seed=1,batch=64,tail=keep"
epoch=$T/mnt/.batches/$spec/epoch-0

cat >"$T/jobs.fio" <<EOF
[global]
rw=randread
ioengine=psync
time_based
runtime=$secs
group_reporting
[img]
opendir=$T/mnt/img
bs=4k
numjobs=4
new_group
[txt]
opendir=$T/mnt/txt
bs=4k
numjobs=4
new_group
[batches]
opendir=$epoch
bs=64k
numjobs=8
new_group
EOF

/usr/bin/python3 - "$T/mnt" "$T/ref" "$spec" "$T/stop" >"$T/verify.log" 2>&1 <<'PY' &
import os, random, struct, sys
mnt, ref, spec, stop = sys.argv[1:]
fields = ("img", "txt", "vec", "lab")
names = {f: {int(n.split(".")[0]): n for n in os.listdir(f"{ref}/{f}")} for f in fields}
def record(f, i):
    n = names[f].get(i)
    return open(f"{ref}/{f}/{n}", "rb").read() if n else b""
epoch = f"{mnt}/.batches/{spec}/epoch-0"
steps = len(os.listdir(epoch))
r, nrec, nbatch, bad = random.Random(1), 0, 0, 0
while not os.path.exists(stop):
    f = r.choice(fields[:2])
    i = r.choice(list(names[f]))
    if open(f"{mnt}/{f}/{names[f][i]}", "rb").read() != record(f, i):
        bad += 1
        print("mismatch", f, i)
    nrec += 1
    k = r.randrange(steps)
    d = f"{epoch}/{k}"
    ids = open(f"{d}/ids", "rb").read()
    ids = struct.unpack(f"<{len(ids) // 8}Q", ids)
    for f in fields:
        data = open(f"{d}/{f}", "rb").read()
        off = open(f"{d}/{f}.offsets", "rb").read()
        off = struct.unpack(f"<{len(off) // 8}Q", off)
        if len(off) != len(ids) + 1 or off[-1] != len(data) or \
           any(data[off[j]:off[j + 1]] != record(f, i) for j, i in enumerate(ids)):
            bad += 1
            print("mismatch in batch", k, "field", f)
    nbatch += 1
print(f"verified {nrec} record files and {nbatch} batches (4 fields each), {bad} mismatches")
sys.exit(1 if bad or not nrec else 0)
PY
vpid=$!
# peak private (anonymous) memory, sampled; VmHWM also counts the chunk
# files the daemon maps, which are page cache shared with the kernel
(peak=0; while [ ! -e "$T/stop" ] && a=$(awk '/RssAnon/ {print $2}' "/proc/$pid/status"); do
	[ "$a" -gt "$peak" ] && peak=$a && echo "$peak" >"$T/anon"
	sleep 0.2
done) &
st=0
fio --readonly --output-format=terse --terse-version=3 "$T/jobs.fio" >"$T/fio.out" 2>"$T/fio.err" || st=1
touch "$T/stop"
wait $vpid || st=1
cat "$T/verify.log"
# terse v3: 3 job name, 5 error, 6 KiB read, 7 KiB/s, 8 IOPS
grep '^3;' "$T/fio.out" | awk -F';' '{
	printf "fio %-8s %9.1f MiB read  %8.1f MiB/s  %7d IOPS  error %d\n", $3, $6/1024, $7/1024, $8, $5
	if ($5 != 0) bad = 1 } END { exit bad }' || st=1
grep -v 'may be ignored\|opendir added' "$T/fio.err" >&2 || :
wait $! 2>/dev/null || :
echo "daemon peak RSS $(awk '/VmHWM/ {print $2, $3}' "/proc/$pid/status"), peak anonymous $(cat "$T/anon") kB, file-backed now $(awk '/RssFile/ {print $2, $3}' "/proc/$pid/status") (-o $opts)"

# unmount while readers are busy: the unmount and the daemon must finish
for i in 1 2 3 4; do
	(while cat "$T/mnt"/txt/* "$epoch"/*/txt >/dev/null 2>&1; do :; done) &
done
if timeout 30 fusermount3 -uz "$T/mnt" && timeout 30 tail --pid="$pid" -f /dev/null; then
	echo "unmount under load: done, daemon exited"
else
	echo "unmount under load: did not finish" >&2
	st=1
fi
wait
exit $st
