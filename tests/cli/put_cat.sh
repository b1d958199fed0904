#!/bin/sh
# zr put appends records (ids printed, committed at once) and zr cat gives
# the bytes back exactly; missing fields and ids are errors with messages.
. "$(dirname "$0")/lib.sh"

zr create ds --field data:bytes:flate --field note:bytes
expect_rc 0
gen big 3000000
printf '' >empty
printf 'hello' >note
zr put ds --data=big --note=note
expect_rc 0
expect_out 0
zr put ds --data=empty
expect_out 1
printf 'from stdin' | run "$ZR" put ds --note=-
expect_out 2

run sh -c "\"$ZR\" cat ds data 0 >got"
expect_rc 0
cmp -s big got || fail "record 0 differs"
zr cat ds note 0
expect_out hello
run sh -c "\"$ZR\" cat ds data 1 | wc -c"
expect_out 0
zr cat ds note 2
[ "$(cat "$T/.out")" = "from stdin" ] || fail "stdin record differs"

zr cat ds note 1
expect_rc 1
expect_err_has "*record 1*missing*"
zr cat ds data 3
expect_rc 1
expect_err_has '*record 3 does not exist (length 3)'
zr cat ds nofield 0
expect_rc 1
expect_err_has "*no field 'nofield'*"
zr cat ds data x
expect_rc 2
zr put ds --nofield=big
expect_rc 2
zr put ds --data=/nonexistent/file
expect_rc 1
expect_err_has 'zr: put: /nonexistent/file: No such file or directory'
zr info ds
expect_out_has 'records      3'
