#!/bin/sh
# daemon_instructions.sh - the instructions the zrfs daemon executes per
# request, counted by valgrind's callgrind: a figure that does not move with
# the machine's load, so two builds can be compared on a noisy machine.
#
# usage: tools/daemon_instructions.sh ZR ZRFS [BASE_ZRFS] [--records N]
#
# Makes two datasets of N records of 8 KiB (default 20000; one raw field of
# random bytes, one flate field of text), then for each workload mounts the
# dataset under callgrind (-f, -o prefetch=0,drop_behind=0: the request
# threads only), runs it, unmounts, and prints the daemon's instructions per
# file, after subtracting those of a mount that reads nothing:
#   records  every record file once, in a shuffled order (LOOKUP + READ)
#   batches  every batch file of epoch 0 of shuffle,seed=1,batch=256
# With BASE_ZRFS, the same for that build and the ratio ZRFS / BASE_ZRFS.
# Needs root (or FUSE access), valgrind and /usr/bin/python3.
set -eu
usage() {
	sed -n '5,18p' "$0" | sed 's/^# \{0,1\}//'
	exit "$1"
}
[ $# -ge 2 ] || usage 2
case "$1" in -h | --help) usage 0 ;; esac
zr=$1 zrfs=$2
shift 2
base="" n=20000
while [ $# -gt 0 ]; do
	case "$1" in
	--records) n=$2; shift 2 ;;
	-h | --help) usage 0 ;;
	-*) echo "daemon_instructions.sh: unknown option '$1'" >&2; exit 2 ;;
	*) base=$1; shift ;;
	esac
done
command -v valgrind >/dev/null || { echo "daemon_instructions.sh: needs valgrind" >&2; exit 1; }
dir=$(mktemp -d /var/tmp/zr-daemon-instr-XXXXXX)
mnt=$dir/mnt
cleanup() {
	fusermount3 -u "$mnt" 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT INT TERM
mkdir "$mnt"

/usr/bin/python3 - "$dir" "$n" <<'EOF'
import os, random, sys
d, n = sys.argv[1], int(sys.argv[2])
r = random.Random(1)
with open(f'{d}/raw.bin', 'wb') as f:
    f.write(r.randbytes(8192 * n))
with open(f'{d}/txt.bin', 'wb') as f:
    for i in range(n):
        f.write(bytes(r.choice(b'abcdefghijklmnop') for _ in range(1024)) * 8)
EOF
"$zr" import flat "$dir/raw.bin" "$dir/raw" --record-size 8192 >/dev/null
"$zr" import flat "$dir/txt.bin" "$dir/flate" --record-size 8192 --compress flate >/dev/null
rm "$dir/raw.bin" "$dir/txt.bin"

# instructions ZRFS DATASET WORKLOAD: the daemon's total, all threads
instructions() {
	out=$dir/callgrind.out
	valgrind --tool=callgrind --callgrind-out-file="$out" "$1" "$2" "$mnt" -f \
		-o prefetch=0,drop_behind=0 2>/dev/null &
	pid=$!
	tries=0
	until mountpoint -q "$mnt"; do
		tries=$((tries + 1))
		[ $tries -lt 600 ] && kill -0 $pid 2>/dev/null || { echo "mount failed" >&2; exit 1; }
		sleep 0.1 # polled: a foreground daemon tells its parent nothing
	done
	/usr/bin/python3 - "$mnt" "$3" "$n" <<'EOF'
import os, random, sys
mnt, w, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
def read(path):
    with open(path, 'rb', buffering=0) as f:
        while f.read(1 << 20):
            pass
if w == 'records':
    ids = list(range(n))
    random.Random(7).shuffle(ids)
    for i in ids:
        read(f'{mnt}/data/{i}')
elif w == 'batches':
    d = f'{mnt}/.batches/shuffle,seed=1,batch=256/epoch-0'
    for k in sorted(os.listdir(d), key=int):
        read(f'{d}/{k}/data')
EOF
	fusermount3 -u "$mnt"
	wait $pid
	callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
}

# per_file ZRFS: one line per workload and field
per_file() {
	idle=$(instructions "$1" "$dir/raw" none)
	for w in records batches; do
		files=$n
		[ $w = batches ] && files=$((n / 256))
		for d in raw flate; do
			total=$(instructions "$1" "$dir/$d" $w)
			echo "$w $d $(((total - idle) / files))"
		done
	done
}

per_file "$zrfs" >"$dir/new"
if [ -n "$base" ]; then
	per_file "$base" >"$dir/base"
	printf '%-8s %-6s %14s %14s %7s\n' workload field "base/file" "this/file" ratio
	paste "$dir/base" "$dir/new" | awk '{printf "%-8s %-6s %14d %14d %6.2fx\n", $1, $2, $3, $6, $6 / $3}'
else
	printf '%-8s %-6s %14s\n' workload field "instr/file"
	awk '{printf "%-8s %-6s %14d\n", $1, $2, $3}' "$dir/new"
fi
