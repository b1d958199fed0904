#!/bin/sh
# The FUSE floor the benchmarks measure zrfs against (zrfs-floor, `zr bench
# fs`) shows a field directory as zrfs shows the same dataset's: the same
# names, and, as stat(1) and ls(1) see them, the same sizes, blocks, I/O
# block size, link counts, owners, modes and types (what makes the kernel
# and a reading program behave alike); the same misses; and each of its
# files reads as that many zeros. On the fs.floor.uring run both mounts
# serve through io_uring rings.
. "$(dirname "$0")/lib.sh"
: "${ZR:?ZR must name the zr binary}"

FLOOR=$(dirname "${ZRFS_PLAIN:-$ZRFS}")/zrfs-floor
[ -x "$FLOOR" ] || fail "no zrfs-floor next to $ZRFS"
FMNT=$T/floor
mkdir "$FMNT"
trap 'mountpoint -q "$FMNT" && fusermount3 -u "$FMNT"; cleanup' EXIT

N=300
SIZE=3000
head -c $((N * SIZE)) /dev/urandom >"$T/flat"
"$ZR" import flat "$T/flat" "$DS" --record-size $SIZE >"$T/import.out" 2>&1 ||
	fail "zr import: $(cat "$T/import.out")"
mount_ds
opts=records=$N,size=$SIZE,field=data,ext=
[ "${ZRFS_TRANSPORT:-}" = uring ] && opts=$opts,uring
"$FLOOR" "$FMNT" -o "$opts" || fail "zrfs-floor -o $opts exited $?"
mountpoint -q "$FMNT" || fail "zrfs-floor returned but $FMNT is not mounted"

# stat of the directory and of every name ls gives, in ls's order
show() {
	(cd "$1/data" && stat -c '%n %s %b %B %o %h %u %g %a %F' . $(ls)) ||
		fail "stat under $1/data failed"
}
show "$MNT" >"$T/zrfs.stat"
show "$FMNT" >"$T/floor.stat"
[ "$(wc -l <"$T/zrfs.stat")" -eq $((N + 1)) ] || fail "zrfs shows $(wc -l <"$T/zrfs.stat") names"
diff "$T/zrfs.stat" "$T/floor.stat" >"$T/diff" ||
	fail "zrfs and the floor differ: $(head "$T/diff")"

# the same misses: past the end, a leading zero, a name that is no number
for name in $N 007 x 1.bin; do
	z=0 f=0
	stat "$MNT/data/$name" >/dev/null 2>&1 || z=$?
	stat "$FMNT/data/$name" >/dev/null 2>&1 || f=$?
	[ $z -ne 0 ] || fail "zrfs shows data/$name"
	[ $f -ne 0 ] || fail "the floor shows data/$name, which zrfs does not"
done

# the floor's files are zeros of the record's size; zrfs's are the records
head -c $SIZE /dev/zero >"$T/zeros"
for i in 0 1 $((N - 1)); do
	same "$FMNT/data/$i" "$T/zeros"
	tail -c +$((i * SIZE + 1)) "$T/flat" | head -c $SIZE >"$T/want"
	same "$MNT/data/$i" "$T/want"
done

# -o writable takes what rm -rf does (tools/bench_remove.sh): each name
# removed is gone, and the directory once nothing is left in it
fusermount3 -u "$FMNT" || fail "unmount of the floor"
"$FLOOR" "$FMNT" -o "$opts,writable" || fail "zrfs-floor -o $opts,writable exited $?"
rm "$FMNT/data/7" || fail "rm of a floor's file"
[ ! -e "$FMNT/data/7" ] || fail "the floor's data/7 is still there"
[ "$(ls "$FMNT/data" | wc -l)" -eq $((N - 1)) ] || fail "the floor lists $(ls "$FMNT/data" | wc -l)"
rm "$FMNT/data/7" 2>/dev/null && fail "a second rm of data/7 succeeded"
rmdir "$FMNT/data" 2>/dev/null && fail "rmdir of a directory with files in it succeeded"
rm -rf "$FMNT/data" || fail "rm -rf of the floor's directory"
[ ! -e "$FMNT/data" ] && [ -z "$(ls "$FMNT")" ] || fail "the floor's data/ is still there"
echo "ok: zrfs-floor shows data/ of $N records as zrfs does, and takes rm -rf"
