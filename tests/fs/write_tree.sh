#!/bin/sh
# tree/ on a writable mount: written by name. The programs of the
# write_programs matrix, run in tree/ (write_programs.py --tree); rsync -a
# of a changed tree lands by name and a second run sends nothing (rsync -ai
# prints nothing), for a directory import and a WebDataset tar import (two
# new members of one key make one record; a class rewritten as text);
# directories made, removed, renamed (EXDEV: mv copies), emptied (they stay
# until removed: rm -r works); the last file of a record removed removes the
# record; a key's file whose extension is no
# field is refused; after unmounting zr export dir equals what the mount
# showed. A read-only mount refuses every change.
. "$(dirname "$0")/lib.sh"
: "${ZR:?ZR must name the zr binary}"
unmount_all() {
	for m in "$T"/e*/mnt "$T"/e*/ro; do
		mountpoint -q "$m" 2>/dev/null && { fusermount3 -u "$m" 2>/dev/null || umount -l "$m"; }
	done
	cleanup
}
trap unmount_all EXIT

"$PY" "$(dirname "$0")/write_programs.py" "$ZR" "$ZRFS" "$T" --tree || fail "write_programs.py --tree"

rw_mount() { "$ZRFS" "$DS" "$MNT" -o writable,log="$T/log" "$@" || fail "zrfs -o writable $*"; }
records() { "$ZR" info "$DS" | awk '/^records/ {print $2}'; }
# rsync -a twice into tree/: the first lands (by name), the second prints nothing
rsync_twice() { # rsync_twice SRC WHAT
	rsync -a "$1/" "$MNT/tree/" || fail "$2: rsync -a"
	out=$(rsync -ai "$1/" "$MNT/tree/") || fail "$2: rsync -ai"
	[ -z "$out" ] || fail "$2: a second rsync -a sent: $(echo "$out" | head -4)"
	diff -r "$1" "$MNT/tree" >/dev/null || fail "$2: the tree differs: $(diff -r "$1" "$MNT/tree" | head -3)"
}

# ---- a directory import
SRC=$T/src
mkdir -p "$SRC/a/b" "$SRC/c"
for f in a/b/x.txt a/y.txt c/z.bin top; do head -c 300 /dev/urandom >"$SRC/$f"; done
"$ZR" import dir "$SRC" "$DS" >/dev/null 2>&1 || fail "import dir"
cp -a "$SRC" "$T/src2"
head -c 100 /dev/urandom >"$T/src2/a/y.txt" # changed
mkdir -p "$T/src2/new/deeper"
printf 'new one\n' >"$T/src2/new/deeper/n1.txt"
printf 'new two\n' >"$T/src2/a/n2.txt"
rw_mount
rsync_twice "$T/src2" "directory import"
# a name made or removed in a directory of tree/ gives it the time now, as
# on a native directory, not when the commit comes (rsync -a sets a
# directory's time once its files are in, and must find it so after)
for d in "$MNT/tree/a" "$T/src2/a"; do
	touch -d '1 hour ago' "$d" || fail "touch $d"
	hour=$(stat -c %Y "$d")
	printf x >"$d/fresh.txt" || fail "writing $d/fresh.txt"
	[ "$(stat -c %Y "$d")" -gt "$hour" ] || fail "a file made in $d left its time"
	touch -d '1 hour ago' "$d"
	rm "$d/fresh.txt" || fail "rm $d/fresh.txt"
	[ "$(stat -c %Y "$d")" -gt "$hour" ] || fail "a file removed from $d left its time"
done
# a directory made stays while the mount lives, and goes by rmdir
mkdir "$MNT/tree/empty" || fail "mkdir"
[ -d "$MNT/tree/empty" ] || fail "a directory made is not there"
rmdir "$MNT/tree/empty" || fail "rmdir of an empty directory"
[ ! -e "$MNT/tree/empty" ] || fail "a directory removed is still there"
rmdir "$MNT/tree/a" 2>"$T/err" && fail "rmdir of a directory with files"
grep -q "not empty" "$T/err" || fail "rmdir of a directory with files said: $(cat "$T/err")"
# renaming a directory: mv copies and removes (EXDEV), the names follow
mv "$MNT/tree/new" "$MNT/tree/renamed" || fail "mv of a directory"
mv "$T/src2/new" "$T/src2/renamed"
# a directory whose last file goes stays until removed, as on any
# filesystem (it went with its last record): a file written into it next,
# rm -r, mv of a directory of imported files (mv copies, then removes)
for r in "$T/src2" "$MNT/tree"; do
	rm "$r/a/b/x.txt" || fail "rm $r/a/b/x.txt"
	[ -d "$r/a/b" ] || fail "$r/a/b went with its last file"
	printf 'after\n' >"$r/a/b/after.txt" || fail "a file into $r/a/b, emptied"
	mv "$r/c" "$r/c2" || fail "mv $r/c $r/c2"
	rm -r "$r/a/b" || fail "rm -r $r/a/b"
done
[ ! -e "$MNT/tree/a/b" ] && [ ! -e "$MNT/tree/c" ] || fail "rm -r or mv left $(ls -R "$MNT/tree")"
# rm of a record's only file removes the record
sync "$MNT/tree" || fail "sync" # what mv copied is committed: counted
n=$(records)
rm "$MNT/tree/top" || fail "rm tree/top"
rm "$T/src2/top"
sync "$MNT/tree" || fail "sync"
diff -r "$T/src2" "$MNT/tree" >/dev/null || fail "after mv and rm: $(diff -r "$T/src2" "$MNT/tree" | head -3)"
# between tree/ and a field's directory: mv copies (EXDEV)
fusermount3 -u "$MNT" || fail "unmount"
[ "$(records)" = $((n - 1)) ] || fail "rm of a record's last file left $(records) records, not $((n - 1))"
"$ZR" export dir "$DS" "$T/out1" >/dev/null || fail "export dir"
diff -r "$T/src2" "$T/out1" >/dev/null || fail "zr export dir differs from the tree written: $(diff -r "$T/src2" "$T/out1" | head -3)"
"$ZR" find "$DS" renamed/deeper/n1.txt >/dev/null || fail "zr find of a file written by name"

# ---- a read-only mount refuses changes
"$ZRFS" "$DS" "$MNT" || fail "zrfs"
sh -c "echo x >'$MNT/tree/a/ro.txt'" 2>"$T/err" && fail "a read-only mount took a new file"
grep -q "Read-only" "$T/err" || fail "read-only mount said: $(cat "$T/err")"
fusermount3 -u "$MNT" || fail "unmount"

# ---- a WebDataset tar: one file per member, one record per key
W=$T/w
mkdir -p "$W/train" "$W/val"
for i in 0 1 2; do
	head -c $((i * 100 + 10)) /dev/urandom >"$W/train/s$i.jpg"
	printf '%d' "$i" >"$W/train/s$i.cls"
done
head -c 50 /dev/urandom >"$W/val/v0.jpg"
printf 7 >"$W/val/v0.cls"
# an hour ago: a change made now is newer (rsync's quick check compares
# sizes and whole seconds)
find "$W" -exec touch -d '1 hour ago' {} +
(cd "$W" && tar cf "$T/w.tar" train/s0.jpg train/s0.cls train/s1.jpg train/s1.cls train/s2.jpg \
	train/s2.cls val/v0.jpg val/v0.cls) || fail "tar"
rm -rf "$DS" "$W"
mkdir "$W" && (cd "$W" && tar xf "$T/w.tar") || fail "tar x"
"$ZR" import tar "$T/w.tar" "$DS" >/dev/null || fail "import tar"
n=$(records)
cp -a "$W" "$T/w2"
head -c 99 /dev/urandom >"$T/w2/train/s9.jpg" # a new key, two members
printf 5 >"$T/w2/train/s9.cls"
printf 6 >"$T/w2/val/v0.cls"                   # a class rewritten
mkdir "$T/w2/test" && head -c 10 /dev/urandom >"$T/w2/test/t0.jpg"
rw_mount
rsync_twice "$T/w2" "tar import"
# a file of a key whose extension is no field: refused
sh -c "printf x >'$MNT/tree/train/s0.png'" 2>"$T/err" && fail "a file no field can store was taken"
grep -q "not permitted" "$T/err" || fail "s0.png said: $(cat "$T/err")"
# moving a member between keys: the value goes, the other members stay
mv "$MNT/tree/train/s1.jpg" "$MNT/tree/train/s2.jpg" || fail "mv between keys"
mv "$T/w2/train/s1.jpg" "$T/w2/train/s2.jpg"
diff -r "$T/w2" "$MNT/tree" >/dev/null || fail "after mv between keys: $(diff -r "$T/w2" "$MNT/tree" | head -3)"
# umount returns before the daemon commits what waits (zrfs(8)): sync first
sync "$MNT/tree" || fail "sync"
fusermount3 -u "$MNT" || fail "unmount"
[ "$(records)" = $((n + 2)) ] || fail "the tar's tree: $(records) records, not $((n + 2)) (s9, t0)"
[ "$("$ZR" cat "$DS" cls "$("$ZR" find "$DS" val/v0)" | od -An -td8 | tr -d ' ')" = 6 ] ||
	fail "a class written as text is not stored as the class"
"$ZR" export dir "$DS" "$T/out2" >/dev/null || fail "export dir of the tar's tree"
diff -r "$T/w2" "$T/out2" >/dev/null || fail "zr export dir differs: $(diff -r "$T/w2" "$T/out2" | head -3)"
grep -q "never stored\|not stored" "$T/log" && fail "the daemon dropped something: $(cat "$T/log")"

# two programs each making 50 files in a directory of its own, listing
# them, removing them and the directory, 30 times, in tree/ and in a field
# directory: every file listed is removed and every emptied directory
# goes (a name resolved while the other's removal moved the last record
# into its hole was ENOENT, and its directory then ENOTEMPTY)
rm -rf "$DS" "$T/one"
mkdir "$T/one" && printf a >"$T/one/a.txt"
"$ZR" import dir "$T/one" "$DS" >/dev/null || fail "import dir"
rw_mount
for dir in tree data; do
	"$PY" - "$MNT/$dir" <<'PYEOF' || fail "creating and removing beside another program in $dir/"
import os, sys, threading
errors = []
def program(w):
    for r in range(30):
        sub = '%s/p%d_%d' % (sys.argv[1], w, r)
        os.mkdir(sub)
        for i in range(50):
            with open('%s/f%d.txt' % (sub, i), 'w') as f:
                f.write('%d %d %d' % (w, r, i))
        # a listing can still miss a file a group commits meanwhile (its
        # position moves from the new files' to the records': issue 54
        # item 3, not fixed yet): list again until nothing is left
        for _ in range(5):
            names = os.listdir(sub)
            if not names:
                break
            for name in names:
                try:
                    os.unlink('%s/%s' % (sub, name))
                except OSError as e:
                    errors.append('unlink of %s/%s, listed: %s' % (sub, name, e))
        try:
            os.rmdir(sub)
        except OSError as e:
            errors.append('rmdir of %s, emptied: %s (it lists %s)' % (sub, e, os.listdir(sub)))
threads = [threading.Thread(target=program, args=(w,)) for w in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
if errors:
    sys.exit('%d errors: %s' % (len(errors), '; '.join(errors[:3])))
PYEOF
done
sync "$MNT/tree" || fail "sync"
fusermount3 -u "$MNT" || fail "unmount"
"$ZR" verify "$DS" >/dev/null || fail "zr verify after creating and removing"

# ---- many removals: each commit's journal holds what came since the
# tables were last brought up to date, not every change since the mount
# (4 entries of 32 bytes a removal: 1,500 removals wrote 190 KB at each of
# the last commits; the tables take them past 1,024 entries). Removals are
# committed in groups, by time: how many removals the last journals hold
# depends on how fast rm runs (up to 46 KB under ASan beside a CI; the
# build before hard links too reached 39 KB), so the bound is half of what
# all 1,222 write (156 KB), which a journal of every change since the
# mount passes
rm -rf "$T/many" "$DS"
mkdir -p "$T/many/d"
i=0
while [ $i -lt 2000 ]; do echo "file $i" >"$T/many/d/f$i"; i=$((i + 1)); done
"$ZR" import dir "$T/many" "$DS" >/dev/null || fail "import of 2,000 files"
rw_mount
rm -f "$MNT"/tree/d/f1* || fail "rm of 1,111 files"
sync "$MNT/tree" || fail "sync"
rm -f "$MNT"/tree/d/f2* || fail "rm of 111 files"
[ "$(ls "$MNT/tree/d" | wc -l)" = 778 ] || fail "$(ls "$MNT/tree/d" | wc -l) files left, not 778"
sync "$MNT/tree" || fail "sync"
biggest=$(find "$DS" -maxdepth 1 -name 'journal.*' -printf '%s\n' | sort -n | tail -1)
[ "${biggest:-0}" -le 78000 ] || fail "after 1,222 removals a journal is $biggest bytes"
[ "$(records)" = 778 ] || fail "$(records) records after the removals and a sync, not 778"
fusermount3 -u "$MNT" || fail "unmount"
"$ZR" verify "$DS" >/dev/null || fail "zr verify after 1,222 removals"
"$ZR" export dir "$DS" "$T/many.out" >/dev/null || fail "export after the removals"
rm -f "$T"/many/d/f1* "$T"/many/d/f2*
diff -r "$T/many" "$T/many.out" >/dev/null || fail "the export differs from what is left"

echo "ok: programs in tree/, rsync -a twice, directories, keys, exports, removals side by side," \
	"many removals"
