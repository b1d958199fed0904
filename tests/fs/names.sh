#!/bin/sh
# Random operations on names, done alike on a native directory and on a
# writable mount's tree/, every answer and the whole tree compared
# (tests/fs/names.py: create, write, truncate, unlink, mkdir, rmdir, rename,
# link, symlink, mkfifo, chmod, descriptors held open across them, fsync of
# directories): several seeds; then the tree the last one left is the same
# after a remount and in what zr export dir writes, and zr verify is clean.
# NAMES_OPS: operations per seed (1500). On a difference names.py prints the
# operations that led to it, shortened to the fewest it finds, which
# `names.py --replay FILE` runs again one by one.
. "$(dirname "$0")/lib.sh"
: "${ZR:?ZR must name the zr binary}"
OPS=${NAMES_OPS:-1500}
mount_small_tree
for seed in 1 2 3 4; do
	rm -rf "$T/native" && mkdir "$T/native" "$MNT/tree/s$seed" || fail "directories"
	"$PY" "$HERE/names.py" "$T/native" "$MNT/tree/s$seed" --ops "$OPS" --seed "$seed" ||
		fail "names.py, seed $seed, above $(said)"
done
unmount_wait
mount_ds
"$PY" "$HERE/names.py" --compare "$T/native/run" "$MNT/tree/s4/run" >"$T/compare" ||
	fail "after a remount: $(cat "$T/compare")"
fusermount3 -u "$MNT" || fail "unmount"
"$ZR" export dir "$DS" "$T/out" >"$T/export.out" 2>&1 || fail "zr export dir: $(cat "$T/export.out")"
"$PY" "$HERE/names.py" --compare "$T/native/run" "$T/out/s4/run" >"$T/compare" ||
	fail "zr export dir: $(cat "$T/compare")"
"$ZR" verify "$DS" >"$T/verify.out" 2>&1 || fail "zr verify: $(tail -5 "$T/verify.out")"
echo "ok: names.py's $OPS random operations on names, 4 seeds in tree/, as on a native" \
	"directory, kept after a remount and by zr export dir"
