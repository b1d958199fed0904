#!/bin/sh
# Options and errors: bad options, bad datasets and -o writable while another
# writer holds the dataset are refused before anything is mounted; a mount is
# read-only unless -o writable, whatever mount(8) passes; SIGTERM unmounts
# cleanly; unmounting under busy readers returns.
. "$(dirname "$0")/lib.sh"
make_ds --records 64

"$ZRFS" --help | grep -q '^usage: zrfs DATASET MOUNTPOINT' || fail "--help"
"$ZRFS" --version | grep -q '^zrfs ' || fail "--version"
"$ZRFS" "$DS" 2>"$T/err"
[ $? -eq 2 ] || fail "a missing mount point is not a usage error"
grep -q "^zrfs: no MOUNTPOINT given" "$T/err" || fail "a missing mount point: $(cat "$T/err")"
# a mount point that is a file, or that a zrfs mount holds already
: >"$T/file"
out=$("$ZRFS" "$DS" "$T/file" 2>&1) && fail "mounted on a regular file"
case $out in *"$T/file: not a directory"*) ;; *) fail "onto a file: $out" ;; esac
"$ZRFS" "$DS" "$MNT" || fail "mount"
out=$("$ZRFS" "$DS" "$MNT" 2>&1) && fail "a second zrfs stacked on the first"
case $out in *"a zrfs mount is there already"*) ;; *) fail "stacked: $out" ;; esac
[ "$(grep -c " $MNT fuse.zrfs" /proc/mounts)" = 1 ] || fail "two mounts on $MNT"
fusermount3 -u "$MNT" || fail "unmount"
# the writer lock is flock(2) on the dataset's directory: held by flock(1) here
out=$(flock "$DS" "$ZRFS" "$DS" "$MNT" -o writable 2>&1)
[ $? -eq 1 ] || fail "-o writable while another writer holds the dataset"
mountpoint -q "$MNT" && fail "mounted although the writer lock is held"
case $out in *"cannot mount read-write"*"another writer has the dataset open"*) ;;
*) fail "-o writable with the lock held: $out" ;; esac
out=$("$ZRFS" "$T/nonexistent" "$MNT" 2>&1)
[ $? -eq 1 ] || fail "a missing dataset: not exit 1 (zrfs(8), EXIT STATUS)"
case $out in *"$T/nonexistent: No such file or directory"*) ;; *) fail "missing dataset: $out" ;; esac
out=$("$ZRFS" "$DS" "$T/nodir" 2>&1)
[ $? -eq 1 ] || fail "a missing mount point directory: not exit 1"
case $out in *"$T/nodir: No such file or directory"*) ;; *) fail "missing mount point: $out" ;; esac
out=$("$ZRFS" "$DS" "$MNT" -o timeout=abc 2>&1) && fail "bad timeout accepted"
for o in readaround=1T readaround=-1 drop_behind=x prefetch=65 hold_ms=3600001; do
	out=$("$ZRFS" "$DS" "$MNT" -o $o 2>&1) && fail "-o $o accepted"
	case $out in *"${o%%=*}"*) ;; *) fail "-o $o: the error does not name the option: $out" ;; esac
done
# an operand too many, an option libfuse does not know: usage errors (2),
# said in one line that names them; a bad -o batches spec is said once
out=$("$ZRFS" "$DS" "$MNT" extra 2>&1)
[ $? -eq 2 ] || fail "an extra operand: not exit 2"
[ "$(echo "$out" | wc -l)" -eq 1 ] || fail "an extra operand: more than a line: $out"
case $out in *"unexpected argument 'extra'"*) ;; *) fail "an extra operand: $out" ;; esac
out=$("$ZRFS" "$DS" "$MNT" -o nosuchoption 2>&1)
[ $? -eq 2 ] || fail "an unknown -o: not exit 2"
case $out in *nosuchoption*) ;; *) fail "an unknown -o does not name it: $out" ;; esac
out=$("$ZRFS" "$DS" "$MNT" -o batches=shufle 2>&1)
[ $? -eq 2 ] || fail "-o batches=shufle: not exit 2"
[ "$(echo "$out" | grep -c shufle)" -eq 1 ] || fail "-o batches=shufle: said more than once: $out"
mountpoint -q "$MNT" && fail "something got mounted"

# read-only unless -o writable: mount(8) passes rw to every helper unless
# told ro (it cannot say whether rw was asked for), so rw, from mount(8) or
# given by hand, mounts read-only; given by hand, it says how to write
# (from mount(8), nothing: the user did not type it); ro and writable
# together are refused
writes_refused() { # writes_refused HOW
	grep -q " $MNT fuse.zrfs ro," /proc/mounts || fail "$1: not a read-only mount"
	out=$(sh -c "echo x >'$MNT/img/new.jpg'" 2>&1) && fail "$1: a write went through"
	case $out in *"Read-only file system"*) ;; *) fail "$1: a write: $out" ;; esac
	fusermount3 -u "$MNT" || fail "$1: unmount"
}
"$ZRFS" "$DS" "$MNT" -o rw 2>"$T/err" || fail "-o rw: $(cat "$T/err")"
grep -q "the mount is read-only: 'rw' does not make a zrfs mount writable; -o writable does" \
	"$T/err" || fail "-o rw says nothing: $(cat "$T/err")"
writes_refused "-o rw"
# (mount(8) resets PATH for its helpers, so mount.fuse3 is given the
# binary under test as PROGRAM#SOURCE, which is -t fuse.zrfs once installed)
for opts in "" "-o rw" "-o defaults"; do
	# shellcheck disable=SC2086
	mount -t fuse "$ZRFS#$DS" "$MNT" $opts 2>"$T/err" ||
		fail "mount -t fuse $opts: $(cat "$T/err")"
	grep -q "does not make a zrfs mount writable" "$T/err" &&
		fail "mount -t fuse $opts: a warning about mount(8)'s own rw: $(cat "$T/err")"
	writes_refused "mount -t fuse $opts"
done
mount -t fuse "$ZRFS#$DS" "$MNT" -o writable,commit_ms=60000,commit_size=1G 2>"$T/err" ||
	fail "mount -t fuse -o writable: $(cat "$T/err")"
grep -q " $MNT fuse.zrfs rw," /proc/mounts || fail "-o writable: not a read-write mount"
# unmounted, the daemon commits what it was given and exits; fusermount3
# returns before it does. A writable mount right after waits for it to let
# go of the dataset, and finds what it committed (256 MiB: the commit takes
# a while)
head -c 256M /dev/zero >"$MNT/img/64.jpg" || fail "writing img/64.jpg"
fusermount3 -u "$MNT" || fail "unmount"
"$ZRFS" "$DS" "$MNT" -o writable 2>"$T/err" ||
	fail "-o writable right after a writable mount's unmount: $(cat "$T/err")"
[ "$(stat -c %s "$MNT/img/64.jpg")" = $((256 << 20)) ] || fail "img/64.jpg not committed"
rm "$MNT/img/64.jpg" || fail "rm img/64.jpg"
# a daemon that takes longer (stopped here) is waited for, and the wait said
dpid=$(pgrep -nf "$DS $MNT") || fail "no daemon found"
kill -STOP "$dpid"
trap 'kill -CONT $dpid; cleanup' EXIT
timeout 20 fusermount3 -u "$MNT" || fail "unmount of a stopped daemon"
"$ZRFS" "$DS" "$MNT" -o writable 2>"$T/err" &
within 20 grep -q "waiting for pid $dpid, a zrfs mount of it that was unmounted" "$T/err" ||
	fail "the wait not said: $(cat "$T/err")"
mountpoint -q "$MNT" && fail "mounted while the last writer holds the dataset"
kill -CONT "$dpid"
trap cleanup EXIT
wait $! || fail "-o writable after the stopped daemon went on: $(cat "$T/err")"
[ -e "$MNT/img/64.jpg" ] && fail "img/64.jpg is back"
# while the mount is there, a zr command that writes is refused at once,
# told which mount holds the dataset; once it is unmounted, it waits for
# the daemon as a mount does (zr rm here), saying so
dpid=$(pgrep -nf "$DS $MNT") || fail "no daemon found"
out=$("$ZR" rm "$DS" 3 2>&1) && fail "zr rm while a writable mount holds the dataset"
case $out in *"another writer has the dataset open: pid $dpid (zrfs)"*"zrfs mount on $MNT"*) ;;
*) fail "zr rm beside a writable mount: $out" ;; esac
kill -STOP "$dpid"
trap 'kill -CONT $dpid; cleanup' EXIT
timeout 20 fusermount3 -u "$MNT" || fail "unmount of a stopped daemon"
n=$("$ZR" info "$DS" | awk '/^records/ {print $2}')
"$ZR" rm "$DS" 3 >/dev/null 2>"$T/err" &
within 20 grep -q "zr: rm: $DS: waiting for pid $dpid, a writer of it that is ending" "$T/err" ||
	fail "zr rm after the unmount: $(cat "$T/err")"
kill -0 $! 2>/dev/null || fail "zr rm did not wait for the daemon"
kill -CONT "$dpid"
trap cleanup EXIT
wait $! || fail "zr rm after the stopped daemon went on: $(cat "$T/err")"
[ "$("$ZR" info "$DS" | awk '/^records/ {print $2}')" = $((n - 1)) ] ||
	fail "zr rm removed no record: $("$ZR" info "$DS" | grep records)"
out=$("$ZRFS" "$DS" "$MNT" -o ro,writable 2>&1) && fail "ro,writable mounted"
case $out in *"ro and writable contradict"*) ;; *) fail "ro,writable: $out" ;; esac
mountpoint -q "$MNT" && fail "something got mounted"

# SIGTERM: the daemon unmounts and exits 0. The signals that stop it reach
# the thread that waits for them: every other thread blocks them (one
# taken by a helper thread, the committer's, the follower's, a
# prefetcher's, a ring's, left the session loop waiting and the daemon
# running), and no thread blocks SIGBUS, which a guarded read of a table
# cut short needs
"$ZRFS" "$DS" "$MNT" -f -o writable,prefetch=2 &
pid=$!
timeout 20 sh -c "until mountpoint -q '$MNT'; do :; done" || fail "not mounted"
cat "$MNT/.batches/seq,batch=8/epoch-0/0/ids" >/dev/null || fail "a batch"
for task in /proc/$pid/task/*; do
	[ "${task##*/}" = $pid ] && continue
	blocked=$(awk '/^SigBlk:/ {print $2}' "$task/status")
	# SIGHUP, SIGINT, SIGQUIT, SIGTERM: bits 0, 1, 2 and 14; never SIGBUS
	# (bit 6: a mapping cut short is a guarded fault, core/fault.c)
	[ $((0x$blocked & 0x4007)) = $((0x4007)) ] ||
		fail "thread ${task##*/} takes SIGTERM, SIGINT, SIGHUP or SIGQUIT: SigBlk $blocked"
	[ $((0x$blocked & 0x40)) = 0 ] ||
		fail "thread ${task##*/} blocks SIGBUS: SigBlk $blocked"
done
[ "$(ls /proc/$pid/task | wc -l)" -gt 3 ] || fail "no helper threads to look at"
kill -TERM $pid
wait $pid || fail "zrfs exited $? on SIGTERM"
mountpoint -q "$MNT" && fail "still mounted after SIGTERM"

# a working session in the foreground, every kind of file read, then
# fusermount3 -u: the daemon exits 0 and reports nothing on stderr (in the
# ASan build, LeakSanitizer checks at exit that everything was freed)
"$ZRFS" "$DS" "$MNT" -f -o cache=1M,prefetch=4,readaround=16K,drop_behind=1 2>"$T/daemon.err" &
pid=$!
timeout 20 sh -c "until mountpoint -q '$MNT'; do :; done" || fail "not mounted"
ls -lR "$MNT" >/dev/null || fail "ls -lR"
cat "$MNT"/img/* "$MNT"/txt/* "$MNT"/vec.npy "$MNT"/meta.json >/dev/null || fail "record reads"
e="$MNT/.batches/shuffle,seed=3,batch=16/epoch-1"
for k in 0 1 2; do cat "$e/$k"/* >/dev/null || fail "batch $k"; done
cat "$MNT/.batches/no-such-spec/epoch-0/0/ids" 2>/dev/null && fail "bad spec read"
fusermount3 -u "$MNT" || fail "fusermount3 -u"
wait $pid || fail "zrfs exited $? after unmount: $(cat "$T/daemon.err")"
grep -v "no-such-spec" "$T/daemon.err" | grep . && fail "the daemon reported the above"

# busy readers: unmounting returns, readers see errors and stop, daemon exits
mount_ds
dpid=$(pgrep -f "zrfs $DS $MNT") || fail "no daemon found"
for i in 1 2 3 4; do
	(while cat "$MNT"/img/* "$MNT"/txt/* >/dev/null 2>&1; do :; done) &
done
timeout 20 fusermount3 -uz "$MNT" || fail "unmount under load did not return"
wait # the readers stop once the files are gone
mountpoint -q "$MNT" && fail "still mounted"
timeout 20 tail --pid="$dpid" -f /dev/null || fail "the daemon did not exit"
true

# -o log=FILE: a detached daemon's log lines go to FILE (a machine without
# syslog has nowhere else to show why a spec under .batches is refused)
"$ZRFS" "$DS" "$MNT" -o log="$T/daemon.log" || fail "-o log"
ls "$MNT/.batches/seq,batch=0/epoch-0" 2>/dev/null && fail "a bad spec listed"
fusermount3 -u "$MNT" || fail "unmount"
grep -q '^zrfs: .batches/seq,batch=0: ' "$T/daemon.log" ||
	fail "no reason in the log file: $(cat "$T/daemon.log")"
out=$("$ZRFS" "$DS" "$MNT" -o log="$T/nodir/x.log" 2>&1) && fail "a log file that cannot be made"
case $out in *"log=$T/nodir/x.log: No such file or directory"*) ;; *) fail "log=: $out" ;; esac
