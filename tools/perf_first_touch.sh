#!/bin/sh
# perf_first_touch.sh - where a first touch of record files goes: READERS
# readers (xargs cat, one shuffled order shared among them) read every
# record file once through a fresh zrfs mount and through the FUSE floor
# (zrfs-floor, the same names and sizes), each under `perf record -a -g`;
# prints the rate of each and the CPU samples by program and object, then
# the daemons' top symbols, and where zrfs's time in locks and in the
# kernel's memory map comes from.
#
# usage: tools/perf_first_touch.sh ZR ZRFS [RECORDS] [DIR] [READERS] [uring]
#   RECORDS files of 8 KiB (default 50000); DIR scratch space (default
#   /var/tmp); READERS (default 1); uring: both mounts with -o uring. Needs
#   root (or FUSE access) and perf (Debian's linux-perf); zrfs-floor is
#   taken from beside ZRFS.
set -eu
case "${1:-}" in -h | --help | "") sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
ZR=$1 ZRFS=$2 N=${3:-50000} DIR=${4:-/var/tmp} P=${5:-1} UR=""
[ "${6:-}" = uring ] && UR=,uring
FLOOR=$(dirname "$ZRFS")/zrfs-floor
T=$(mktemp -d "$DIR/zr-perf-first-XXXXXX")
cleanup() {
	mountpoint -q "$T/mnt" 2>/dev/null && fusermount3 -u "$T/mnt"
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
mkdir "$T/mnt"
head -c $((N * 8192)) /dev/urandom >"$T/flat"
"$ZR" import flat "$T/flat" "$T/ds" --record-size 8192 >/dev/null
python3 -c '
import random, sys
n, mnt = int(sys.argv[1]), sys.argv[2]
ids = list(range(n)); random.Random(7).shuffle(ids)
sys.stdout.write("".join("%s/data/%d\n" % (mnt, i) for i in ids))' "$N" "$T/mnt" >"$T/list"
cat "$T/ds/chunk/"* >/dev/null # the chunks in the page cache, as a warm first pass has them
for what in zrfs floor; do
	if [ $what = zrfs ]; then
		setsid "$ZRFS" "$T/ds" "$T/mnt" -f -o "log=$T/log$UR" &
	else
		setsid "$FLOOR" "$T/mnt" -f -o "records=$N,size=8192,field=data,ext=$UR" &
	fi
	pid=$!
	timeout 60 sh -c "until mountpoint -q '$T/mnt'; do sleep 0.01; done"
	s=$(date +%s.%N)
	perf record -q -F 4999 -g -a -o "$T/$what.data" -- \
		xargs -P "$P" -n $((N / P / 8 + 1)) -a "$T/list" cat >/dev/null 2>&1
	e=$(date +%s.%N)
	# the daemon's CPU time so far (user + system, clock ticks)
	ticks=$(awk '{print $14 + $15}' "/proc/$pid/stat")
	echo "$what, $P readers: $(awk "BEGIN {printf \"%.0f files/s\", $N / ($e - $s)}")" \
		"(under perf), daemon CPU $(awk "BEGIN {printf \"%.1f\", $ticks * 1e6 / \
		$(getconf CLK_TCK) / $N}") us per file"
	fusermount3 -u "$T/mnt"
	wait $pid
done
for what in zrfs floor; do
	echo "== $what: CPU samples by program and object"
	perf report -i "$T/$what.data" --no-children --sort comm,dso -g none -q 2>/dev/null | head -10
done
echo "== zrfs: the daemon's top symbols"
perf report -i "$T/zrfs.data" --no-children --comm zrfs --sort sym -g none -q 2>/dev/null | head -25
echo "== floor: the daemon's top symbols"
perf report -i "$T/floor.data" --no-children --comm zrfs-floor --sort sym -g none -q 2>/dev/null |
	head -15
# spinning and sleeping on something shared, and the address space's lock
for sym in native_queued_spin_lock_slowpath mutex_spin_on_owner rwsem_down_read_slowpath \
	rwsem_optimistic_spin futex_wait osq_lock; do
	echo "== zrfs: where $sym is called from"
	perf report -i "$T/zrfs.data" --no-children --comm zrfs --symbols "$sym" \
		-g caller,0.5,callee,function,percent -q 2>/dev/null | head -30
done
