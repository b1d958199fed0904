# bench_lib.sh - what the benchmark scripts share (sourced): medians of
# runs and of per-run ratios, read from a file of one line a run, each a
# space-separated row of figures ($TIMES).

# median: the median of the numbers on standard input, one a line
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

# col N: the median of column N of $TIMES
col() { cut -d' ' -f"$1" "$TIMES" | median; }

# ratio A B: the median of the per-run ratios of columns A / B of $TIMES
ratio() { awk -v a="$1" -v b="$2" '{printf "%.3f\n", $a / $b}' "$TIMES" | median; }
