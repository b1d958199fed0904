# lib.sh - helpers for the filesystem tests (sourced by each case).
#
# Each case gets a scratch directory with a dataset built by mkds, its
# reference tree (what the mount must show) and a mount point; `mount_ds`
# mounts it with zrfs, and the EXIT trap unmounts whatever was mounted and
# removes the scratch directory, whether the case passed or failed.
# ZRFS, MKDS: the binaries under test (set by CTest). PY: Debian's python3.
set -u
: "${ZRFS:?ZRFS must name the zrfs binary}"
: "${MKDS:?MKDS must name the mkds helper}"
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)

# ZRFS_TRANSPORT=uring (the fs.*.uring variants): every mount the case makes
# serves requests through io_uring rings (-o uring). Where this kernel cannot,
# the case is skipped (exit 77, which CTest reports as skipped) saying why.
if [ "${ZRFS_TRANSPORT:-}" = uring ]; then
	why=$(sh "$HERE/uring_ready.sh") || { echo "SKIP: $why"; exit 77; }
	ZRFS_PLAIN=$ZRFS
	ZRFS=$HERE/zrfs_uring.sh
	export ZRFS ZRFS_PLAIN
fi
T=$(mktemp -d /tmp/zrfs-test-XXXXXX)
DS=$T/ds
REF=$T/ref
MNT=$T/mnt
mkdir "$MNT"

cleanup() {
	if mountpoint -q "$MNT" 2>/dev/null; then
		fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT"
	fi
	# a daemon unmounted commits what it was given before it exits: its
	# dataset is removed after that, not from under it
	for pid in $(pgrep -f "zrfs $T/"); do
		timeout 60 tail --pid="$pid" -f /dev/null
	done
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() {
	echo "FAIL: $*" >&2
	# under valgrind (ZRFS_WRAP), what it said about the daemon, whole:
	# the message above quotes only a log's last lines
	if [ -n "${ZRFS_WRAP:-}" ]; then
		grep -h '^==[0-9]*== ' "$T"/*log* 2>/dev/null | head -300 >&2
	fi
	exit 1
}

# make_ds [mkds options]: build $DS and $REF.
make_ds() { "$MKDS" "$DS" "$REF" "$@" >"$T/mkds.out" || fail "mkds failed"; }

# mount_ds [zrfs options]: mount $DS on $MNT; returns once it is mounted.
mount_ds() {
	"$ZRFS" "$DS" "$MNT" "$@" || fail "zrfs $* exited $?"
	mountpoint -q "$MNT" || fail "zrfs returned but $MNT is not mounted"
}

# unmount_wait: unmount $MNT and wait for its daemon to exit. umount returns
# before the daemon has (the kernel does not wait for it): what it does on
# its way out (the last commit, letting go of the views it held) is done
# once this returns.
unmount_wait() {
	pid=$(pgrep -nf "$DS $MNT")
	fusermount3 -u "$MNT" || fail "unmount"
	[ -z "$pid" ] || timeout 60 tail --pid="$pid" -f /dev/null || fail "the daemon did not exit"
}

# within SECONDS COMMAND...: run COMMAND until it succeeds, SECONDS at most;
# its status is the last try's. A mount follows a commit made outside it
# (zr set, another machine) within moments, not at once: a test waits for
# what it then checks to show.
within() {
	_end=$(($(date +%s) + $1))
	shift
	until "$@"; do
		[ "$(date +%s)" -lt "$_end" ] || return 1
	done
}

# same FILE1 FILE2: byte-identical or fail.
same() { cmp -s "$1" "$2" || fail "$1 and $2 differ"; }

# mount_small_tree: $DS made by zr import dir of a tree of one file
# (a/x.txt), mounted writable, its daemon logging into $T/log; said prints
# the log's last lines, for a failure's message.
mount_small_tree() {
	: "${ZR:?ZR must name the zr binary}"
	mkdir -p "$T/src/a" && printf 'x\n' >"$T/src/a/x.txt" || fail "a tree"
	"$ZR" import dir "$T/src" "$DS" >/dev/null || fail "import dir"
	mount_ds -o writable,log="$T/log"
}
said() { sed 's/^/  the daemon: /' "$T/log" 2>/dev/null | tail -3; }
