#!/bin/sh
# bench_bigdata.sh - data bigger than memory: a dataset 4x the memory its
# readers may use for page cache (a memory cgroup: memory.max on cgroup v2,
# memory.limit_in_bytes where the memory controller is on v1), read cold
# on local ext4 and through a GlusterFS volume (two servers in network
# namespaces, tests/dist/gluster_lib.sh; the servers run in the cgroup too,
# so their page cache is bounded as well):
#
#   native   one file per record (the imported tree), in a shuffled order
#   records  zrfs record files, in the same order
#   shuffle  zrfs batch files of that shuffled order (.batches/shuffle,...)
#   block    zrfs batch files of the two-level block shuffle (.batches/block,...)
#   chunks   the dataset's chunk files themselves, in order, as many bytes
#            as the other cases read, each file asked for whole at once
#            (POSIX_FADV_WILLNEED) and then read: what the storage gives to
#            sequential reads, as a prefetch of whole blocks would make them
#
# Each is read by 4 threads (as DataLoader workers would), READS records'
# worth, after dropping the page cache, with fresh mounts. Reported: records
# per second, and bytes read from the disk (its /proc/diskstats) per byte
# delivered: the read amplification. Medians of RUNS runs; ratios against
# native and shuffle measured in the same run. Needs root.
#
# usage: tools/bench_bigdata.sh [ZR [ZRFS]]      (defaults: build/ci binaries)
#   RECORDS=16000 SIZE=98304 LIMIT_MB=384 READS=3000 BATCH=32 BLOCK=512 RUNS=3
#   WHERE="local gluster" WORK=/var/tmp/zr-bigdata
set -eu
ZR=$(realpath "${1:-build/ci/tools/zr}")
ZRFS=$(realpath "${2:-build/ci/fs/zrfs}")
HERE=$(cd "$(dirname "$0")" && pwd)
N=${RECORDS:-16000}
SIZE=${SIZE:-98304}
LIMIT=$((${LIMIT_MB:-384} << 20))
READS=${READS:-3000}
BATCH=${BATCH:-32}
BLOCK=${BLOCK:-512}
RUNS=${RUNS:-3}
WHERE=${WHERE:-local gluster}
W=${WORK:-/var/tmp/zr-bigdata}
PY=/usr/bin/python3
fail() { echo "bench_bigdata: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root (a memory cgroup, dropping caches, mounts)"
. "$HERE/../tests/dist/gluster_lib.sh"

# the memory cgroup this script and everything it starts runs in
if grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
	CG=/sys/fs/cgroup/zr-bigdata-$$ LIMITF=memory.max
elif [ -d /sys/fs/cgroup/memory ]; then
	CG=/sys/fs/cgroup/memory/zr-bigdata-$$ LIMITF=memory.limit_in_bytes
else
	fail "no memory cgroup controller here"
fi
DEV=$(lsblk -no PKNAME "$(findmnt -no SOURCE --target "$(dirname "$W")")" 2>/dev/null || true)
[ -n "$DEV" ] || DEV=$(basename "$(findmnt -no SOURCE --target "$(dirname "$W")")")
Z=$W/z
cleanup() {
	mountpoint -q "$Z" 2>/dev/null && fusermount3 -u "$Z"
	gluster_down
	echo $$ >"$(dirname "$CG")/cgroup.procs" 2>/dev/null || true
	rmdir "$CG" 2>/dev/null || true
	rm -rf "$W"
}
trap cleanup EXIT INT TERM
rm -rf "$W"
mkdir -p "$W" "$Z"
mkdir "$CG"
echo $$ >"$CG/cgroup.procs"

sectors() { awk -v d="$DEV" '$3 == d {print $6}' /proc/diskstats; }

echo "records: $N of $SIZE B ($((N * SIZE >> 20)) MiB); page cache bound: $((LIMIT >> 20)) MiB" \
	"($CG, $LIMITF); disk $DEV; $READS records read per case, 4 threads"
"$PY" - "$W/src" "$N" "$SIZE" <<'PY'
import os, sys
d, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for k in range(n):
    sub = os.path.join(d, f"c{k % 16:02d}")
    os.makedirs(sub, exist_ok=True)
    with open(os.path.join(sub, f"{k:06d}.bin"), "wb") as f:
        f.write(os.urandom(size))
PY
"$ZR" import dir "$W/src" "$W/local" --writers 2 >/dev/null
case " $WHERE " in *" gluster "*)
	why=$(gluster_skip_reason)
	[ -z "$why" ] || fail "gluster: $why"
	gluster_up "$W/g" distribute
	gluster_client "$W/ga" 1
	"$ZR" import dir "$W/src" "$W/ga/ds" --writers 2 >/dev/null
	cp -r "$W/src" "$W/ga/src"
	umount -l "$W/ga"
	;;
esac
sync
echo 3 >/proc/sys/vm/drop_caches
# the bound covers the processes' own memory too (the servers', zrfs's)
echo "$LIMIT" 2>/dev/null >"$CG/$LIMITF" ||
	fail "cannot bound $CG to $((LIMIT >> 20)) MiB: its processes use more ($(($(cat \
		"$CG/memory.usage_in_bytes" 2>/dev/null || cat "$CG/memory.current") >> 20)) MiB)"

# the shuffled order, and each id's file (ids follow the files' sorted paths)
"$ZR" sample "shuffle,seed=1,batch=$BATCH" --n "$N" --steps "0:$((READS / BATCH))" 2>/dev/null |
	tr ' ' '\n' >"$W/order"
(cd "$W/src" && find . -type f | LC_ALL=C sort | sed 's|^\./||') >"$W/paths"

# one case: WHERE CASE -> "records/s amplification"
run_case() {
	where=$1 what=$2
	if [ "$where" = gluster ]; then
		gluster_client "$W/ga" 1
		ds=$W/ga/ds src=$W/ga/src
	else
		ds=$W/local src=$W/src
	fi
	sync
	echo 3 >/proc/sys/vm/drop_caches
	case $what in native | chunks) ;; *) "$ZRFS" "$ds" "$Z" -o log="$W/zrfs.log" ;; esac
	zpid=$(pgrep -n -f "^$ZRFS $ds $Z" || true)
	s0=$(sectors)
	out=$("$PY" - "$what" "$Z" "$src" "$W/order" "$W/paths" "$READS" "$BATCH" "$BLOCK" \
		"$ds/chunk" "$SIZE" <<'PY'
import os, sys, time
from concurrent.futures import ThreadPoolExecutor
what, z, src, order, paths, reads, batch, block = sys.argv[1:9]
reads, batch = int(reads), int(batch)
ids = [int(x) for x in open(order).read().split()][:reads]
names = open(paths).read().split("\n")
def whole(p):
    with open(p, "rb", buffering=0) as f:
        if what == "chunks":
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_WILLNEED)
        n = 0
        while True:
            b = f.read(1 << 20)
            if not b:
                return n
            n += len(b)
if what == "chunks":
    d, want = sys.argv[9], reads * int(sys.argv[10])
    files = []
    for name in sorted(os.listdir(d), key=lambda n: int(n.split(".")[0])):
        if want <= 0:
            break
        files.append(f"{d}/{name}")
        want -= os.stat(files[-1]).st_size
    count = reads
elif what in ("native", "records"):
    files = [f"{src}/{names[i]}" if what == "native" else f"{z}/data/{i}.bin" for i in ids]
    count = len(files)
else:
    spec = f"shuffle,seed=1,batch={batch}" if what == "shuffle" else \
        f"block,seed=1,batch={batch},block={block}"
    files = [f"{z}/.batches/{spec}/epoch-0/{k}/data" for k in range(reads // batch)]
    count = len(files) * batch
t = time.monotonic()
with ThreadPoolExecutor(4) as ex:
    got = sum(ex.map(whole, files))
print(count / (time.monotonic() - t), got)
PY
)
	s1=$(sectors)
	case $what in native | chunks) ;; *) fusermount3 -u "$Z" ;; esac
	# the daemon gone, its mappings with it: the next case's drop_caches
	# would keep pages still mapped
	while [ -n "$zpid" ] && kill -0 "$zpid" 2>/dev/null; do sleep 0.05; done
	[ "$where" = gluster ] && umount -l "$W/ga"
	set -- $out
	echo "$1 $(echo "($s1 - $s0) * 512 / $2" | bc -l)"
}

. "$HERE/bench_lib.sh"
for where in $WHERE; do
	: >"$W/res"
	r=1
	while [ $r -le "$RUNS" ]; do
		for what in native records shuffle block chunks; do
			echo "$r $what $(run_case "$where" "$what")" >>"$W/res"
		done
		r=$((r + 1))
	done
	printf '%-8s %-8s %12s %12s %10s %10s\n' "$where" case "records/s" "amplif." "x native" "x shuffle"
	for what in native records shuffle block chunks; do
		rate=$(awk -v w=$what '$2 == w {print $3}' "$W/res" | median)
		amp=$(awk -v w=$what '$2 == w {print $4}' "$W/res" | median)
		xn=$(for r in $(seq 1 "$RUNS"); do
			awk -v r=$r -v w=$what '$1 == r && $2 == w {a=$3} $1 == r && $2 == "native" {b=$3}
				END {print a / b}' "$W/res"; done | median)
		xs=$(for r in $(seq 1 "$RUNS"); do
			awk -v r=$r -v w=$what '$1 == r && $2 == w {a=$3} $1 == r && $2 == "shuffle" {b=$3}
				END {print a / b}' "$W/res"; done | median)
		printf '%-8s %-8s %12.0f %12.2f %10.2f %10.2f\n' "" "$what" "$rate" "$amp" "$xn" "$xs"
	done
	sed 's/^/  run /' "$W/res"
done
