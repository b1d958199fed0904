#!/bin/sh
# More chunk files than the process may open: 3,000 chunks (one record
# each) imported, verified and mounted under `ulimit -n 64`; every record
# file reads byte-exact, in scattered order too, and the daemon holds fewer
# descriptors than its limit. (The library's own cases: tests/core/test_chunk.c.)
. "$(dirname "$0")/lib.sh"
: "${ZR:?ZR must name the zr binary}"
N=3000
head -c $((N * 100)) /dev/urandom >"$T/src"
sh -c 'ulimit -n 64; exec "$1" import flat "$2" "$3" --record-size 100 --chunk-size 1' sh \
	"$ZR" "$T/src" "$DS" >/dev/null || fail "zr import under ulimit -n 64"
[ "$(ls -f "$DS/chunk" | grep -c '\.zr$')" = $N ] || fail "not $N chunk files"
sh -c 'ulimit -n 64; exec "$1" verify "$2"' sh "$ZR" "$DS" >"$T/v" || fail "zr verify: $(cat "$T/v")"
sh -c 'ulimit -n 64; exec "$@"' sh "$ZRFS" "$DS" "$MNT" || fail "zrfs under ulimit -n 64"
mountpoint -q "$MNT" || fail "not mounted"
pid=$(pgrep -n -f "$DS $MNT") || fail "no daemon"
# in id order: the whole source, byte for byte
i=0
while [ $i -lt $N ]; do echo "$MNT/data/$i"; i=$((i + 1)); done | xargs cat >"$T/out" ||
	fail "reading the record files"
cmp -s "$T/out" "$T/src" || fail "records differ from the source"
# scattered (chunks closed and opened again): each record against its bytes
$PY - "$MNT/data" "$T/src" $N <<'PY' || fail "scattered reads"
import random, sys
d, src, n = sys.argv[1], open(sys.argv[2], "rb").read(), int(sys.argv[3])
rng = random.Random(1)
for _ in range(4 * n):
    i = rng.randrange(n)
    with open(f"{d}/{i}", "rb") as f:
        assert f.read() == src[100 * i:100 * (i + 1)], i
PY
fds=$(ls /proc/"$pid"/fd | wc -l)
[ "$fds" -lt 64 ] || fail "the daemon holds $fds descriptors"
fusermount3 -u "$MNT" || fail "unmount"
# a batch spanning more chunks than the soft descriptor limit (256 here,
# under ulimit -Sn 64): the daemon raises its soft limit to the hard one
# at start, so the batch reads whole, byte for byte
sh -c 'ulimit -Sn 64; exec "$@"' sh "$ZRFS" "$DS" "$MNT" || fail "zrfs under ulimit -Sn 64"
pid=$(pgrep -n -f "$DS $MNT") || fail "no daemon"
awk '/^Max open files/ { exit !($4 == $5) }' /proc/"$pid"/limits ||
	fail "the daemon's soft limit is not its hard one: $(grep 'open files' /proc/"$pid"/limits)"
cat "$MNT/.batches/seq,batch=256/epoch-0/0/data" >"$T/batch" || fail "reading a batch of 256 chunks"
head -c 25600 "$T/src" | cmp -s - "$T/batch" || fail "the batch of 256 chunks differs from the source"
fusermount3 -u "$MNT" || fail "unmount"
