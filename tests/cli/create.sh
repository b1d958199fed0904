#!/bin/sh
# zr create makes a dataset with the fields asked for, refuses bad specs
# with a usage error and never touches a non-empty directory.
. "$(dirname "$0")/lib.sh"

zr create ds --field image:u8:flate:shape=2x3:ext=bin --field label:i64:shape= --chunk-size 10
expect_rc 0
expect_err_empty
[ -f ds/meta.json ] && [ -f ds/image.offset ] && [ -f ds/label.offset ] && [ -d ds/chunk ] ||
	fail "dataset files missing"
zr info ds
expect_rc 0
expect_out_has 'records      0'
expect_out_has '             image *u8 *flate *(2,3) *bin'
expect_out_has '             label *i64 *raw *() *-'

for bad in '../x:u8' '.hidden:u8' 'a/b:u8' 'x:u9' 'x:u8:lz4' 'x:u8:shape=0' 'x:u8:ext=a/b' 'x'; do
	zr create bad --field "$bad"
	expect_rc 2
	expect_err_has 'zr: *'
	[ ! -e bad ] || fail "'$bad' left a directory behind"
done
zr create bad --field a:u8 --field a:u16
expect_rc 2
expect_err_has "*given twice*"
zr create bad --field a:u8 --chunk-size 0
expect_rc 2

mkdir full && touch full/keep
zr create full --field a:u8
expect_rc 1
expect_err_has 'zr: create: full: exists and is not empty'
[ -f full/keep ] && [ ! -e full/meta.json ] || fail "non-empty directory touched"
