#!/bin/sh
# bench_write.sh - writing many small files: cp -r into a field directory
# of a writable zrfs mount (as mounted by default; with a serving thread
# polling for requests, -o poll_us=100; and, where the kernel offers it,
# through FUSE over io_uring, -o uring), against cp -r into a native
# directory and zr import dir of the same tree, each followed by sync.
#
# usage: tools/bench_write.sh ZR ZRFS [FILES] [RUNS] [DIR]
#   FILES  files of 8 KiB (default 50000); RUNS runs of each, alternating
#   (default 3); DIR scratch space on the filesystem to measure (default
#   /var/tmp). Prints each run and the medians, with ratios to the native
#   copy measured in the same runs. Needs root (or FUSE access). The
#   daemon runs in a session of its own (setsid), as a mounted one does.
set -eu
ZR=$1 ZRFS=$2 FILES=${3:-50000} RUNS=${4:-3} DIR=${5:-/var/tmp}
T=$(mktemp -d "$DIR/zr-bench-write-XXXXXX")
cleanup() {
	mountpoint -q "$T/mnt" 2>/dev/null && fusermount3 -u "$T/mnt"
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
mkdir "$T/src" "$T/mnt"
i=0
while [ $i -lt "$FILES" ]; do
	head -c 8192 /dev/urandom >"$T/src/f$i.bin"
	i=$((i + 1))
done
secs() { # COMMAND...: its wall time in seconds, then sync's included
	s=$(date +%s.%N)
	"$@" >/dev/null
	sync
	e=$(date +%s.%N)
	awk "BEGIN {print $e - $s}"
}
# mount_copy ZRFS_OPTIONS...: seconds of cp -r into a fresh dataset mounted
# with them, then sync DIR (fsync of the directory: returns once every new
# file in it is committed, the mount's equal of the native copy's sync)
# and sync; checks that every file became a record.
mount_copy() {
	rm -rf "$T/ds"
	"$ZR" create "$T/ds" --field img:bytes:ext=bin >/dev/null
	setsid -w "$ZRFS" "$T/ds" "$T/mnt" -f "$@" 2>"$T/log" &
	pid=$!
	timeout 30 sh -c "until mountpoint -q '$T/mnt'; do :; done"
	secs sh -c "cp -r '$T/src/.' '$T/mnt/img/' && sync '$T/mnt/img'"
	fusermount3 -u "$T/mnt"
	wait $pid
	n=$("$ZR" info "$T/ds" | awk '/^records/ {print $2}')
	[ "$n" = "$FILES" ] || { echo "the mount holds $n records, not $FILES" >&2; exit 1; }
}
uring=no
[ "$(cat /sys/module/fuse/parameters/enable_uring 2>/dev/null)" = Y ] && uring=yes
run=1
: >"$T/times"
while [ $run -le "$RUNS" ]; do
	rm -rf "$T/native" "$T/imp"
	mkdir "$T/native"
	nat=$(secs cp -r "$T/src/." "$T/native/")
	mnt=$(mount_copy -o writable)
	pol=$(mount_copy -o writable,poll_us=100)
	uri=-
	[ $uring = yes ] && uri=$(mount_copy -o writable,uring)
	imp=$(secs "$ZR" import dir "$T/src" "$T/imp" --field img)
	echo "run $run: native cp -r ${nat}s, zrfs -o writable cp -r ${mnt}s," \
		"with -o poll_us=100 ${pol}s, with -o uring ${uri}s, zr import dir ${imp}s"
	echo "$nat $mnt $imp $pol $uri" >>"$T/times"
	run=$((run + 1))
done
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
ratio() { awk '{printf "%.2f\n", $1 / $2}'; } # per run: native / other
nat=$(cut -d' ' -f1 "$T/times" | median)
echo
echo "$FILES files of 8 KiB, medians of $RUNS runs (each followed by sync):"
printf '  %-28s %8.3f s  %8.0f files/s\n' "native cp -r" "$nat" "$(awk "BEGIN {print $FILES / $nat}")"
# row COLUMN LABEL [TARGET]: the median time of a column, its speed
# against the native copy's, and the median of the per-run ratios
row() {
	t=$(cut -d' ' -f"$1" "$T/times" | median)
	r=$(awk -v c="$1" '{print $1, $c}' "$T/times" | ratio | median)
	printf '  %-28s %8.3f s  %8.0f files/s  speed vs native %.2fx%s; median of per-run ratios %.2fx\n' \
		"$2" "$t" "$(awk "BEGIN {print $FILES / $t}")" "$(awk "BEGIN {print $nat / $t}")" "${3:-}" "$r"
}
row 2 "zrfs -o writable, cp -r" " (target >= 0.5x)"
row 4 "  with -o poll_us=100"
if [ $uring = yes ]; then
	row 5 "  with -o uring"
else
	echo "  (-o uring not measured: /sys/module/fuse/parameters/enable_uring is not Y)"
fi
row 3 "zr import dir"
