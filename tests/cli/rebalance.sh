#!/bin/sh
# zr rebalance reports utilisation before and after, keeps every record
# and leaves only the new chunk files.
. "$(dirname "$0")/lib.sh"

zr create ds --field a:bytes --chunk-size 2
for i in 1 2 3 4 5; do printf "record $i" >r$i; zr put ds --a=r$i; done
zr rebalance ds --chunk-size 4
expect_rc 0
expect_out_has 'utilisation  100.0% -> 100.0%'
expect_out_has 'chunks       3 (40 bytes) -> 2 (40 bytes)'
[ "$(ls ds/chunk | wc -l)" -eq 2 ] || fail "old chunks left: $(ls ds/chunk)"
for i in 1 2 3 4 5; do
	zr cat ds a $((i - 1))
	expect_out "record $i"
done
zr verify --quiet ds
expect_rc 0
zr rebalance ds --chunk-size nope
expect_rc 2
