#!/bin/sh
# bench_tree.sh - tree/ of a big dataset: the names of NAMES files (in
# directories of PER_DIR) listed and looked up through a zrfs mount, against
# the same tree on the native filesystem, and against a dataset of one
# directory of PER_DIR files: listing and looking up in tree/ must take time
# that follows the directory, not the dataset.
#
# usage: tools/bench_tree.sh ZR ZRFS [NAMES] [RUNS] [DIR]
#   NAMES files (default 1000000), PER_DIR (env, default 1000) a directory;
#   RUNS runs, alternating (default 3); DIR scratch space (default /var/tmp).
# Each run, on a fresh mount (nothing cached in the kernel) and on the
# native tree (its dentries and inodes cached after the first run):
#   mount      zrfs start to mounted: opening the dataset and building the
#              index of names (one pass over the field of names)
#   find       find of the whole tree (names, kinds: readdir and lookups)
#   ls -lR     ls -lR of the whole tree (every file's attributes)
#   ls -l dir  ls -l of one directory of PER_DIR files, in the big dataset
#              and in the one-directory dataset
#   stat       stat of PER_DIR files given by name (lookups), in both
# and the daemon's resident memory after the index is built. Then, as root,
# find and ls -lR of the native tree cold (caches dropped before each), the
# fair match for a fresh mount. Prints each
# run and the medians with ratios; record them in BENCHMARKS.md.
set -eu
ZR=$1 ZRFS=$2 NAMES=${3:-1000000} RUNS=${4:-3} DIR=${5:-/var/tmp}
PER_DIR=${PER_DIR:-1000}
T=$(mktemp -d "$DIR/zr-bench-tree-XXXXXX")
cleanup() {
	mountpoint -q "$T/mnt" 2>/dev/null && fusermount3 -u "$T/mnt"
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
mkdir "$T/mnt"
echo "bench_tree: $NAMES names, $PER_DIR a directory, $RUNS runs, in $T"
/usr/bin/python3 - "$T/src" "$NAMES" "$PER_DIR" <<'EOF'
import os, sys
root, n, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    d = os.path.join(root, "d%05d" % (i // per))
    if i % per == 0:
        os.makedirs(d)
    with open(os.path.join(d, "f%07d.txt" % i), "w") as f:
        f.write("%d\n" % i)
EOF
mkdir "$T/small"
cp -r "$T/src/d00000" "$T/small/"
s=$(date +%s.%N)
"$ZR" import dir "$T/src" "$T/ds" >/dev/null
e=$(date +%s.%N)
echo "zr import dir of $NAMES files: $(awk "BEGIN {printf \"%.1f\", $e - $s}") s"
"$ZR" import dir "$T/small" "$T/ds_small" >/dev/null

secs() { # COMMAND...: its wall time in seconds
	s=$(date +%s.%N)
	"$@" >/dev/null
	e=$(date +%s.%N)
	awk "BEGIN {print $e - $s}"
}
mount_ds() { # DS: mount it; $took: the seconds it took, $pid: the daemon
	s=$(date +%s.%N)
	setsid -w "$ZRFS" "$1" "$T/mnt" -f -o log="$T/log" </dev/null >/dev/null 2>&1 &
	pid=$!
	timeout 600 sh -c "until mountpoint -q '$T/mnt'; do sleep 0.01; done"
	e=$(date +%s.%N)
	took=$(awk "BEGIN {print $e - $s}")
}
unmount() { fusermount3 -u "$T/mnt"; wait "$pid"; }
mid=$(printf 'd%05d' $((NAMES / PER_DIR / 2)))
# PER_DIR names to stat: every file of the middle directory
(cd "$T/src/$mid" && ls) >"$T/names"
stat_all() { (cd "$1" && xargs stat -c %s <"$T/names"); }

for r in $(seq 1 "$RUNS"); do
	mount_ds "$T/ds"
	m=$took
	rss=$(awk '/^VmRSS/ {print $2}' /proc/"$pid"/status)
	f=$(secs find "$T/mnt/tree")
	unmount
	mount_ds "$T/ds"
	l=$(secs ls -lR "$T/mnt/tree")
	unmount
	mount_ds "$T/ds"
	d=$(secs ls -l "$T/mnt/tree/$mid")
	unmount
	mount_ds "$T/ds"
	st=$(secs stat_all "$T/mnt/tree/$mid")
	unmount
	mount_ds "$T/ds_small"
	rss_small=$(awk '/^VmRSS/ {print $2}' /proc/"$pid"/status)
	ds=$(secs ls -l "$T/mnt/tree/d00000")
	unmount
	mount_ds "$T/ds_small"
	(cd "$T/small/d00000" && ls) >"$T/names_small"
	sts=$(secs sh -c "cd '$T/mnt/tree/d00000' && xargs stat -c %s <'$T/names_small'")
	unmount
	nf=$(secs find "$T/src")
	nl=$(secs ls -lR "$T/src")
	nd=$(secs ls -l "$T/src/$mid")
	nst=$(secs stat_all "$T/src/$mid")
	echo "run $r: mount $m s (rss ${rss} KiB); find $f s (native $nf); ls -lR $l s (native $nl);" \
		"ls -l dir $d s (1-dir dataset $ds, native $nd); stat $st s (1-dir dataset $sts, native $nst)"
	echo "$m $rss $f $nf $l $nl $d $ds $nd $st $sts $nst $rss_small" >>"$T/runs"
done
# the native tree cold, as a fresh mount is: after dropping the kernel's
# caches (root only), so its directories and inodes are read from the disk
cold() { # COMMAND...: its wall time after dropping caches
	sync
	echo 3 >/proc/sys/vm/drop_caches
	secs "$@"
}
if [ -w /proc/sys/vm/drop_caches ]; then
	for r in $(seq 1 "$RUNS"); do
		echo "$(cold find "$T/src") $(cold ls -lR "$T/src")" >>"$T/cold"
	done
else
	echo "native cold: not measured (dropping caches needs root)"
fi
awk -v n="$NAMES" -v per="$PER_DIR" -v cold="$T/cold" '
function median(a, m,   i, k, t) {
	for (i = 1; i <= m; i++) for (k = i + 1; k <= m; k++) if (a[k] < a[i]) { t = a[i]; a[i] = a[k]; a[k] = t }
	return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
}
function med(col,   i, a) {
	for (i = 1; i <= NR; i++) a[i] = v[i, col]
	return median(a, NR)
}
{ for (c = 1; c <= NF; c++) v[NR, c] = $c }
END {
	nc = 0
	while ((getline line <cold) > 0) {
		split(line, part, " ")
		nc++
		cf[nc] = part[1]
		cl[nc] = part[2]
	}
	printf "\nmedians of %d runs, %d names, %d a directory:\n", NR, n, per
	printf "  mount (index built)       %8.3f s   daemon rss %.0f MiB (%.0f B a name over the 1-dir dataset'"'"'s %.0f MiB)\n", med(1), med(2) / 1024, (med(2) - med(13)) * 1024 / (n - per), med(13) / 1024
	printf "  find tree/                %8.3f s   native %8.3f s   ratio %.2f\n", med(3), med(4), med(3) / med(4)
	printf "  ls -lR tree/              %8.3f s   native %8.3f s   ratio %.2f\n", med(5), med(6), med(5) / med(6)
	if (nc) {
		mf = median(cf, nc)
		ml = median(cl, nc)
		printf "  native cold (caches dropped): find %.3f s (tree/ ratio %.2f), ls -lR %.3f s (tree/ ratio %.2f)\n", mf, med(3) / mf, ml, med(5) / ml
	}
	printf "  ls -l of one directory    %8.3f s   1-dir dataset %8.3f s (ratio %.2f)   native %8.3f s\n", med(7), med(8), med(7) / med(8), med(9)
	printf "  stat of %d names          %8.3f s   1-dir dataset %8.3f s (ratio %.2f)   native %8.3f s\n", per, med(10), med(11), med(10) / med(11), med(12)
}' "$T/runs"
