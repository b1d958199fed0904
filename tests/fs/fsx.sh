#!/bin/sh
# Random operations on files open for writing, done alike on a native
# directory and on a writable mount, every answer and every byte compared
# (tests/fs/fsx.py: pwrite, O_APPEND, truncate, mmap, fallocate,
# copy_file_range, fsync, renames with the file open, close and reopen):
# in tree/, several seeds, and in a field directory; then what the files
# hold once closed is there after a remount, and zr verify is clean.
# FSX_OPS: operations per run (2000).
. "$(dirname "$0")/lib.sh"
: "${ZR:?ZR must name the zr binary}"
OPS=${FSX_OPS:-2000}
mount_small_tree
for seed in 1 2 3; do
	rm -rf "$T/native" && mkdir "$T/native" || fail "a native directory"
	"$PY" "$HERE/fsx.py" "$T/native" "$MNT/tree" --ops "$OPS" --seed "$seed" ||
		fail "fsx.py in tree/, seed $seed, above $(said)"
done
mkdir "$T/native-data" || fail "a native directory"
"$PY" "$HERE/fsx.py" "$T/native-data" "$MNT/data" --ops "$OPS" --seed 4 --files 2 ||
	fail "fsx.py in a field directory, above $(said)"
unmount_wait
mount_ds
for f in "$T"/native/*; do
	cmp -s "$f" "$MNT/tree/${f##*/}" || fail "tree/${f##*/} differs after a remount"
done
# a field directory's new files are records by id after a remount
(cd "$MNT/data" && sha256sum -- * | cut -d' ' -f1 | sort) >"$T/data.sums" || fail "sha256sum"
for f in "$T"/native-data/*; do
	grep -qx "$(sha256sum "$f" | cut -d' ' -f1)" "$T/data.sums" ||
		fail "${f##*/}, written in data/, is no record after a remount"
done
fusermount3 -u "$MNT" || fail "unmount"
"$ZR" verify "$DS" >"$T/verify.out" 2>&1 || fail "zr verify: $(tail -5 "$T/verify.out")"
echo "ok: fsx.py's $OPS random operations, 3 seeds in tree/ and one in a field directory," \
	"as on a native directory, kept after a remount"
