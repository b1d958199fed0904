#!/bin/sh
# perf_first_touch.sh - where a first touch of record files goes: one
# reader (xargs cat, a shuffled order) reads every record file once through
# a fresh zrfs mount and through the FUSE floor (zrfs-floor, the same names
# and sizes), each under `perf record -a -g`; prints the rate of each and
# the CPU samples by program and object, then the daemons' top symbols.
#
# usage: tools/perf_first_touch.sh ZR ZRFS [RECORDS] [DIR]
#   RECORDS files of 8 KiB (default 50000); DIR scratch space (default
#   /var/tmp). Needs root (or FUSE access) and perf (Debian's linux-perf);
#   zrfs-floor is taken from beside ZRFS.
set -eu
ZR=$1 ZRFS=$2 N=${3:-50000} DIR=${4:-/var/tmp}
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
/usr/bin/python3 -c '
import random, sys
n, mnt = int(sys.argv[1]), sys.argv[2]
ids = list(range(n)); random.Random(7).shuffle(ids)
sys.stdout.write("".join("%s/data/%d\n" % (mnt, i) for i in ids))' "$N" "$T/mnt" >"$T/list"
cat "$T/ds/chunk/"* >/dev/null # the chunks in the page cache, as a warm first pass has them
for what in zrfs floor; do
	if [ $what = zrfs ]; then
		setsid "$ZRFS" "$T/ds" "$T/mnt" -f -o log="$T/log" &
	else
		setsid "$FLOOR" "$T/mnt" -f -o "records=$N,size=8192,field=data,ext=" &
	fi
	pid=$!
	timeout 60 sh -c "until mountpoint -q '$T/mnt'; do sleep 0.01; done"
	s=$(date +%s.%N)
	perf record -q -F 4999 -g -a -o "$T/$what.data" -- xargs -a "$T/list" cat >/dev/null 2>&1
	e=$(date +%s.%N)
	echo "$what: $(awk "BEGIN {printf \"%.0f files/s\", $N / ($e - $s)}") (under perf)"
	fusermount3 -u "$T/mnt"
	wait $pid
done
for what in zrfs floor; do
	echo "== $what: CPU samples by program and object"
	perf report -i "$T/$what.data" --no-children --sort comm,dso -g none -q 2>/dev/null | head -10
done
echo "== zrfs: the daemon's top symbols"
perf report -i "$T/zrfs.data" --no-children --comm zrfs --sort sym -g none -q 2>/dev/null | head -20
echo "== floor: the daemon's top symbols"
perf report -i "$T/floor.data" --no-children --comm zrfs-floor --sort sym -g none -q 2>/dev/null | head -12
