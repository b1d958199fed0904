#!/bin/sh
# The zrfs Python package (tools/python/zrfs): its Loader and BatchDataset
# read a mount's batches byte for byte as zr sample and zr cat give them,
# for several specs, ranks, from=, tail modes, flate and variable-size
# fields, and raise an error naming the file and spec for a damaged record
# (tests/fs/feed.py says what is checked).
. "$(dirname "$0")/lib.sh"
: "${ZR:?ZR must name the zr binary}"
"$PY" -c 'import torch' 2>/dev/null || fail "python3-torch missing (packaging/deps.sh installs it)"
make_ds --records 60
"$MKDS" "$T/bad" "$T/badref" --records 30 --corrupt >/dev/null || fail "mkds --corrupt"
mkdir "$T/badmnt"
unmount_bad() {
	mountpoint -q "$T/badmnt" 2>/dev/null && { fusermount3 -u "$T/badmnt" || umount -l "$T/badmnt"; }
	cleanup
}
trap unmount_bad EXIT
mount_ds
"$ZRFS" "$T/bad" "$T/badmnt" -o log="$T/badlog" || fail "mounting the damaged dataset"
"$PY" "$(dirname "$0")/feed.py" "$ZR" "$MNT" "$DS" "$T/badmnt" || fail "feed.py"
