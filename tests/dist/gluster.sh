#!/bin/sh
# Many machines on one: a GlusterFS volume replicated over two servers, each
# glusterd in a network namespace (and mount namespace) of its own, with
# private addresses on a bridge in a third namespace that the clients use.
# The volume is replicated (replica 2) so that one server can die mid-epoch
# and every byte is still there to read.
#
#   1. zr import writes a dataset onto the volume (the writer's client);
#   2. two "nodes", each its own GlusterFS client mount with its own zrfs,
#      read rank 0 and rank 1 of world 2 of a shuffled epoch: disjoint,
#      covering, byte-exact against the source files (found by the records'
#      original names);
#   3. meanwhile the writer appends through a third client: the epoch keeps
#      its records, both nodes then show the new ones byte-exact; a second
#      writer on another client is refused, naming the first;
#   4. one server is killed while a node reads the next epoch: no wrong byte
#      (EIO would be acceptable; counted and reported).
#
# Everything it makes (namespaces, links, daemons, mounts, files under
# /var/tmp) it removes, pass or fail; it talks to no address but the ones it
# gave its namespaces. Skipped (exit 77) where glusterd is missing or network
# namespaces cannot be made. ZRFS, ZR: the binaries under test.
set -u
: "${ZRFS:?ZRFS must name the zrfs binary}"
: "${ZR:?ZR must name the zr binary}"
PY=/usr/bin/python3
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

. "$(dirname "$0")/gluster_lib.sh"
why=$(gluster_skip_reason)
[ -z "$why" ] || skip "$why"
T=$(mktemp -d /var/tmp/zrfs-gluster-XXXXXX)
cleanup() {
	for m in "$T"/z1 "$T"/z2 "$T"/z3; do # zrfs first: it holds files on the volume
		mountpoint -q "$m" 2>/dev/null && { fusermount3 -u "$m" 2>/dev/null || umount -l "$m"; }
	done
	gluster_down
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
gluster_up "$T/g" replica
# three clients: the writer's (a) and two nodes' (b, c)
gluster_client "$T/a" 1
gluster_client "$T/b" 1
gluster_client "$T/c" 2

# ---- 1. the dataset, imported onto the volume ----
"$PY" - "$T/src" <<'PY' || fail "the source files"
import os, random, sys
rng = random.Random(5)
for k in range(400):
    d = os.path.join(sys.argv[1], f"class{k % 4}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"{k:04d}.bin"), "wb") as f:
        f.write(os.urandom(rng.randrange(1, 20000)))
PY
"$ZR" import dir "$T/src" "$T/a/ds" --label-from-parent label >/dev/null || fail "zr import onto the volume"
"$ZR" verify "$T/a/ds" >/dev/null || fail "zr verify on the volume"

# ---- 2. two nodes, each reading its rank of a shuffled epoch ----
mkdir -p "$T/z1" "$T/z2" "$T/z3"
"$ZRFS" "$T/b/ds" "$T/z1" -o log="$T/z1.log" || fail "zrfs on node 1"
"$ZRFS" "$T/c/ds" "$T/z2" -o log="$T/z2.log" || fail "zrfs on node 2"
spec() { echo "shuffle,seed=7,batch=16,tail=keep,world=2,rank=$1"; }
# the epoch is fixed when first opened: open it on both nodes before the
# writer starts
ls "$T/z1/.batches/$(spec 0)/epoch-0" >/dev/null && ls "$T/z2/.batches/$(spec 1)/epoch-0" >/dev/null ||
	fail "no epoch-0 on the nodes"

# ---- 3. a writer appends through its own client meanwhile ----
(
	i=0
	while [ $i -lt 30 ]; do
		head -c $((i * 97 + 1)) /dev/urandom >"$T/new$i.bin"
		printf 'new/%d.bin' $i >"$T/name$i"
		"$ZR" put "$T/a/ds" --data="$T/new$i.bin" --name="$T/name$i" >/dev/null || exit 1
		i=$((i + 1))
	done
) &
writer=$!
# each commit replaces meta.json by a rename on client a: an open on client
# c finds a whole one, old or new, never a torn one (a client that misses the
# name in the rename's instant is waited for by zr_open, a few seconds at
# most, and so is the writer's own client)
(
	opens=0
	while kill -0 $writer 2>/dev/null && [ $opens -lt 5000 ]; do
		"$ZR" info "$T/c/ds" >/dev/null 2>"$T/open.err" || exit 1
		opens=$((opens + 1))
	done
	echo $opens >"$T/opens"
) &
opener=$!
"$PY" - "$T" 400 <<'PY' || fail "the nodes' epoch"
import os, sys
import numpy as np
T, n = sys.argv[1], int(sys.argv[2])
src = {}
def check(mnt, spec):
    ep = f"{mnt}/.batches/{spec}/epoch-0"
    seen = []
    for step in sorted(os.listdir(ep), key=int):
        d = f"{ep}/{step}"
        ids = np.fromfile(f"{d}/ids", dtype="<u8")
        offs = np.fromfile(f"{d}/data.offsets", dtype="<u8")
        data = open(f"{d}/data", "rb").read()
        assert len(offs) == len(ids) + 1 and offs[-1] == len(data), (d, len(offs), len(data))
        for k, i in enumerate(ids):
            name = open(f"{mnt}/name/{i}.txt").read()
            want = open(f"{T}/src/{name}", "rb").read()
            assert data[offs[k]:offs[k + 1]] == want, (d, int(i), name)
        seen += [int(i) for i in ids]
    return seen
r0 = check(f"{T}/z1", "shuffle,seed=7,batch=16,tail=keep,world=2,rank=0")
r1 = check(f"{T}/z2", "shuffle,seed=7,batch=16,tail=keep,world=2,rank=1")
assert len(r0) == len(set(r0)) and len(r1) == len(set(r1)), "a rank read a record twice"
assert not set(r0) & set(r1), "the ranks overlap"
assert set(r0) | set(r1) == set(range(n)), "the ranks do not cover the epoch"
print(f"ranks: {len(r0)} + {len(r1)} records, disjoint, covering, byte-exact")
PY
wait $writer || fail "the writer's appends"
wait $opener || fail "opening the dataset on client c while client a committed: $(cat "$T/open.err")"
[ "$(cat "$T/opens")" -gt 0 ] || fail "no open on client c overlapped the commits"
echo "gluster: $(cat "$T/opens") opens on client c during 30 commits on client a, each whole"
# a second writer on another client is refused while a writable mount holds it
"$ZRFS" "$T/a/ds" "$T/z3" -o writable,log="$T/z3.log" || fail "a writable mount on client a"
"$ZR" put "$T/c/ds" --data="$T/new0.bin" 2>"$T/err" && fail "a second writer on another client"
grep -q "another writer has the dataset open" "$T/err" || fail "second writer: $(cat "$T/err")"
fusermount3 -u "$T/z3" || fail "unmount the writable mount"
# the nodes follow the writer's commits (meta.json is looked at every second)
for z in z1 z2; do
	timeout 60 sh -c "until [ -e '$T/$z/data/429.bin' ]; do :; done" ||
		fail "$z does not show the appended records"
	i=0
	while [ $i -lt 30 ]; do
		cmp -s "$T/new$i.bin" "$T/$z/data/$((400 + i)).bin" ||
			fail "$z: appended record $i: $(cmp "$T/new$i.bin" "$T/$z/data/$((400 + i)).bin" 2>&1; od -An -tx1 "$T/$z/data/$((400 + i)).bin" | head -2; od -An -tx1 "$T/new$i.bin" | head -2; ls -l "$T/$z/data/$((400 + i)).bin"; tail -3 "$T/$z.log")"
		i=$((i + 1))
	done
done
"$ZR" verify "$T/b/ds" >/dev/null || fail "zr verify after the appends"

# ---- 4. a server dies while node 1 reads the next epoch ----
# the reader reads 3 batches, says so, waits until the server is dead,
# reads the rest; wrong bytes fail the case, EIO is counted and reported
"$PY" - "$T" >"$T/kill.out" 2>&1 <<'PY' &
import errno, os, sys, time
import numpy as np
T = sys.argv[1]
ep = f"{T}/z1/.batches/shuffle,seed=7,batch=16,tail=keep,world=2,rank=0/epoch-1"
names = {}
wrong = eio = done = 0
steps = sorted(os.listdir(ep), key=int)
for n, step in enumerate(steps):
    if n == 3:
        open(f"{T}/started", "w").close()
        t0 = time.monotonic()
        while not os.path.exists(f"{T}/killed"):
            assert time.monotonic() - t0 < 60, "the server was not killed"
    d = f"{ep}/{step}"
    try:
        ids = np.fromfile(f"{d}/ids", dtype="<u8")
        offs = np.fromfile(f"{d}/data.offsets", dtype="<u8")
        data = open(f"{d}/data", "rb").read()
        for k, i in enumerate(ids):
            name = open(f"{T}/z1/name/{i}.txt").read()
            path = f"{T}/src/{name}" if not name.startswith("new/") else \
                f"{T}/new{name[4:-4]}.bin"
            wrong += data[offs[k]:offs[k + 1]] != open(path, "rb").read()
        done += 1
    except OSError as e:
        if e.errno not in (errno.EIO, errno.ENOTCONN):
            raise
        eio += 1
print(f"after the kill: {len(steps)} batches, {done} read whole, {eio} EIO, {wrong} wrong records")
sys.exit(1 if wrong or done < 4 else 0)
PY
reader=$!
timeout 120 sh -c "until [ -e '$T/started' ] || ! kill -0 $reader 2>/dev/null; do :; done"
[ -e "$T/started" ] || { wait $reader; fail "the reader of epoch 1 stopped early: $(cat "$T/kill.out")"; }
gluster_kill_server 2
: >"$T/killed"
wait $reader || fail "reading while a server died: $(cat "$T/kill.out")"
echo "gluster: $(cat "$T/kill.out")"
echo "gluster: two servers, replica 2; two nodes read their ranks byte-exact while a writer appended"
