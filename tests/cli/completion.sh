#!/bin/bash
# The bash completions the packages install (packaging/completion/), run as
# bash runs them on a TAB: zr's commands, kinds and options are those its
# --help texts list, zrfs's -o options those zrfs --help lists (after a
# comma too), and operands complete as files and directories.
# ZR, ZRFS: the binaries; SRC: the source tree.
set -u
: "${ZR:?}" "${ZRFS:?}" "${SRC:?}"
. "$SRC/packaging/completion/zr"
. "$SRC/packaging/completion/zrfs"
T=$(mktemp -d /tmp/zrcomp-XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() {
	echo "FAIL: $*" >&2
	exit 1
}
# tab WORD...: what a TAB after these words offers, sorted, a line
tab() {
	COMP_WORDS=("$@")
	COMP_CWORD=$(($# - 1))
	COMPREPLY=()
	case $1 in *zrfs) _zrfs ;; *) _zr ;; esac
	printf '%s\n' "${COMPREPLY[@]}" | sort
}
expect() { # expect WHAT GOT WANT
	[ "$2" = "$3" ] || fail "$1: offered '$(echo "$2" | paste -sd'|')', not '$(echo "$3" | paste -sd'|')'"
}

cmds=$("$ZR" --help | awk '/^Commands:/ { on = 1; next } on && NF == 0 { exit } on { print $1 }' | sort)
[ "$(echo "$cmds" | wc -l)" -ge 10 ] || fail "zr --help lists no commands: $cmds"
expect "zr TAB" "$(tab "$ZR" "")" "$cmds"
expect "zr ex TAB" "$(tab "$ZR" ex)" "export"
expect "zr import TAB" "$(tab "$ZR" import "")" "$(printf '%s\n' dir flat npy tar)"
expect "zr export TAB" "$(tab "$ZR" export "")" "$(printf '%s\n' dir npy tar)"
for b in store sampler fs batches import; do
	tab "$ZR" bench "" | grep -qx "$b" || fail "zr bench TAB does not offer $b: $(tab "$ZR" bench "")"
done
expect "zr verify --TAB" "$(tab "$ZR" verify --)" "$(printf '%s\n' --json --quiet --repair)"
expect "zr sample x --j TAB" "$(tab "$ZR" sample x --j)" "--json"
tab "$ZR" bench fs -- | grep -qx -- --threads || fail "zr bench fs --TAB does not offer --threads"
tab "$ZR" import dir src --l | grep -qx -- --label-from-parent || fail "zr import dir --l TAB"
# every long option of every command is offered after -- (the texts are
# the one list)
for c in $cmds; do
	want=$("$ZR" "$c" --help | grep -o -- '--[a-z][a-z-]*' | sort -u)
	expect "zr $c --TAB" "$(tab "$ZR" "$c" --)" "$want"
done
mkdir -p "$T/data set/sub" && : >"$T/file"
expect "zr info DIR TAB" "$(tab "$ZR" info "$T/da")" "$T/data set"
expect "zr cat FILE TAB" "$(tab "$ZR" cat ds img "$T/fi")" "$T/file"

expect "zrfs -o writ TAB" "$(tab "$ZRFS" -o writ)" "writable"
expect "zrfs -o ro,wri TAB" "$(tab "$ZRFS" -o ro,wri)" "ro,writable"
expect "zrfs -o commit_m TAB" "$(tab "$ZRFS" -o commit_m)" "commit_ms="
expect "zrfs -o uring TAB" "$(tab "$ZRFS" -o uring)" "$(printf '%s\n' uring uring_threads=)"
for o in ro rw writable allow_other list_views log= cache= batches= max_threads=; do
	tab "$ZRFS" -o "" | grep -qx -- "$o" || fail "zrfs -o TAB does not offer $o"
done
expect "zrfs DIR TAB" "$(tab "$ZRFS" "$T/")" "$T/data set"
expect "zrfs -TAB" "$(tab "$ZRFS" -)" "$(printf '%s\n' -V -d -f -h -o -s --help --version | sort)"
echo "ok: zr and zrfs complete what their --help texts list"
