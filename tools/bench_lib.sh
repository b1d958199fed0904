# bench_lib.sh - what the benchmark scripts share (sourced): medians of
# runs and of per-run ratios, read from a file of one line a run, each a
# space-separated row of figures ($TIMES).

# bench_scratch DIR NAME: $T, a scratch directory made under DIR, with
# $T/mnt for the mounts; removed on exit (the mount on it unmounted first)
# however the script ends; $TIMES, the file of runs, in it
bench_scratch() {
	T=$(mktemp -d "$1/zr-bench-$2-XXXXXX")
	TIMES=$T/times
	mkdir "$T/mnt"
	trap 'mountpoint -q "$T/mnt" 2>/dev/null && fusermount3 -u "$T/mnt"; rm -rf "$T"' EXIT
	trap 'exit 1' INT TERM
}

# median: the median of the numbers on standard input, one a line
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

# col N: the median of column N of $TIMES
col() { cut -d' ' -f"$1" "$TIMES" | median; }

# ratio A B: the median of the per-run ratios of columns A / B of $TIMES
ratio() { awk -v a="$1" -v b="$2" '{printf "%.3f\n", $a / $b}' "$TIMES" | median; }
