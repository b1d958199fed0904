#!/bin/sh
# device_check.sh - the many-core GPU machine's measurements as one prepared
# script: record files through zrfs at 1 to 16 readers against the FUSE
# floor (both transports), a big read against the floor's, and the GPU feed
# (zrfs.Loader against torch's DataLoader and the raw batch-file rate, at
# 8 KiB and 110 KiB samples), printed as one table; under 8 minutes.
#
#   tools/device_check.sh pack [BUILD]    here: copy into device/ (ignored by
#                                         git) what the machine lacks: zr, zrfs,
#                                         zrfs-floor, their libraries (libfuse3,
#                                         jansson, liburing, ours), fusermount3,
#                                         the Python package, bench_feed.py
#   sh device/device_check.sh run         there, as root, from the tree's root
#
# QUICK=1 makes every workload small (a smoke test of the script on any
# machine); PYTHON names the python3 with numpy and torch (default
# python3). Each step has a time limit; a step that fails says so in the
# table and the others go on.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)

pack() {
	build=${1:-$top/build/ci}
	d=$top/device
	rm -rf "$d"
	mkdir -p "$d/bin" "$d/lib" "$d/tools"
	for b in tools/zr fs/zrfs fs/zrfs-floor; do
		[ -x "$build/$b" ] || { echo "device_check: no $build/$b (build first)" >&2; exit 1; }
		cp "$build/$b" "$d/bin/"
	done
	cp "$(command -v fusermount3)" "$d/bin/"
	# every library they need that is not the C library's
	for b in "$d"/bin/zr "$d"/bin/zrfs "$d"/bin/zrfs-floor; do
		ldd "$b" | awk '/=> \// {print $3}'
	done | sort -u | grep -v -e '/libc\.so' -e '/libm\.so' -e '/ld-linux' | while read -r l; do
		cp -L "$l" "$d/lib/"
	done
	cp -r "$top/tools/python" "$d/tools/python"
	cp "$top/tools/bench_feed.py" "$top/tools/device_check.sh" "$d/tools/"
	cp "$top/README.md" "$d/" # bench_feed.py takes README's PyTorch helpers
	cp "$top/tools/device_check.sh" "$d/device_check.sh"
	echo "device_check: $(du -sh "$d" | cut -f1) in $d; there: sh device/device_check.sh run"
}

# step NAME SECONDS CMD...: run CMD with a time limit, its output kept in
# $out/NAME.log; a line of the table says how it went
step() {
	name=$1 secs=$2
	shift 2
	t0=$(date +%s)
	if timeout "$secs" "$@" >"$out/$name.log" 2>&1; then
		echo "$name: done in $(($(date +%s) - t0)) s" >>"$out/steps"
	else
		echo "$name: FAILED (exit $?, $(($(date +%s) - t0)) s): $(tail -2 "$out/$name.log" | tr '\n' ' ')" \
			>>"$out/steps"
	fi
}

run() {
	d=$(cd "$(dirname "$0")" && pwd)
	[ -x "$d/bin/zrfs" ] || { echo "device_check: run it from the device/ that pack made" >&2; exit 1; }
	export PATH="$d/bin:$PATH" LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	out=${OUT:-$d/out}
	mkdir -p "$out"
	: >"$out/steps"
	[ -w /sys/module/fuse/parameters/enable_uring ] &&
		echo Y >/sys/module/fuse/parameters/enable_uring 2>/dev/null || :
	uring=--uring
	grep -q Y /sys/module/fuse/parameters/enable_uring 2>/dev/null || uring=
	if [ "${QUICK:-}" = 1 ]; then
		files=2000 th=1,2 feed8=4096 feed110=512 workers="2"
	else
		files=50000 th=1,4,8,16 feed8=100000 feed110=10000 workers="8 16"
	fi
	nproc >"$out/cpus"
	py=${PYTHON:-python3}
	"$py" -c 'import torch; print(torch.__version__, torch.cuda.is_available() and torch.cuda.get_device_name(0))' \
		>"$out/torch" 2>&1 || :
	# record files at 1..16 readers, both transports, and the big read
	step fs 200 zr bench fs --records "$files" --runs 1 $uring --threads "$th" --zrfs "$d/bin/zrfs"
	# the GPU feed: 8 KiB samples at 8 and 16 threads, 110 KiB at 8
	for w in $workers; do
		step "feed8k-w$w" 80 "$py" "$d/tools/bench_feed.py" --records "$feed8" --size 8192 \
			--workers "$w" --runs 1 --zr "$d/bin/zr" --zrfs "$d/bin/zrfs"
	done
	step feed110k 80 "$py" "$d/tools/bench_feed.py" --records "$feed110" --size 112640 \
		--workers "${workers%% *}" --runs 1 --zr "$d/bin/zr" --zrfs "$d/bin/zrfs"
	# one table
	echo "== device_check: $(cat "$out/cpus") CPUs; torch $(cat "$out/torch")"
	cat "$out/steps"
	echo "-- record files and big reads (zr bench fs, medians of 1 run):"
	sed -n '/^files\/s/,/^$/p; /^ratios/,$p' "$out/fs.log" 2>/dev/null || :
	for f in "$out"/feed*.log; do
		[ -e "$f" ] || continue
		echo "-- $(basename "$f" .log):"
		sed -n '/^samples\/s/,$p' "$f" | grep . || tail -3 "$f"
	done
}

case ${1:-} in
pack) shift; pack "$@" ;;
run) run ;;
*) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
