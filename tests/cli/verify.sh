#!/bin/sh
# zr verify exits 0 on a clean dataset and 1 listing each damaged record.
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
