# lib.sh - helpers for the command-line tests (sourced by each case).
#
# A case runs commands with `run`, then states what must hold with the
# expect_* functions; the first unmet expectation fails the case with both
# outputs shown. Every case works in its own scratch directory, removed on
# exit whatever happens. ZR is the zr binary under test (set by CTest).
set -u
: "${ZR:?ZR must name the zr binary}"
T=$(mktemp -d /tmp/zrcli-XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1

fail() {
	echo "FAIL: $*" >&2
	echo "--- command: $CMD" >&2
	echo "--- exit: $RC" >&2
	echo "--- stdout:" >&2
	cat "$T/.out" >&2
	echo "--- stderr:" >&2
	cat "$T/.err" >&2
	exit 1
}

# run CMD ARGS...: run it, keeping exit status, stdout and stderr.
run() {
	CMD="$*"
	"$@" >"$T/.out" 2>"$T/.err"
	RC=$?
}

zr() { run "$ZR" "$@"; }

expect_rc() { [ "$RC" -eq "$1" ] || fail "exit status $RC, expected $1"; }

# expect_out TEXT: stdout is exactly TEXT (trailing newlines aside).
expect_out() { [ "$(cat "$T/.out")" = "$1" ] || fail "stdout is not: $1"; }

# expect_out_has / expect_err_has GLOB: some line matches the glob.
has_line() {
	while IFS= read -r line; do
		# shellcheck disable=SC2254
		case $line in $2) return 0 ;; esac
	done <"$1"
	return 1
}
expect_out_has() { has_line "$T/.out" "$1" || fail "no stdout line matches '$1'"; }
expect_err_has() { has_line "$T/.err" "$1" || fail "no stderr line matches '$1'"; }
expect_err_empty() { [ ! -s "$T/.err" ] || fail "stderr is not empty"; }

# gen FILE SIZE SEED: a file of SIZE pseudo-random bytes.
gen() { head -c "$2" /dev/urandom >"$1"; }
