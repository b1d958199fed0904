#!/bin/sh
# bench_remove.sh - removing a directory of many files through a writable
# zrfs mount: rm -rf of a directory of FILES files in tree/ of a dataset
# imported from it, against the same removal in a native directory and in
# the FUSE floor (zrfs-floor -o writable: a field directory of as many
# files whose removal is answered with no work but a bit, so its time is
# what the kernel and the transport cost here), through /dev/fuse and,
# where the kernel offers it, io_uring (-o uring). Every removal is
# followed by sync (on a mount, sync of the directory that held it); the
# dataset must then hold no record of them.
#
# With MADE=yes the files are written into tree/ through the mount first
# (cp -r, then sync; not timed) and removed on the same mount: each keeps
# the inode number it was made with, as a file a program makes does, and
# the daemon has a table of them all while they go.
#
# usage: tools/bench_remove.sh ZR ZRFS [FILES] [RUNS] [DIR]
#   FILES files of 512 bytes in one directory (default 34000); RUNS runs
#   of everything, alternating (default 3); DIR scratch space on the
#   filesystem to measure (default /var/tmp). FLOOR the zrfs-floor binary
#   (default: beside ZRFS). Prints each run and the medians with ratios to
#   the native removal and to the floor's measured in the same runs. Needs
#   root (or FUSE access). Daemons run in sessions of their own (setsid),
#   as a mounted one does.
. "$(dirname "$0")/bench_lib.sh"
set -eu
ZR=$1 ZRFS=$2 FILES=${3:-34000} RUNS=${4:-3} DIR=${5:-/var/tmp}
FLOOR=${FLOOR:-$(dirname "$ZRFS")/zrfs-floor}
bench_scratch "$DIR" remove
MADE=${MADE:-no}
mkdir -p "$T/src/d" "$T/seed/x"
head -c 512 /dev/urandom >"$T/one"
cp "$T/one" "$T/seed/x/kept.bin" # MADE=yes: a dataset of one record, which stays
i=0
while [ $i -lt "$FILES" ]; do
	cp "$T/one" "$T/src/d/f$i.bin"
	i=$((i + 1))
done
secs() { # COMMAND...: its wall time in seconds
	s=$(date +%s.%N)
	"$@" >/dev/null
	e=$(date +%s.%N)
	awk "BEGIN {print $e - $s}"
}
native() {
	rm -rf "$T/native"
	cp -r "$T/src" "$T/native"
	sync
	secs sh -c "rm -rf '$T/native/d' && sync '$T/native'"
}
# on_mount ZRFS|FLOOR OPTIONS...: seconds of rm -rf of the directory of
# FILES files on a fresh mount with OPTIONS; a dataset must hold no record
# of them
on_mount() {
	daemon=$1
	shift
	if [ "$daemon" = zrfs ]; then
		rm -rf "$T/ds"
		left=0
		[ "$MADE" = yes ] && left=1
		if [ $left = 1 ]; then
			"$ZR" import dir "$T/seed" "$T/ds" >/dev/null
		else
			"$ZR" import dir "$T/src" "$T/ds" >/dev/null
		fi
		setsid -w "$ZRFS" "$T/ds" "$T/mnt" -f "$@" 2>"$T/log" &
		gone=tree/d
	else
		setsid -w "$FLOOR" "$T/mnt" -f -o "field=d,records=$FILES" "$@" 2>"$T/log" &
		gone=d
	fi
	pid=$!
	timeout 30 sh -c "until mountpoint -q '$T/mnt'; do :; done"
	if [ "$daemon" = zrfs ] && [ $left = 1 ]; then
		cp -r "$T/src/d" "$T/mnt/tree/"
		sync "$T/mnt/tree"
	fi
	secs sh -c "rm -rf '$T/mnt/$gone' && sync '$(dirname "$T/mnt/$gone")'"
	[ ! -e "$T/mnt/$gone" ] || { echo "$daemon: $gone is still there" >&2; exit 1; }
	fusermount3 -u "$T/mnt"
	wait $pid
	[ "$daemon" = zrfs ] || return 0
	n=$("$ZR" info "$T/ds" | awk '/^records/ {print $2}')
	[ "$n" = $left ] || { echo "the dataset holds $n records, not $left" >&2; exit 1; }
}
uring=no
[ "$(cat /sys/module/fuse/parameters/enable_uring 2>/dev/null)" = Y ] && uring=yes
run=1
: >"$T/times"
while [ $run -le "$RUNS" ]; do
	nat=$(native)
	mnt=$(on_mount zrfs -o writable)
	flo=$(on_mount floor -o writable)
	umnt=- uflo=-
	if [ $uring = yes ]; then
		umnt=$(on_mount zrfs -o writable,uring)
		uflo=$(on_mount floor -o writable,uring)
	fi
	echo "run $run: rm -rf of $FILES files: native ${nat}s, zrfs ${mnt}s, floor ${flo}s," \
		"zrfs -o uring ${umnt}s, floor -o uring ${uflo}s"
	echo "$nat $mnt $flo $umnt $uflo" >>"$T/times"
	run=$((run + 1))
done
# row COLUMN LABEL [FLOOR-COLUMN]
row() {
	t=$(col "$1")
	printf '  %-30s %8.3f s %8.0f files/s' "$2" "$t" "$(awk "BEGIN {print $FILES / $t}")"
	[ -n "${3:-}" ] && printf ', time %.2fx the floor'"'"'s (target <= 2x)' "$(ratio "$1" "$3")"
	echo
}
echo
how=imported
[ "$MADE" = yes ] && how="made through the mount"
echo "rm -rf of $FILES files of 512 bytes in one directory ($how), then sync; medians of" \
	"$RUNS runs, ratios: medians of the per-run ratios:"
row 1 "native"
row 2 "zrfs -o writable, tree/" 3
row 3 "  floor"
if [ $uring = yes ]; then
	row 4 "zrfs -o writable,uring, tree/" 5
	row 5 "  floor -o uring"
else
	echo "  (-o uring not measured: /sys/module/fuse/parameters/enable_uring is not Y)"
fi
