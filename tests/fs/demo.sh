#!/bin/sh
# The README's first command, tools/demo.sh, runs as a new user runs it
# (with the build under test instead of its own: DEMO_BUILD), into a
# dataset directory of the test's: it exits 0, says what its steps show
# (zr info, verify, record 42 through zr cat and through the mount, the
# .npy views) and leaves nothing mounted.
# SRC: the source tree; BUILD: the build directory under test.
set -u
: "${SRC:?}" "${BUILD:?}"
T=$(mktemp -d /tmp/zrfs-demo-XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() {
	echo "FAIL: $*" >&2
	exit 1
}
out=$(DEMO_BUILD=$BUILD DEMO_DIR=$T/demo-data sh "$SRC/tools/demo.sh" 2>&1) || fail "tools/demo.sh: $out"
for want in "512 records" "0 problems" "caption: record 42: a cross" "label:   2" \
	"/caption/42.txt" "image.npy: uint8 (512, 8, 8); label.npy: int64 (512,)" \
	"record 42: label 2, first image row" "labels of records 0..7: [0, 1, 2, 3, 0, 1, 2, 3]"; do
	case $out in *"$want"*) ;; *) fail "tools/demo.sh never said '$want': $out" ;; esac
done
mnt=$(echo "$out" | sed -n 's/^==> zrfs [^ ]* //p')
[ -n "$mnt" ] || fail "tools/demo.sh never said where it mounts: $out"
! mountpoint -q "$mnt" 2>/dev/null || fail "tools/demo.sh left $mnt mounted"
[ ! -e "$mnt" ] || fail "tools/demo.sh left its mount point $mnt"
"$BUILD/tools/zr" verify "$T/demo-data" >/dev/null || fail "the demo's dataset does not verify"
echo "ok: tools/demo.sh ran and said what it shows"
