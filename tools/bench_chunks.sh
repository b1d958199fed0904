#!/bin/sh
# bench_chunks.sh - a dataset of many chunk files under the stock descriptor
# limit: 100,000 chunks (one 64-byte record each) against the same records
# in 1,000 chunks, everything run under `ulimit -n 1024`.
#
# Shows: import, open + one read (`zr cat`, median of RUNS), `zr verify`
# (reads every record), and a zrfs mount read whole with cat (byte-exact
# against the source), with the daemon's open descriptors and mappings
# afterwards. Opening costs no system call per chunk: compare `zr cat` with
# listing the chunk directory once (`ls -f`).
#
# usage: tools/bench_chunks.sh [ZR [ZRFS]]   (defaults: build/ci binaries)
#        CHUNKS=100000 RUNS=5 WORK=/var/tmp/zr-chunks
set -eu
ZR=${1:-build/ci/tools/zr}
ZRFS=${2:-build/ci/fs/zrfs}
N=${CHUNKS:-100000}
RUNS=${RUNS:-5}
W=${WORK:-/var/tmp/zr-chunks}
ZR=$(realpath "$ZR")
ZRFS=$(realpath "$ZRFS")
rm -rf "$W"
mkdir -p "$W/mnt"
cleanup() {
	mountpoint -q "$W/mnt" && fusermount3 -u "$W/mnt"
	rm -rf "$W"
}
trap cleanup EXIT INT TERM

# seconds a command takes (it runs under ulimit -n 1024), stdout discarded
secs() {
	sh -c 'ulimit -n 1024; s=$(date +%s.%N); "$@" >/dev/null || exit 1; e=$(date +%s.%N);
	       echo "$e - $s" | bc' sh "$@"
}
. "$(dirname "$0")/bench_lib.sh"
runs() { i=0; while [ $i -lt "$RUNS" ]; do secs "$@"; i=$((i + 1)); done | median; }

head -c $((N * 64)) /dev/urandom >"$W/src"
echo "records: $N of 64 B; ulimit -n 1024; vm.max_map_count $(cat /proc/sys/vm/max_map_count)"
t_many=$(secs "$ZR" import flat "$W/src" "$W/many" --record-size 64 --chunk-size 1)
t_few=$(secs "$ZR" import flat "$W/src" "$W/few" --record-size 64 --chunk-size $((N / 1000)))
printf 'import         %8.3f s (%d chunks)   %8.3f s (1000 chunks)\n' "$t_many" \
	"$(ls -f "$W/many/chunk" | grep -c '\.zr$')" "$t_few"
last=$((N - 1))
c_many=$(runs "$ZR" cat "$W/many" data $last)
c_few=$(runs "$ZR" cat "$W/few" data $last)
l_many=$(runs ls -f "$W/many/chunk")
printf 'open + 1 read  %8.4f s                  %8.4f s   (ratio %.2f; ls -f chunk/ once: %.4f s)\n' \
	"$c_many" "$c_few" "$(echo "$c_many / $c_few" | bc -l)" "$l_many"
v_many=$(secs "$ZR" verify "$W/many")
v_few=$(secs "$ZR" verify "$W/few")
printf 'verify         %8.3f s                  %8.3f s\n' "$v_many" "$v_few"

# mount_read DS: mount DS (under ulimit -n 1024), read every record file in
# id order, compare with the source; prints seconds, result, fds, mappings
mount_read() {
	t=$(secs sh -c 'exec "$1" "$2" "$3" -o log="$4"' sh "$ZRFS" "$1" "$W/mnt" "$W/zrfs.log")
	pid=$(pgrep -n -f "zrfs $1")
	s=$(date +%s.%N)
	ls "$W/mnt/data" | sort -n | sed "s|^|$W/mnt/data/|" | xargs cat >"$W/out"
	e=$(date +%s.%N)
	cmp -s "$W/out" "$W/src" && same=byte-exact || same=DIFFERENT
	echo "$(echo "$e - $s" | bc) $same $(ls /proc/"$pid"/fd | wc -l) $(wc -l </proc/"$pid"/maps) $t"
	fusermount3 -u "$W/mnt"
	while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
}
set -- $(mount_read "$W/many")
m_many=$1 ok_many=$2 fds=$3 maps=$4 t_many=$5
set -- $(mount_read "$W/few")
printf 'zrfs mount     %8.4f s                  %8.4f s\n' "$t_many" "$5"
printf 'zrfs cat all   %8.3f s                  %8.3f s   (%s, %s; daemon at the end: %s fds, %s mappings)\n' \
	"$m_many" "$1" "$ok_many" "$2" "$fds" "$maps"
[ "$ok_many" = byte-exact ] && [ "$2" = byte-exact ]
