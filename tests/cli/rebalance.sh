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

# a dataset of format 1 (no checksums, as earlier versions wrote) takes
# writes and stays format 1; a rebalance makes it format 2, says so, and
# every value verifies and reads
rm -rf ds1
zr create ds1 --field a:bytes --format 1
for i in 1 2 3; do zr put ds1 --a=r$i; done
zr info ds1
expect_out_has 'format       zrecord 1 (no checksums: zr rebalance adds them), generation 3, *'
zr rebalance ds1
expect_rc 0
expect_out_has 'format       1 -> 2 (every value has its checksum)'
expect_out_has 'chunks       1 (24 bytes) -> 1 (24 bytes)'
zr info ds1
expect_out_has 'format       zrecord 2, generation 4, *'
zr verify ds1
expect_out 'ds1: 3 records, 0 problems'
for i in 1 2 3; do zr cat ds1 a $((i - 1)); expect_out "record $i"; done
zr rebalance ds1
expect_rc 0
grep -q format "$T/.out" && fail "a second rebalance says the format changed"
zr create ds3 --field a:bytes --format 3
expect_rc 2
expect_err_has '*--format*'
