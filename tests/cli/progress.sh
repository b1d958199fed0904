#!/bin/sh
# On a terminal, zr verify, rebalance and export draw a progress line on
# stderr that ends at the total (as zr import does); a problem zr verify
# prints clears it first, so the problem's line is whole; not on a
# terminal, nothing of it is printed. script(1) gives the terminal.
. "$(dirname "$0")/lib.sh"

mkdir src
i=0
while [ $i -lt 300 ]; do
	printf 'value %d' $i >"src/$i.txt"
	i=$((i + 1))
done
zr import dir src ds # 8 values a record: data, name, 4 times and modes, owner, group
expect_rc 0
# on_tty CMD...: run CMD with a terminal for its output (both streams)
on_tty() { run script -qec "$*" /dev/null; }

on_tty "$ZR" verify ds
expect_rc 0
expect_out_has '*2400/2400 values *values/s*ETA 0 s*'
expect_out_has '*ds: 300 records, 0 problems*'
on_tty "$ZR" export dir ds out
expect_rc 0
expect_out_has '*300/300 records *records/s*MB/s*'
on_tty "$ZR" export tar ds out.tar
expect_rc 0
expect_out_has '*300/300 records *records/s*MB/s*'
on_tty "$ZR" rebalance ds
expect_rc 0
expect_out_has '*2400/2400 values*'
# not on a terminal: no progress
zr verify ds
expect_rc 0
[ ! -s "$T/.err" ] || fail "a progress line without a terminal: $(cat "$T/.err")"
zr export dir ds out2
expect_rc 0
[ ! -s "$T/.err" ] || fail "a progress line without a terminal: $(cat "$T/.err")"
# a problem: its line whole, the progress line cleared before it
c=$(ls ds/chunk | head -1)
truncate -s 100 "ds/chunk/$c"
on_tty "$ZR" verify ds
expect_rc 1
# what the terminal shows: a carriage return starts over, ESC [ K clears
esc=$(printf '\033')
tr '\r' '\n' <"$T/.out" | sed "s/^$esc\[K//" >lines
n=$(grep -c "^field [a-z]*, record [0-9]*: bytes .* lie outside chunk/$c (100 bytes)" lines)
[ "$n" -gt 100 ] || fail "$n lines of problems: $(grep -a -m3 'lie outside' lines)"
grep -a 'lie outside' lines | grep -v '^field ' >cut
[ ! -s cut ] || fail "a problem's line begins after the progress line: $(head -2 cut)"
echo "ok: progress lines on a terminal, none elsewhere"
