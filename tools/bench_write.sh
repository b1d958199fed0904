#!/bin/sh
# bench_write.sh - writing many small files through a writable zrfs mount:
# cp -r of FILES files of 8 KiB into a field directory, and rsync of
# RSYNC_FILES of them (temporary files renamed into place), against the
# same copy into a native directory and into the FUSE floor (zrfs-floor
# -o writable: the same requests answered with no work, so its time is what
# the kernel and the transport cost here), through /dev/fuse and, where the
# kernel offers it, io_uring (-o uring); and zr import dir of the tree.
# Every copy is followed by sync (and, on a mount, sync of the directory:
# it returns once every new file in it is committed). Last, a shell loop
# of REDIRS commands each writing a line to a record file through a
# descriptor the shell keeps open (exec 3>F; ... >&3; exec 3>&-: bash
# duplicates fd 3 and closes the duplicate around every command), into a
# native file, a record of a mount and the floor's file; with the commits
# it made.
#
# usage: tools/bench_write.sh ZR ZRFS [FILES] [RUNS] [DIR]
#   FILES files for cp -r (default 20000); RUNS runs of everything,
#   alternating (default 3); DIR scratch space on the filesystem to measure
#   (default /var/tmp). RSYNC_FILES (default 1000) files for rsync; FLOOR
#   the zrfs-floor binary (default: beside ZRFS). Prints each run and the
#   medians with ratios to the native copy and to the floor measured in the
#   same runs. REDIRS (default 1000) commands in the shell loop. Needs root
#   (or FUSE access). Daemons run in sessions of their own (setsid), as a
#   mounted one does.
. "$(dirname "$0")/bench_lib.sh"
set -eu
ZR=$1 ZRFS=$2 FILES=${3:-20000} RUNS=${4:-3} DIR=${5:-/var/tmp}
RSYNC_FILES=${RSYNC_FILES:-1000}
REDIRS=${REDIRS:-1000}
FLOOR=${FLOOR:-$(dirname "$ZRFS")/zrfs-floor}
bench_scratch "$DIR" write
mkdir "$T/src" "$T/rsrc"
i=0
while [ $i -lt "$FILES" ]; do
	head -c 8192 /dev/urandom >"$T/src/f$i.bin"
	[ $i -lt "$RSYNC_FILES" ] && cp "$T/src/f$i.bin" "$T/rsrc/"
	i=$((i + 1))
done
secs() { # COMMAND...: its wall time in seconds, then sync's included
	s=$(date +%s.%N)
	"$@" >/dev/null
	sync
	e=$(date +%s.%N)
	awk "BEGIN {print $e - $s}"
}
# on_mount WHAT SRC ZRFS|FLOOR OPTIONS...: seconds of WHAT (cp or rsync) of
# SRC into a fresh dataset (or floor) mounted with OPTIONS, then sync DIR;
# a dataset must hold every file as a record.
on_mount() {
	what=$1 src=$2 daemon=$3
	shift 3
	rm -rf "$T/ds"
	"$ZR" create "$T/ds" --field img:bytes:ext=bin >/dev/null
	if [ "$daemon" = zrfs ]; then
		setsid -w "$ZRFS" "$T/ds" "$T/mnt" -f "$@" 2>"$T/log" &
	else
		setsid -w "$FLOOR" "$T/mnt" -f -o field=img,records=0 "$@" 2>"$T/log" &
	fi
	pid=$!
	timeout 30 sh -c "until mountpoint -q '$T/mnt'; do :; done"
	if [ "$what" = cp ]; then
		secs sh -c "cp -r '$src/.' '$T/mnt/img/' && sync '$T/mnt/img'"
	else
		secs sh -c "rsync -r '$src/' '$T/mnt/img/' && sync '$T/mnt/img'"
	fi
	fusermount3 -u "$T/mnt"
	wait $pid
	[ "$daemon" = zrfs ] || return 0
	n=$("$ZR" info "$T/ds" | awk '/^records/ {print $2}')
	want=$(ls "$src" | wc -l)
	[ "$n" = "$want" ] || { echo "the mount holds $n records, not $want" >&2; exit 1; }
}
# redir FILE: the shell loop into FILE, timed (no sync: a close returns
# once what it published is committed)
redir() {
	loop="exec 3>'$1'; i=0; while [ \$i -lt $REDIRS ]; do echo line \$i >&3; i=\$((i + 1)); done"
	secs bash -c "$loop; exec 3>&-"
}
generation() { "$ZR" info "$T/rds" | sed -n 's/.*generation \([0-9]*\),.*/\1/p'; }
# redir_on ZRFS|FLOOR: the loop into record 0 of a one-record dataset (or
# the floor's one file) mounted writable; the commits it made in $T/commits
redir_on() {
	rm -rf "$T/rds"
	"$ZR" create "$T/rds" --field txt:bytes:ext=txt >/dev/null
	printf 'x' >"$T/one"
	"$ZR" put "$T/rds" --txt="$T/one" >/dev/null
	g=$(generation)
	if [ "$1" = zrfs ]; then
		setsid -w "$ZRFS" "$T/rds" "$T/mnt" -f -o writable 2>"$T/log" &
	else
		setsid -w "$FLOOR" "$T/mnt" -f -o field=txt,ext=txt,records=1,writable 2>"$T/log" &
	fi
	pid=$!
	timeout 30 sh -c "until mountpoint -q '$T/mnt'; do :; done"
	redir "$T/mnt/txt/0.txt"
	fusermount3 -u "$T/mnt"
	wait $pid
	[ "$1" = zrfs ] || return 0
	echo $(($(generation) - g)) >"$T/commits"
}
uring=no
[ "$(cat /sys/module/fuse/parameters/enable_uring 2>/dev/null)" = Y ] && uring=yes
run=1
: >"$T/times"
while [ $run -le "$RUNS" ]; do
	rm -rf "$T/native" "$T/imp" "$T/rnative"
	mkdir "$T/native" "$T/rnative"
	nat=$(secs cp -r "$T/src/." "$T/native/")
	mnt=$(on_mount cp "$T/src" zrfs -o writable)
	flo=$(on_mount cp "$T/src" floor -o writable)
	umnt=- uflo=-
	if [ $uring = yes ]; then
		umnt=$(on_mount cp "$T/src" zrfs -o writable,uring)
		uflo=$(on_mount cp "$T/src" floor -o writable,uring)
	fi
	imp=$(secs "$ZR" import dir "$T/src" "$T/imp" --field img)
	rnat=$(secs rsync -r "$T/rsrc/" "$T/rnative/")
	rmnt=$(on_mount rsync "$T/rsrc" zrfs -o writable)
	rflo=$(on_mount rsync "$T/rsrc" floor -o writable)
	dnat=$(redir "$T/redir.txt")
	dmnt=$(redir_on zrfs)
	dflo=$(redir_on floor)
	echo "run $run: cp -r: native ${nat}s, zrfs ${mnt}s, floor ${flo}s," \
		"zrfs -o uring ${umnt}s, floor -o uring ${uflo}s; zr import dir ${imp}s;" \
		"rsync: native ${rnat}s, zrfs ${rmnt}s, floor ${rflo}s;" \
		"shell loop: native ${dnat}s, zrfs ${dmnt}s ($(cat "$T/commits") commits)," \
		"floor ${dflo}s"
	echo "$nat $mnt $flo $umnt $uflo $imp $rnat $rmnt $rflo $dnat $dmnt $dflo" >>"$T/times"
	run=$((run + 1))
done
# row COLUMN LABEL FILES NATIVE-COLUMN [FLOOR-COLUMN TARGET]
row() {
	t=$(col "$1")
	printf '  %-30s %8.3f s %8.0f %s   vs native %.2fx' "$2" "$t" \
		"$(awk "BEGIN {print $3 / $t}")" "$UNIT" "$(ratio "$4" "$1")"
	[ -n "${5:-}" ] && printf ', vs the floor %.2fx (time %.2fx the floor'"'"'s%s)' \
		"$(ratio "$5" "$1")" "$(ratio "$1" "$5")" "${6:-}"
	echo
}
UNIT=files/s
echo
echo "$FILES files of 8 KiB by cp -r, $RSYNC_FILES by rsync; medians of $RUNS runs," \
	"ratios: medians of the per-run ratios (speed, >1 is faster):"
row 1 "native cp -r" "$FILES" 1
row 2 "zrfs -o writable, cp -r" "$FILES" 1 3 "; target <= 1.25x"
row 3 "  floor, cp -r" "$FILES" 1
if [ $uring = yes ]; then
	row 4 "zrfs -o writable,uring, cp -r" "$FILES" 1 5 "; target <= 1.25x"
	row 5 "  floor -o uring, cp -r" "$FILES" 1
else
	echo "  (-o uring not measured: /sys/module/fuse/parameters/enable_uring is not Y)"
fi
row 6 "zr import dir" "$FILES" 1
row 7 "native rsync" "$RSYNC_FILES" 7
row 8 "zrfs -o writable, rsync" "$RSYNC_FILES" 7 9 "; target >= 0.3x native"
row 9 "  floor, rsync" "$RSYNC_FILES" 7
echo "a shell loop of $REDIRS commands writing through a descriptor it keeps open" \
	"(the last run's commits: $(cat "$T/commits")):"
UNIT=cmds/s
row 10 "native file" "$REDIRS" 10
row 11 "zrfs -o writable, a record" "$REDIRS" 10 12 "; target <= 2x"
row 12 "  floor" "$REDIRS" 10
