#!/bin/sh
# tree/: the dataset as the tree its records' original names make. A
# directory import and a WebDataset tar import (nested keys, a class as
# text) show their source again: diff -r, find (names, sizes, kinds, link
# counts, times, permission bits), ls -l, du, rsync --dry-run and zr export dir all agree
# with it; a record's file by id keeps its name's extension (zr ls and zr
# export --by-id agree); the mount follows commits (a name changed, a
# record added, one removed, a value changed); names that would leave the
# tree are not shown; tree/ is a view, listed in the root only with
# -o list_views.
. "$(dirname "$0")/lib.sh"
: "${ZR:?ZR must name the zr binary}"

# what find sees of a tree: every path, its kind, a file's size, a
# directory's link count (find and du trust it)
walk() { (cd "$1" && find . -mindepth 1 -printf '%y %s %n %P\n' | awk '$1 == "d" {$2 = "-"} {print}' | sort); }
# the same tree on both sides, by every tool a user would try
agree() { # agree SRC MOUNTED-TREE WHAT
	diff -r "$1" "$2" >/dev/null || fail "$3: diff -r: $(diff -r "$1" "$2" 2>&1 | head -5)"
	walk "$1" >"$T/src.walk"
	walk "$2" >"$T/mnt.walk"
	diff "$T/src.walk" "$T/mnt.walk" >/dev/null || fail "$3: find differs: $(diff "$T/src.walk" "$T/mnt.walk" | head -5)"
	(cd "$1" && ls -lR --time-style=+ | awk '/^-/ {print $5, $NF} /:$/ {print}') >"$T/src.ls"
	(cd "$2" && ls -lR --time-style=+ | awk '/^-/ {print $5, $NF} /:$/ {print}') >"$T/mnt.ls"
	diff "$T/src.ls" "$T/mnt.ls" >/dev/null || fail "$3: ls -lR differs: $(diff "$T/src.ls" "$T/mnt.ls" | head -5)"
	[ "$(du -sb --apparent-size --exclude='*/' "$1" | cut -f1)" -gt 0 ] || fail "$3: du of the source"
	[ "$(cd "$1" && find . -type f -exec du -b {} + | sort -k2)" = "$(cd "$2" && find . -type f -exec du -b {} + | sort -k2)" ] ||
		fail "$3: du -b of the files differs"
	out=$(rsync -rlnic --no-times "$1/" "$2/") || fail "$3: rsync --dry-run failed"
	[ -z "$out" ] || fail "$3: rsync --dry-run would change: $(echo "$out" | head -3)"
}
# the files' modification times and permission bits too (kept by zr
# import beside the names): rsync -a finds no file to send
same_meta() { # same_meta SRC MOUNTED-TREE WHAT
	(cd "$1" && find . -type f -printf '%T@ %M %P\n' | sort) >"$T/src.times"
	(cd "$2" && find . -type f -printf '%T@ %M %P\n' | sort) >"$T/mnt.times"
	diff "$T/src.times" "$T/mnt.times" >/dev/null ||
		fail "$3: times differ: $(diff "$T/src.times" "$T/mnt.times" | head -4)"
	out=$(rsync -ain "$1/" "$2/" | grep -v '^\.d') || :
	[ -z "$out" ] || fail "$3: rsync -a would send: $(echo "$out" | head -3)"
}

# ---- a directory import: nested, unicode, empty, no extension, dot names
SRC=$T/src
mkdir -p "$SRC/train/cat" "$SRC/train/dog" "$SRC/val/ünï cödé" "$SRC/deep/a/b/c/d"
i=0
for f in train/cat/1.jpg train/cat/2.jpg train/dog/1.jpg "val/ünï cödé/x y.jpg" deep/a/b/c/d/e.jpg; do
	head -c $((i * 997 + 3)) /dev/urandom >"$SRC/$f"
	i=$((i + 1))
done
: >"$SRC/train/empty.jpg"
printf 'no extension' >"$SRC/README"
printf 'dot' >"$SRC/train/.hidden"
chmod 755 "$SRC/README"
chmod 600 "$SRC/train/cat/2.jpg"
chmod 640 "$SRC/train/.hidden"
truncate -s 8M "$SRC/val/disk.img" # sparse: 6 bytes at 4 MiB
printf 'middle' | dd of="$SRC/val/disk.img" bs=1 seek=4194304 conv=notrunc 2>/dev/null
"$ZR" import dir "$SRC" "$DS" >/dev/null 2>"$T/import.err" || fail "import dir: $(cat "$T/import.err")"
mount_ds
agree "$SRC" "$MNT/tree" "directory import"
same_meta "$SRC" "$MNT/tree" "directory import"
# a sparse file's holes are the dataset's: stat counts the blocks of its
# data, lseek finds them, and cp copies them as holes
[ "$(stat -c %b "$MNT/tree/val/disk.img")" -lt 1024 ] ||
	fail "a sparse file of 8 MiB takes $(stat -c %b "$MNT/tree/val/disk.img") blocks on the mount"
holes=$("$PY" -c 'if 1:
	import os, sys
	fd = os.open(sys.argv[1], os.O_RDONLY)
	hole = os.lseek(fd, 0, os.SEEK_HOLE)
	print(hole, os.lseek(fd, hole, os.SEEK_DATA))' "$MNT/tree/val/disk.img") || fail "lseek on the mount"
set -- $holes
[ "$1" -le 8192 ] && [ "$2" -ge $((4194304 - 8192)) ] && [ "$2" -le 4194304 ] ||
	fail "lseek: a sparse file's first hole at $1, its data at $2"
cp "$MNT/tree/val/disk.img" "$T/disk.copy" || fail "cp of a sparse file"
cmp -s "$T/disk.copy" "$SRC/val/disk.img" || fail "cp of a sparse file differs from it"
[ "$(stat -c %b "$T/disk.copy")" -lt 1024 ] || fail "cp of a sparse file wrote its holes"
# a file of tree/ is the record file itself: one inode, one page cache
id=$("$ZR" find "$DS" train/dog/1.jpg)
[ "$(stat -c %i "$MNT/tree/train/dog/1.jpg")" = "$(stat -c %i "$MNT/data/$id.jpg")" ] ||
	fail "tree/train/dog/1.jpg is not the record file data/$id.jpg"
# a view: reachable by name, not listed in the root (du, find and rsync -a of
# the mount see each record once)
ls "$MNT" | grep -qx tree && fail "tree/ is listed in the root without -o list_views"
[ -d "$MNT/tree" ] || fail "tree/ is not reachable by name"
[ ! -e "$MNT/tree/train/nope.jpg" ] || fail "a name no record has exists"
[ ! -e "$MNT/tree/train/cat/1.jpg/x" ] || fail "a file is a directory"
# zr export dir of the tree writes what the mount shows
"$ZR" export dir "$DS" "$T/exported" >/dev/null || fail "export dir"
diff -r "$T/exported" "$MNT/tree" >/dev/null || fail "zr export dir and tree/ differ"
same_meta "$SRC" "$T/exported" "zr export dir"
# a record keeps its own kind by id: README (no extension) among .jpg files
# is data/ID, not data/ID.jpg; zr ls, zr export --by-id and the mount agree
rid=$("$ZR" find "$DS" README)
[ -f "$MNT/data/$rid" ] && [ ! -e "$MNT/data/$rid.jpg" ] ||
	fail "README is not data/$rid: $(ls "$MNT/data" | tr '\n' ' ')"
cmp -s "$SRC/README" "$MNT/data/$rid" || fail "data/$rid does not hold README's bytes"
"$ZR" ls "$DS" data | sort >"$T/zr.ls" || fail "zr ls"
ls "$MNT/data" | sort >"$T/mnt.ls"
diff "$T/zr.ls" "$T/mnt.ls" >/dev/null || fail "zr ls and data/ differ: $(diff "$T/zr.ls" "$T/mnt.ls" | head -4)"
"$ZR" export dir "$DS" data "$T/byid" --by-id >/dev/null || fail "export --by-id"
diff -r "$T/byid" "$MNT/data" >/dev/null || fail "export --by-id and data/ differ: $(diff -r "$T/byid" "$MNT/data" 2>&1 | head -3)"

# ---- following commits: a name changed, a record added, one removed, a value
printf 'train/cat/3.jpg' >"$T/name"
"$ZR" set "$DS" "$id" --name="$T/name" >/dev/null || fail "zr set name"
mv "$SRC/train/dog/1.jpg" "$SRC/train/cat/3.jpg"
printf 'added' >"$T/v"
printf 'new/dir/added.txt' >"$T/n"
"$ZR" put "$DS" --data="$T/v" --name="$T/n" >/dev/null || fail "zr put"
mkdir -p "$SRC/new/dir" && cp "$T/v" "$SRC/new/dir/added.txt"
gone=$("$ZR" find "$DS" deep/a/b/c/d/e.jpg)
"$ZR" rm "$DS" "$gone" >/dev/null || fail "zr rm"
rm "$SRC/deep/a/b/c/d/e.jpg"
cat_id=$("$ZR" find "$DS" train/cat/1.jpg)
printf 'changed' >"$T/c"
"$ZR" set "$DS" "$cat_id" --data="$T/c" >/dev/null || fail "zr set data"
cp "$T/c" "$SRC/train/cat/1.jpg"
printf 'README.md' >"$T/rn" # its kind changes with its name, by id too
"$ZR" set "$DS" "$rid" --name="$T/rn" >/dev/null || fail "zr set name README.md"
mv "$SRC/README" "$SRC/README.md"
# the last commit shown: its name in tree/ and its file by id
shows_last() { [ -f "$MNT/tree/README.md" ] && [ -f "$MNT/data/$rid.md" ] && [ ! -e "$MNT/data/$rid" ]; }
within 10 shows_last || fail "10 s on, the mount does not show the last commit: $(ls "$MNT/tree" | tr '\n' ' ')"
agree "$SRC" "$MNT/tree" "after commits"
[ -f "$MNT/data/$rid.md" ] && [ ! -e "$MNT/data/$rid" ] ||
	fail "README.md is not data/$rid.md: $(ls "$MNT/data" | tr '\n' ' ')"
# the directories the import kept stay, as a directory stays when its
# last file goes (train/dog, deep/a/b/c/d: empty now)
[ -d "$MNT/tree/deep/a/b/c/d" ] && [ -z "$(ls -A "$MNT/tree/train/dog")" ] ||
	fail "a directory the dataset keeps went with its last file"
fusermount3 -u "$MNT" || fail "unmount"

# ---- with -o list_views the root lists it
mount_ds -o list_views
ls "$MNT" | grep -qx tree || fail "-o list_views does not list tree/"
fusermount3 -u "$MNT" || fail "unmount"

# ---- a WebDataset tar: nested keys, one file per field, a class as text
W=$T/wds
mkdir -p "$W/train/shard-a" "$W/val"
for i in 0 1 2; do
	head -c $((i * 301 + 5)) /dev/urandom >"$W/train/shard-a/s$i.jpg"
	printf '%d' $((i * 7 - 3)) >"$W/train/shard-a/s$i.cls"
done
printf '{"caption": "a cat"}' >"$W/train/shard-a/s1.json"
head -c 77 /dev/urandom >"$W/val/v0.jpg"
printf 12 >"$W/val/v0.cls"
printf 4 >"$W/top.cls"
(cd "$W" && tar cf "$T/w.tar" train/shard-a/s0.jpg train/shard-a/s0.cls train/shard-a/s1.jpg \
	train/shard-a/s1.cls train/shard-a/s1.json train/shard-a/s2.cls train/shard-a/s2.jpg \
	val/v0.jpg val/v0.cls top.cls) || fail "tar"
rm -rf "$DS"
"$ZR" import tar "$T/w.tar" "$DS" >/dev/null || fail "import tar"
mount_ds
agree "$W" "$MNT/tree" "tar import"
# tar keeps seconds: the tree shows them, as tar x restores them
(mkdir "$T/wx" && cd "$T/wx" && tar xf "$T/w.tar") || fail "tar x"
same_meta "$T/wx" "$MNT/tree" "tar import"
# a class changed: its text follows
printf '99' >"$T/cls99"
"$PY" -c 'import struct, sys; sys.stdout.buffer.write(struct.pack("<q", 99))' >"$T/cls.bin"
"$ZR" set "$DS" "$("$ZR" find "$DS" val/v0)" --cls="$T/cls.bin" >/dev/null || fail "zr set cls"
cls_is_99() { [ "$(cat "$MNT/tree/val/v0.cls")" = 99 ]; }
within 10 cls_is_99 || fail "a class set is not its text: $(cat "$MNT/tree/val/v0.cls")"
fusermount3 -u "$MNT" || fail "unmount"

# ---- names that would leave the tree are not shown, and the mount says so
"$PY" - "$T/evil.tar" <<'PY'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    for name in ("ok.jpg", "../escaped.jpg", "/etc/abs.jpg", "a/./b.jpg", "d.o.t/s.0.jpg"):
        i = tarfile.TarInfo(name); i.size = 1; t.addfile(i, io.BytesIO(b"x"))
PY
rm -rf "$DS"
"$ZR" import tar "$T/evil.tar" "$DS" >/dev/null 2>&1 || fail "import the evil tar"
mount_ds 2>"$T/err"
[ "$(cd "$MNT/tree" && find . | sort | tr '\n' ' ')" = ". ./d.o.t ./d.o.t/s.0.jpg ./ok.jpg " ] ||
	fail "unsafe names are shown: $(cd "$MNT/tree" && find . | sort | tr '\n' ' ')"
fusermount3 -u "$MNT" || fail "unmount"
grep -q "3 records' names make no file" "$T/err" || fail "unsafe names not counted at mount: $(cat "$T/err")"

# ---- a field called tree keeps its directory: no tree/ then
rm -rf "$DS"
"$ZR" import dir "$SRC" "$DS" --field tree >/dev/null 2>&1 || fail "import --field tree"
mount_ds
[ -d "$MNT/tree" ] && [ -n "$(ls "$MNT/tree" | grep -E '^[0-9]+(\.jpg)?$' | head -1)" ] ||
	fail "the field tree/ is not the field's directory"
fusermount3 -u "$MNT" || fail "unmount"
echo "ok: tree/ equals a directory import and a tar import, follows commits, hides unsafe names"
