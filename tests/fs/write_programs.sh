#!/bin/sh
# The programs people edit files with (sed -i, perl -pi, Python's atomic
# save, vim, shell redirections, dd, cp, install, tar, rsync, truncate,
# touch, mv, rm), each run on a native directory and on a writable mount of
# the same files, compared, with a reader on a second read-only mount:
# tests/fs/write_programs.py says what is checked.
. "$(dirname "$0")/lib.sh"
: "${ZR:?ZR must name the zr binary}"
unmount_all() {
	for m in "$T"/e*/mnt "$T"/e*/ro; do
		mountpoint -q "$m" 2>/dev/null && { fusermount3 -u "$m" 2>/dev/null || umount -l "$m"; }
	done
	cleanup
}
trap unmount_all EXIT
"$PY" "$(dirname "$0")/write_programs.py" "$ZR" "$ZRFS" "$T" || fail "write_programs.py"
