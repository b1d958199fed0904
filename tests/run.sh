#!/bin/sh
# Set up and run the whole test suite, as CI does:
#   1. install the Debian packages the build and the tests need (if missing);
#   2. build with -Werror and run every test through CTest (the mount
#      tests once through /dev/fuse and once through io_uring rings);
#   3. build again with AddressSanitizer + UndefinedBehaviorSanitizer and
#      run the suite once more;
#   4. build the core unit tests once more and run them under valgrind's
#      memcheck (errors and definite leaks in any process fail them);
#   5. build the libFuzzer targets with clang and run each for a short while
#      from its seed corpus (ZR_FUZZ_SECONDS, default 20).
# Build trees: build/ci, build/asan, build/valgrind and build/fuzz (override
# the root with ZR_BUILD_ROOT).
# With --quick, steps 1 and 2 only: the plain build's suite (what a change
# is first checked with; CI runs everything).
# Exit status 0 only when every test passed in every build.
set -eu
quick=false
case "${1:-}" in
--quick) quick=true ;;
"") ;;
-h | --help)
	sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
	exit 0
	;;
*)
	echo "run.sh: unknown option '$1' (--quick, --help)" >&2
	exit 2
	;;
esac
top=$(cd "$(dirname "$0")/.." && pwd)
root=${ZR_BUILD_ROOT:-$top/build}
jobs=$(nproc 2>/dev/null || echo 2)

"$top/packaging/deps.sh"

# The mount tests run on both transports: /dev/fuse, and io_uring rings
# (fs.*.uring), which the kernel serves only once root sets a module
# parameter. As root, the run turns it on and puts it back afterwards;
# otherwise those cases are reported as skipped, saying why.
p=/sys/module/fuse/parameters/enable_uring
[ -e "$p" ] || modprobe fuse 2>/dev/null || true
if [ "$(id -u)" = 0 ] && [ -w "$p" ] && [ "$(cat "$p")" = N ]; then
	echo Y >"$p"
	trap 'echo N >"$p"' EXIT
	echo "==> FUSE over io_uring turned on for this run ($p)"
fi

suite() { # NAME CMAKE-ARGS...
	name=$1
	shift
	echo "==> $name build"
	cmake -S "$top" -B "$root/$name" "$@" >/dev/null
	cmake --build "$root/$name" -j "$jobs" >/dev/null
	echo "==> $name tests"
	(cd "$root/$name" && ctest --output-on-failure -j "$jobs")
}

suite ci -DZR_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
if $quick; then
	echo "==> all tests passed (plain build; without --quick: ASan+UBSan, valgrind and fuzz too)"
	exit 0
fi
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	suite asan -DZR_WERROR=ON -DCMAKE_BUILD_TYPE=Debug -DZR_SANITIZE=ON
suite valgrind -DZR_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZR_VALGRIND=ON
CC=clang suite fuzz -DZR_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	-DZR_FUZZ_SECONDS="${ZR_FUZZ_SECONDS:-20}"
echo "==> all tests passed (plain, ASan+UBSan, valgrind and fuzz builds)"
