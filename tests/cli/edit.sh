#!/bin/sh
# zr set, rm, export dir, ls, stat: edits commit and say what moved; export
# reproduces the records as files named as in the mount.
. "$(dirname "$0")/lib.sh"

mkdir src
for i in 0 1 2 3 4 5; do printf "record $i" >src/$i.txt; done
: >src/6.txt
zr import dir src ds --field doc --no-names
expect_rc 0
zr ls ds doc
expect_out "0.txt
1.txt
2.txt
3.txt
4.txt
5.txt
6.txt"
zr stat ds doc 6
expect_out_has 'state      present, empty'
zr stat ds doc 1
expect_out_has 'size       8 bytes'
expect_out_has 'stored     8 bytes in chunk/0.zr at offset 8'

printf 'changed' >new
zr set ds 1 --doc=new
expect_rc 0
zr cat ds doc 1
expect_out changed
zr set ds 9 --doc=new
expect_rc 1
expect_err_has '*record 9 does not exist (length 7)'
zr set ds 1 --nofield=new
expect_rc 2

zr rm ds 2 6 4
expect_rc 0
expect_out "deleted record 6 (it was the last)
deleted record 4; record 5 (the last) now has id 4
deleted record 2; record 5 (the last) now has id 2
ds: 4 records"
zr cat ds doc 2
expect_out 'record 5'
zr cat ds doc 4
expect_rc 1
zr rm ds 4
expect_rc 1
expect_err_has '*record 4 does not exist (length 4)'
zr verify --quiet ds
expect_rc 0

zr export dir ds doc out
expect_rc 0
expect_out 'out: 4 files'
[ "$(ls out | tr '\n' ' ')" = "0.txt 1.txt 2.txt 3.txt " ] || fail "export names: $(ls out)"
[ "$(cat out/0.txt out/1.txt out/2.txt out/3.txt)" = "record 0changedrecord 5record 3" ] ||
	fail "export contents"
zr export dir ds doc out
expect_rc 1
expect_err_has '*out/0.txt: exists (OUT_DIR must be empty*'
zr export dir ds doc out/
expect_rc 1
expect_err_has 'zr: export: out/0.txt: exists (OUT_DIR must be empty*'
