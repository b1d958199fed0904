#!/bin/sh
# The mount shows every present record of every field with its exact bytes
# and size; cp -r and rsync -a of a field directory reproduce the files;
# names, sizes and inode numbers are stable; meta.json is the dataset's.
. "$(dirname "$0")/lib.sh"
make_ds
mount_ds

[ "$(ls "$MNT" | tr '\n' ' ')" = "img img.present.npy lab lab.npy lab.present.npy meta.json txt txt.present.npy vec vec.npy vec.present.npy " ] ||
	fail "root lists: $(ls "$MNT")"
same "$DS/meta.json" "$MNT/meta.json"
for f in img txt vec lab; do
	diff -r "$REF/$f" "$MNT/$f" >/dev/null || fail "field $f differs from the reference"
	# listings and sizes (ls -l) agree, name for name
	(cd "$REF/$f" && ls -l --time-style=+ | awk 'NR > 1 {print $5, $NF}' | sort) >"$T/ref.ls"
	(cd "$MNT/$f" && ls -l --time-style=+ | awk 'NR > 1 {print $5, $NF}' | sort) >"$T/mnt.ls"
	same "$T/ref.ls" "$T/mnt.ls"
done
# missing records are absent, empty ones present with size 0
[ ! -e "$MNT/img/3.jpg" ] || fail "missing record img/3 is listed"
[ -f "$MNT/img/0.jpg" ] && [ ! -s "$MNT/img/0.jpg" ] || fail "empty record img/0"
cp -r "$MNT/txt" "$T/copy"
diff -r "$REF/txt" "$T/copy" >/dev/null || fail "cp -r of txt differs"
rsync -a "$MNT/img/" "$T/rsynced/"
diff -r "$REF/img" "$T/rsynced" >/dev/null || fail "rsync -a of img differs"
# a second rsync finds nothing to do (sizes and times are stable)
[ -z "$(rsync -ai "$MNT/img/" "$T/rsynced/")" ] || fail "second rsync copied again"
ino1=$(stat -c %i "$MNT/txt/11.txt")
echo 2 >/proc/sys/vm/drop_caches # forget the kernel's inodes and dentries
ino2=$(stat -c %i "$MNT/txt/11.txt")
[ "$ino1" = "$ino2" ] || fail "inode number changed: $ino1 -> $ino2"
[ "$(stat -c %Y "$MNT/img/1.jpg")" = "$(stat -c %Y "$DS/meta.json")" ] ||
	fail "record mtime is not the dataset's"
[ "$(stat -c %a "$MNT/img/1.jpg")" = 644 ] || fail "record files are not 0644"
[ "$(stat -c %a "$MNT/img")" = 755 ] || fail "directories are not 0755"
touch "$MNT/img/1.jpg" 2>/dev/null && fail "a record file of a read-only mount took a write"

# another user (allow_other) copies a field with cp -a and rsync -a, and
# can remove the copies again, as copies of any read-only tree
fusermount3 -u "$MNT" || fail "unmount"
mount_ds -o allow_other
chmod 755 "$T"
mkdir "$T/theirs" && chown 65534:65534 "$T/theirs"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
as_nobody cp -a "$MNT/txt" "$T/theirs/cp" || fail "another user's cp -a"
as_nobody rsync -a "$MNT/img/" "$T/theirs/rsync/" || fail "another user's rsync -a"
diff -r "$REF/txt" "$T/theirs/cp" >/dev/null || fail "their cp -a differs"
as_nobody rm -r "$T/theirs/cp" "$T/theirs/rsync" || fail "another user cannot remove their copies"
if as_nobody sh -c "echo x >'$MNT/txt/11.txt'" 2>/dev/null; then fail "another user wrote a record"; fi

# the views (.batches, by) are reachable by name but not listed in the
# root: find, du and rsync -a of the whole mount see each record once
fusermount3 -u "$MNT" || fail "unmount"
mount_ds
ls -a "$MNT" | grep -qx '.batches' && fail ".batches is listed by default"
[ -d "$MNT/.batches" ] || fail ".batches is not reachable by name"
find "$MNT" -type f | grep -q '/\.batches/\|/by/' && fail "find walked into a view"
n=$(find "$MNT" -type f | wc -l)
want=$(($(find "$REF" -mindepth 2 -type f | wc -l) + 1 + $(ls "$MNT" | grep -c '\.npy$')))
[ "$n" = "$want" ] || fail "find sees $n files, the dataset has $want"
fusermount3 -u "$MNT" || fail "unmount"
mount_ds -o list_views
ls -a "$MNT" | grep -qx '.batches' || fail ".batches is not listed with -o list_views"
