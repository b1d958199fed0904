#!/bin/sh
# zr verify exits 0 on a clean dataset and 1 listing each damaged record;
# --repair removes them; a dataset being written verifies clean.
. "$(dirname "$0")/lib.sh"

zr create ds --field a:bytes --chunk-size 2
printf 'abcdef' >r
for i in 1 2 3 4 5; do zr put ds --a=r; done
zr verify ds
expect_rc 0
expect_out 'ds: 5 records, 0 problems'
truncate -s 10 ds/chunk/1.zr
zr verify ds
expect_rc 1
expect_out_has 'field a, record 3: bytes 6..12 lie outside chunk/1.zr (10 bytes)'
expect_out_has 'ds: 5 records, 1 problem'
zr verify --quiet ds
expect_rc 1
expect_out 'ds: 5 records, 1 problem'
rm ds/meta.json
zr verify ds
expect_rc 1
expect_err_has '*ds/meta.json*'

# a byte changed in place: the value's checksum names it, and zr cat and
# zr export (which check what they read) refuse it; the others read
rm -rf ds
zr create ds --field a:bytes --chunk-size 2
for i in 1 2 3; do zr put ds --a=r; done
zr stat ds a 1
expect_out_has 'checksum   CRC-32C 53bceff1'
printf 'X' | dd of=ds/chunk/0.zr bs=1 seek=8 conv=notrunc 2>/dev/null
zr verify ds
expect_rc 1
expect_out_has 'field a, record 1: the 6 bytes in chunk 0 at 6 do not match their checksum (CRC-32C *, the entry says *): the bytes or their entry changed since they were written'
expect_out_has 'ds: 3 records, 1 problem'
zr cat ds a 1
expect_rc 1
expect_err_has '*ds/chunk/0.zr: field *a* record 1: the 6 bytes at 6 do not match their checksum*'
zr cat ds a 0
expect_rc 0
expect_out 'abcdef'
zr export dir ds a out
expect_rc 1
expect_err_has '*record 1: the 6 bytes at 6 do not match their checksum*'
zr verify ds --repair
expect_rc 0
expect_out_has 'ds: 2 records, 0 problems (1 record removed)'

# --repair removes each record with a problem, highest id first (the last
# record takes its id), says so, commits, and leaves a clean dataset
rm -rf ds
zr create ds --field a:bytes --field b:bytes:flate --chunk-size 2
i=0
while [ $i -lt 7 ]; do
	printf 'val%d' $i >r
	zr put ds --a=r --b=r
	i=$((i + 1))
done
truncate -s 10 ds/chunk/1.zr
zr verify ds --repair
expect_rc 0
expect_out_has 'field b, record 2: *outside chunk/1.zr (10 bytes)'
expect_out_has 'removed record 3: record 6 is now record 3'
expect_out_has 'removed record 2: record 5 is now record 2'
expect_out_has 'ds: 5 records, 0 problems (2 records removed)'
zr verify ds
expect_rc 0
expect_out 'ds: 5 records, 0 problems'
for want in 0:val0 1:val1 2:val5 3:val6 4:val4; do
	zr cat ds a "${want%%:*}"
	expect_out "${want#*:}"
	zr cat ds b "${want%%:*}"
	expect_out "${want#*:}"
done
zr verify ds --repair
expect_rc 0
expect_out 'ds: 5 records, 0 problems'

# --repair needs the dataset to itself: a writer holding it is named, and
# nothing is changed
truncate -s 10 ds/chunk/2.zr
exec 9<ds
flock -x 9 # a writer's lock on the directory, held by this shell
zr verify ds --repair
exec 9<&-
expect_rc 1
expect_err_has '*ds*'
zr verify ds
expect_rc 1
expect_out_has 'ds: 5 records, * problem*'

# a dataset being written: verify reads the last commit, and never calls
# what is being appended meanwhile a problem
rm -rf ds
zr create ds --field a:bytes
gen big 262144
( i=0; while [ $i -lt 150 ]; do "$ZR" put ds --a=big >/dev/null || exit 1; i=$((i + 1)); done ) &
writer=$!
checks=0
while kill -0 $writer 2>/dev/null; do
	zr verify ds --quiet
	[ "$RC" -eq 0 ] || fail "verify during appends: $(cat "$T/.out")"
	checks=$((checks + 1))
done
wait $writer || fail "the writer failed"
[ $checks -gt 0 ] || fail "no verify ran while the writer appended"
zr verify ds
expect_rc 0
expect_out 'ds: 150 records, 0 problems'
