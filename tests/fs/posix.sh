#!/bin/sh
# A writable tree/ answers about 250 system calls as ext4 does, or as
# zrfs(8) says it does not, and 45 more made by another user through a
# mount with allow_other: tests/fs/posix.py runs each on a native directory
# and on the mount, and compares.
. "$(dirname "$0")/lib.sh"
: "${ZR:?ZR must name the zr binary}"
[ "$(id -u)" = 0 ] || { echo "SKIP: posix.py gives files away (chown): root only"; exit 77; }
mount_small_tree
mkdir "$T/native" || fail "a native directory"
"$PY" "$(dirname "$0")/posix.py" "$T/native" "$MNT/tree" || fail "posix.py, above $(said)"
# the change times of the directories and links it left, as a remount
# shows them (kept with the tree, as the files' are with their records)
ctimes() {
	find "$MNT/tree/posix" \( -type d -o -type l -o -type p -o -type s \) \
		-printf '%P %C@ %M %U\n' | sort
}
ctimes >"$T/ctimes"
unmount_wait
mount_ds -o writable,log="$T/log"
ctimes | diff "$T/ctimes" - >"$T/ctimes.diff" ||
	fail "change times after a remount: $(head -5 "$T/ctimes.diff")"
unmount_wait
# another user's calls, where allow_other lets one in: the kernel checks the
# bits against the owners kept, the mount keeps what it is told
chmod 755 "$T" "$T/native" || fail "chmod"
mount_ds -o writable,allow_other,log="$T/log"
"$PY" "$(dirname "$0")/posix.py" "$T/native" "$MNT/tree" --users ||
	fail "posix.py --users, above $(said)"
unmount_wait
