#!/bin/sh
# A writable mount (-o writable): record files replaced with cp, dd, shell
# redirections, truncate and Python writes at random offsets; records
# appended or filled in by new files, committed in groups; values removed
# with rm; a record named by renaming its file; everything else refused
# with the errno a user expects; a second writer told which mount holds the
# dataset; a killed writer's new files dropped, said at most 10 lines a
# second; 3,000 new files open at once all stored; a shell loop of 1,000
# commands through a descriptor it keeps open, a few commits; every replaced value visible through the mount as soon as the
# writing program's close returns, and in zr cat; zr verify clean after;
# other users kept out of writing by the mode bits (allow_other) or out of
# the mount by the kernel. (The programs users edit with, compared with a
# native directory: write_programs.sh.)
. "$(dirname "$0")/lib.sh"
: "${ZR:?ZR must name the zr binary}"
make_ds --records 40
# ZRFS_WRAP: a command the daemon runs under (the valgrind build's memcheck)
${ZRFS_WRAP:-} "$ZRFS" "$DS" "$MNT" -o writable -f 2>"$T/log" &
pid=$!
timeout 60 sh -c "until mountpoint -q '$MNT'; do :; done" || fail "not mounted: $(cat "$T/log")"
n=$("$ZR" info "$DS" | awk '/^records/ {print $2}')
[ "$n" = 40 ] || fail "zr info says $n records"

# a read-only mount stays the default, and a second writer is refused
# with the mount named
mkdir "$T/mnt2"
"$ZRFS" "$DS" "$T/mnt2" -o writable 2>"$T/err" && { fusermount3 -u "$T/mnt2"; fail "a second rw mount"; }
grep -q "zrfs mount on $MNT" "$T/err" || fail "second rw mount said: $(cat "$T/err")"
printf x >"$T/x"
"$ZR" set "$DS" 0 --img="$T/x" 2>"$T/err" && fail "zr set while mounted rw"
grep -q "zrfs mount on $MNT" "$T/err" || fail "zr set said: $(cat "$T/err")"

# replace: cp over a record, then read it back at once, through the mount
# and in the dataset: the close returned once the commit was made
head -c 5000 /dev/urandom >"$T/a"
cp "$T/a" "$MNT/img/4.jpg" || fail "cp onto img/4.jpg"
same "$T/a" "$MNT/img/4.jpg"
"$ZR" cat "$DS" img 4 >"$T/got" || fail "zr cat img 4"
same "$T/a" "$T/got"
# fill in: record 3 has no image (mkds); a new file under its name is read
# back at once through the mount, and is in the dataset once its group is
# committed (sync DIR: at once)
cp "$T/a" "$MNT/img/3.jpg" || fail "cp onto img/3.jpg"
same "$T/a" "$MNT/img/3.jpg"
sync "$MNT/img" || fail "sync img"
"$ZR" cat "$DS" img 3 >"$T/got" || fail "zr cat img 3"
same "$T/a" "$T/got"
# a shell redirection (O_TRUNC), a shorter value on a flate field
printf 'short text' >"$MNT/txt/5.txt" || fail "> txt/5.txt"
[ "$(cat "$MNT/txt/5.txt")" = "short text" ] || fail "txt/5.txt: $(head -c 40 "$MNT/txt/5.txt")"
# dd into the middle without truncating: the rest of the value is kept
cp "$MNT/img/7.jpg" "$T/seven" 2>/dev/null || : >"$T/seven"
printf 'MIDDLE' | dd of="$MNT/img/7.jpg" bs=1 seek=2 conv=notrunc status=none || fail "dd into img/7.jpg"
"$PY" - "$T/seven" "$MNT/img/7.jpg" <<'EOF' || fail "patched img/7.jpg"
import sys
old = open(sys.argv[1], 'rb').read()
want = old[:2].ljust(2, b'\0') + b'MIDDLE' + old[8:]
got = open(sys.argv[2], 'rb').read()
assert got == want, (len(got), len(want))
EOF
# truncate(1) of a file not open
truncate -s 100 "$MNT/img/3.jpg" || fail "truncate img/3.jpg"
[ "$(stat -c %s "$MNT/img/3.jpg")" = 100 ] || fail "img/3.jpg after truncate: $(stat -c %s "$MNT/img/3.jpg")"
head -c 100 "$T/a" | cmp -s - "$MNT/img/3.jpg" || fail "img/3.jpg after truncate differs"

# Python: several writes at random offsets, a hole, fsync, then a read
"$PY" - "$MNT" <<'EOF' || fail "python writes"
import os, random, sys
p = sys.argv[1] + '/img/9.jpg'
rng = random.Random(1)
want = bytearray(30000)
fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
for _ in range(50):
    off = rng.randrange(0, 29000)
    b = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 1000)))
    os.pwrite(fd, b, off)
    want[off:off + len(b)] = b
end = max(i for i in range(len(want)) if want[i]) + 1 if any(want) else 0
os.pwrite(fd, b'\x01', 29999)   # the last byte: the size is 30000, a hole before
want[29999] = 1
os.fsync(fd)
os.close(fd)
got = open(p, 'rb').read()
assert got == bytes(want), 'random writes differ'
# a fixed-shape field takes exactly its size
lab = sys.argv[1] + '/lab/4'
with open(lab, 'wb') as f:
    f.write((1234).to_bytes(8, 'little'))
assert open(lab, 'rb').read() == (1234).to_bytes(8, 'little')
try:
    with open(lab, 'wb') as f:
        f.write(b'123')
    raise SystemExit('a 3-byte value of an i64 field was accepted')
except OSError as e:
    assert e.errno == 22, e
assert open(lab, 'rb').read() == (1234).to_bytes(8, 'little'), 'refused value changed the record'
fd = os.open(lab, os.O_WRONLY | os.O_TRUNC)
try:
    os.write(fd, b'x' * 9)
    raise SystemExit('a 9-byte write to an i64 field was accepted')
except OSError as e:
    assert e.errno == 27, e   # EFBIG
# nothing was written: this close publishes nothing; the last close offers
# what is left, 0 bytes, which the shape refuses (logged)
os.close(fd)
assert open(lab, 'rb').read() == (1234).to_bytes(8, 'little'), 'refused value changed the record'
EOF

# append: create FIELD/N.ext; a listing and the .npy view grow
head -c 777 /dev/urandom >"$T/new"
cp "$T/new" "$MNT/img/40.jpg" || fail "cp to img/40.jpg (append)"
same "$T/new" "$MNT/img/40.jpg"
[ -e "$MNT/img/41.jpg" ] && fail "img/41.jpg exists"
ls "$MNT/img" | grep -qx 40.jpg || fail "40.jpg not listed"
sync "$MNT/img" || fail "sync img"
[ "$("$ZR" info "$DS" | awk '/^records/ {print $2}')" = 41 ] || fail "not 41 records"
[ -e "$MNT/txt/40.txt" ] && fail "txt/40.txt should be missing"
"$PY" -c "
import numpy as np, sys
a = np.load('$MNT/vec.npy')
assert a.shape == (41, 4, 3), a.shape
" || fail "vec.npy after the append"
printf 'late' >"$MNT/txt/40.txt" || fail "filling in a missing value"
[ "$(cat "$MNT/txt/40.txt")" = late ] || fail "txt/40.txt"

# remove: the value goes missing, the id stays
rm "$MNT/img/3.jpg" || fail "rm img/3.jpg"
[ -e "$MNT/img/3.jpg" ] && fail "img/3.jpg still there"
[ "$("$ZR" info "$DS" | awk '/^records/ {print $2}')" = 41 ] || fail "rm renumbered"
rm "$MNT/img/3.jpg" 2>/dev/null && fail "rm of a missing value"

# refused: errno as a user expects (root bypasses mode bits: EPERM from us)
expect() { # expect ERRNO-TEXT COMMAND...: fails with that message
	want=$1
	shift
	"$@" 2>"$T/err" && fail "$* succeeded"
	grep -q "$want" "$T/err" || fail "$*: $(cat "$T/err")"
}
expect "not permitted" mkdir "$MNT/newfield"
# a directory in a field directory holds new files (named by their path)
mkdir "$MNT/img/d" || fail "mkdir img/d"
[ -d "$MNT/img/d" ] || fail "img/d is not a directory"
expect "not permitted" mkdir "$MNT/img/d/../../other"
rmdir "$MNT/img/d" || fail "rmdir img/d"
expect "not permitted" ln -s x "$MNT/img/s"
expect "not permitted" ln "$MNT/img/5.jpg" "$MNT/img/l"
"$PY" -c "
import errno, os, sys
try:
    os.rename('$MNT/img/5.jpg', '$MNT/txt/5.txt')
    sys.exit('a rename between field directories worked')
except OSError as e:
    assert e.errno == errno.EXDEV, e
" || fail "rename between field directories"
expect "not permitted" mv "$MNT/meta.json" "$MNT/m.json"
expect "not permitted" chmod 600 "$MNT/img/5.jpg"
expect "not permitted" chown 1:1 "$MNT/img/5.jpg"
expect "not permitted" sh -c "echo '{}' >'$MNT/meta.json'"
expect "not permitted" sh -c "echo x >'$MNT/vec.npy'"
expect "not permitted" sh -c "echo x >>'$MNT/.batches/seq,batch=4/epoch-0/0/ids'"
expect "not permitted" rm "$MNT/meta.json"
expect "not permitted" rmdir "$MNT/img"
touch -d 2001-01-01 "$MNT/img/5.jpg" || fail "touch -d (times are accepted and ignored)"
[ "$(stat -c %a "$MNT/img/5.jpg")" = 644 ] || fail "mode $(stat -c %a "$MNT/img/5.jpg")"
# a record's file renamed to a name no record has: its value moves to a new
# record (as cp and rm would: record 5's other fields stay), which the name
# reaches; the field directory lists it by its id
n=$("$ZR" info "$DS" | awk '/^records/ {print $2}')
cp "$MNT/img/5.jpg" "$T/five"
mv "$MNT/img/5.jpg" "$MNT/img/five.jpg" || fail "mv img/5.jpg img/five.jpg"
same "$T/five" "$MNT/img/five.jpg"
same "$T/five" "$MNT/img/$n.jpg"
[ -e "$MNT/img/5.jpg" ] && fail "img/5.jpg still there after mv"
[ -e "$MNT/txt/5.txt" ] || [ -e "$MNT/vec/5" ] || fail "record 5 lost its other fields"
ls "$MNT/img" | grep -qx five.jpg && fail "a record's other name is listed"

# other names append at the next id when stored; the name then goes away
n=$("$ZR" info "$DS" | awk '/^records/ {print $2}')
mkdir "$T/photos"
for k in 1 2 3 4 5; do head -c $((k * 300)) /dev/urandom >"$T/photos/cat$k.jpg"; done
cp -r "$T/photos/." "$MNT/img/" || fail "cp -r photos/. img/"
# new files are committed in a group within commit_ms (100 ms): wait for it
timeout 5 sh -c "until [ \"\$('$ZR' info '$DS' | awk '/^records/ {print \$2}')\" = $((n + 5)) ]; do :; done" ||
	fail "cp -r did not append 5 within 5 s"
timeout 5 sh -c "while ls '$MNT/img' | grep -qx cat1.jpg; do :; done" ||
	fail "img/cat1.jpg still listed after its group was committed"
for k in 1 2 3 4 5; do # in the order cp wrote them, which the log says
	line=$(grep "img/cat$k.jpg is now img/" "$T/log") || fail "no log line for cat$k.jpg"
	# the kernel is told of the new names just after the temporary ones
	# go, and it holds the miss of img/41.jpg looked up above: bounded
	timeout 5 sh -c "until [ -e '$MNT/img/${line##*img/}' ]; do :; done" ||
		fail "img/${line##*img/} did not appear"
	same "$T/photos/cat$k.jpg" "$MNT/img/${line##*img/}"
done
n=$((n + 5))

# rsync: a temporary ".NAME.XXXXXX" renamed onto the name; onto a record's
# name it replaces the value, onto another name it appends
mkdir "$T/src"
head -c 4000 /dev/urandom >"$T/src/0.jpg"
head -c 3000 /dev/urandom >"$T/src/new.jpg"
rsync -a "$T/src/" "$MNT/img/" || fail "rsync -a"
same "$T/src/0.jpg" "$MNT/img/0.jpg"
sync "$MNT/img" || fail "sync img after rsync"
same "$T/src/new.jpg" "$MNT/img/$n.jpg"
n=$((n + 1))
[ "$("$ZR" info "$DS" | awk '/^records/ {print $2}')" = $n ] || fail "rsync appended other than 1"
head -c 4100 /dev/urandom >"$T/src/0.jpg"
rsync -a --inplace "$T/src/0.jpg" "$MNT/img/0.jpg" || fail "rsync --inplace"
same "$T/src/0.jpg" "$MNT/img/0.jpg"
# a hidden file stays hidden until renamed; removed, it never was
printf tmp >"$MNT/img/.scratch" || fail "writing a hidden file"
[ "$(cat "$MNT/img/.scratch")" = tmp ] || fail "reading a hidden file back"
rm "$MNT/img/.scratch" || fail "rm of a hidden file"
[ -e "$MNT/img/.scratch" ] && fail ".scratch still there"
[ "$("$ZR" info "$DS" | awk '/^records/ {print $2}')" = $n ] || fail "a hidden file was stored"
# rename over an existing record moves the value; the source goes missing
cp "$MNT/img/0.jpg" "$T/zero"
mv "$MNT/img/0.jpg" "$MNT/img/1.jpg" || fail "mv img/0.jpg img/1.jpg"
same "$T/zero" "$MNT/img/1.jpg"
[ -e "$MNT/img/0.jpg" ] && fail "img/0.jpg still there after mv"
# hostile names are names like any other: appended, or refused by the kernel
printf 'a' >"$MNT/img/-rf" || fail "a name starting with -"
printf 'b' >"$MNT/img/$(printf 'new\nline')" || fail "a name with a newline"
printf 'c' >"$MNT/img/a..b" || fail "a name with dots"
expect "too long" sh -c "printf d >'$MNT/img/$(printf 'x%.0s' $(seq 300))'"
n=$((n + 3))
timeout 5 sh -c "until [ \"\$('$ZR' info '$DS' | awk '/^records/ {print \$2}')\" = $n ]; do :; done" ||
	fail "hostile names: not 3 appended within 5 s"

# everything the mount shows equals the dataset, which verifies clean
for f in img txt vec lab; do
	for p in "$MNT/$f"/*; do
		id=$(basename "$p" | cut -d. -f1)
		"$ZR" cat "$DS" "$f" "$id" | cmp -s - "$p" || fail "$p differs from zr cat"
	done
done
grep -q "lab/4: 3 bytes written, the field's shape takes 8: not stored" "$T/log" ||
	fail "no log line for a refused value: $(cat "$T/log")"
# a process killed with 300 new files open: none is stored, and the lines
# saying so are at most 10 a second, with one saying the rest were left out
# (the daemon's seconds are monotonic ones: a span of whole wall-clock
# seconds touches one more of them)
start=$(date +%s)
("$PY" - "$MNT/img" <<'PY'
import os, signal, sys
fds = [os.open(f"{sys.argv[1]}/killed{i}.bin", os.O_WRONLY | os.O_CREAT) for i in range(300)]
for fd in fds:
    os.write(fd, b"x")
os.kill(os.getpid(), signal.SIGKILL)
PY
	: # not exec'd: the subshell says "Killed", to /dev/null
) 2>/dev/null
sync "$MNT/img" || fail "sync after the killed writer"
secs=$(($(date +%s) - start + 1))
[ -z "$(ls "$MNT/img" | grep killed)" ] || fail "a killed writer's new files are listed"
n=$(grep -c "was killed: not stored" "$T/log")
[ "$n" -ge 1 ] && [ "$n" -le $((10 * (secs + 1))) ] || fail "$n lines for 300 files of a killed writer in $secs s"
grep -q "the next are left out" "$T/log" || fail "no line says lines were left out: $(tail -3 "$T/log")"
# a writer with 3,000 new files open at once (a split into shards): every
# one is taken and stored (the 1,025th was refused, ENOSPC)
n=$("$ZR" info "$DS" | awk '/^records/ {print $2}')
"$PY" - "$MNT/txt" <<'PY' || fail "3,000 new files open at once"
import os, sys
fds = [os.open(f"{sys.argv[1]}/shard{i}.txt", os.O_WRONLY | os.O_CREAT) for i in range(3000)]
for i, fd in enumerate(fds):
    os.write(fd, b"shard %d\n" % i)
for fd in fds:
    os.close(fd)
PY
sync "$MNT/txt" || fail "sync after 3,000 new files"
[ "$("$ZR" info "$DS" | awk '/^records/ {print $2}')" = $((n + 3000)) ] ||
	fail "3,000 new files open at once: $(("$("$ZR" info "$DS" | awk '/^records/ {print $2}')" - n)) stored"
# a shell loop writing through a descriptor it keeps open: bash duplicates
# it and closes the duplicate around every command; the value is whole,
# and published by the last close, not once per command (a commit each)
generation() { "$ZR" info "$DS" | sed -n 's/.*generation \([0-9]*\),.*/\1/p'; }
g=$(generation)
bash -c "exec 3>'$MNT/txt/1.txt'; for i in \$(seq 1000); do echo line \$i >&3; done; exec 3>&-" ||
	fail "a shell loop writing through fd 3"
seq 1000 | sed 's/^/line /' >"$T/lines"
same "$T/lines" "$MNT/txt/1.txt"
"$ZR" cat "$DS" txt 1 | cmp -s - "$T/lines" || fail "the loop's value is not the record's"
[ $(($(generation) - g)) -le 3 ] || fail "a shell loop of 1,000 commands made $(($(generation) - g)) commits"
# a redirection empties the file, duplicates it and closes it before its
# command writes: one commit each, at the command's close; ": > f" alone
# is empty at its close (cat reads it so at once)
g=$(generation)
for i in 1 2 3 4 5; do sh -c "printf %s $i >'$MNT/txt/2.txt'" || fail "printf > txt/2.txt"; done
[ "$(cat "$MNT/txt/2.txt")" = 5 ] || fail "txt/2.txt after 5 redirections: $(cat "$MNT/txt/2.txt")"
[ $(($(generation) - g)) -le 5 ] || fail "5 redirections made $(($(generation) - g)) commits"
out=$(sh -c ": >'$MNT/txt/2.txt'; cat '$MNT/txt/2.txt'") || fail ": > txt/2.txt; cat"
[ -z "$out" ] || fail ": > f; cat f printed: $out"
fusermount3 -u "$MNT" || fail "unmount"
wait $pid || fail "zrfs exited $?: $(tail -5 "$T/log")"
grep "never stored" "$T/log" && fail "files left staged (rsync's temporary files?)"
"$ZR" verify "$DS" >/dev/null || fail "zr verify after the writes"
# the writer lock went with the daemon
"$ZR" set "$DS" 0 --img="$T/x" >/dev/null || fail "zr set after unmounting"

# a serving thread polling for requests (-o poll_us, several threads
# serving): the same files, each where the log says
mkdir "$T/many"
i=0
while [ $i -lt 200 ]; do
	head -c $((i * 37 + 1)) /dev/urandom >"$T/many/m$i.bin"
	i=$((i + 1))
done
n=$("$ZR" info "$DS" | awk '/^records/ {print $2}')
${ZRFS_WRAP:-} "$ZRFS" "$DS" "$MNT" -o writable,poll_us=100 -f 2>"$T/log" &
pid=$!
timeout 60 sh -c "until mountpoint -q '$MNT'; do :; done" || fail "not mounted: $(cat "$T/log")"
cp -r "$T/many/." "$MNT/img/" || fail "cp -r with poll_us"
sync "$MNT/img" || fail "sync img with poll_us"
i=0
while [ $i -lt 200 ]; do
	to=$(grep "img/m$i.bin is now" "$T/log" | sed 's|.* is now img/||')
	[ -n "$to" ] || fail "m$i.bin: no log line saying where it went"
	same "$T/many/m$i.bin" "$MNT/img/$to"
	i=$((i + 1))
done
fusermount3 -u "$MNT" || fail "unmount"
wait $pid || fail "zrfs -o poll_us exited $?: $(tail -5 "$T/log")"
[ "$("$ZR" info "$DS" | awk '/^records/ {print $2}')" = $((n + 200)) ] || fail "not 200 appended"
"$ZR" verify "$DS" >/dev/null || fail "zr verify after the polling mount"

# other users: with allow_other the kernel checks the mode bits (record
# files 0644 and directories 0755, root's): another user reads, and can
# neither replace nor add a record; without allow_other they cannot enter
chmod 755 "$T"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
rw_mount() { # rw_mount OPTIONS: in the foreground, in the background (pid)
	"$ZRFS" "$DS" "$MNT" -o "$1" -f 2>"$T/log" &
	pid=$!
	timeout 60 sh -c "until mountpoint -q '$MNT'; do :; done" || fail "-o $1: $(cat "$T/log")"
}
rw_unmount() { fusermount3 -u "$MNT" && wait $pid || fail "unmount: $(tail -3 "$T/log")"; }
rw_mount writable,allow_other
"$ZR" cat "$DS" img 6 >"$T/want" || fail "zr cat"
as_nobody cat "$MNT/img/6.jpg" >"$T/got" || fail "another user cannot read"
same "$T/want" "$T/got"
expect "Permission denied" as_nobody sh -c "echo x >'$MNT/img/6.jpg'"
expect "Permission denied" as_nobody sh -c "echo x >'$MNT/img/new.jpg'"
rw_unmount
rw_mount writable
expect "Permission denied" as_nobody ls "$MNT/img"
rw_unmount
"$ZR" cat "$DS" img 6 >"$T/after" || fail "zr cat"
same "$T/want" "$T/after"
"$ZR" verify "$DS" >/dev/null || fail "zr verify after the other user's tries"

# close_is_eio FILE TEXT: TEXT written to FILE (emptied), its close fails
# with EIO, within 30 s
close_is_eio() {
	timeout -s KILL 60 "$PY" - "$1" "$2" <<'PYEOF'
import errno, os, sys, time
t0 = time.monotonic()
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC)
os.write(fd, sys.argv[2].encode())
try:
    os.close(fd)
    sys.exit('the close succeeded')
except OSError as e:
    assert e.errno == errno.EIO, e
assert time.monotonic() - t0 < 30, 'the close took %.0f s' % (time.monotonic() - t0)
PYEOF
}

# the dataset moved away under the mount: a close that waits for the mount
# to show its commit gets EIO within 10 s (zrfs(8)), not never, the log
# says why, and the mount unmounts; the commit itself was made, where the
# dataset is now
rw_mount writable
mv "$DS" "$DS.moved"
close_is_eio "$MNT/img/6.jpg" 'written after the move' ||
	fail "a close after the dataset moved: $(tail -3 "$T/log")"
grep -q "cannot show commit .*No such file or directory.*EIO" "$T/log" ||
	fail "the log does not say why the close failed: $(tail -3 "$T/log")"
rw_unmount
[ "$("$ZR" cat "$DS.moved" img 6)" = "written after the move" ] || fail "the commit is not in the moved dataset"
mv "$DS.moved" "$DS"

# the chunk the mount appends to, cut short from outside after a commit:
# the next value stored fails its close with EIO and the log names the
# chunk (it appended at the offset it remembered: the file grew back with
# a hole, and the values before read as zeros that zr verify called
# clean); the next goes to another chunk; the value cut reads EIO, never
# zeros, and zr verify names it
rw_mount writable
printf 'the last value appended' >"$MNT/img/7.jpg" || fail "write img/7.jpg"
c=$(ls -t "$DS/chunk" | head -1)
truncate -s $(($(stat -c %s "$DS/chunk/$c") - 4)) "$DS/chunk/$c"
close_is_eio "$MNT/img/8.jpg" 'after the cut' ||
	fail "a close after the chunk was cut: $(tail -3 "$T/log")"
grep -q "chunk/$c: .* cut short from outside" "$T/log" ||
	fail "the log does not name the chunk cut: $(tail -3 "$T/log")"
printf 'after the cut' >"$MNT/img/8.jpg" || fail "a write after the cut chunk was dropped"
[ "$(cat "$MNT/img/8.jpg")" = "after the cut" ] || fail "img/8.jpg does not read what was written"
cat "$MNT/img/7.jpg" >/dev/null 2>&1 && fail "the value cut short reads"
rw_unmount
"$ZR" verify "$DS" >"$T/verify" 2>&1 && fail "zr verify calls the cut chunk clean"
grep -q "img.* 7\b\|img/7\|7.*img" "$T/verify" || fail "zr verify does not name img 7: $(cat "$T/verify")"
