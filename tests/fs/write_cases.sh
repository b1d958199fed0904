#!/bin/sh
# The cases of a writable mount that once went wrong (new files listed late,
# a rename then a write, a file opened twice, O_APPEND, a large record
# opened by many writers, a file being written at SIGTERM), each with real
# system calls on a real mount: tests/fs/write_cases.py.
. "$(dirname "$0")/lib.sh"
: "${ZR:?ZR must name the zr binary}"
"$PY" "$(dirname "$0")/write_cases.py" "$ZR" "$ZRFS" "$MKDS" "$T" || fail "write_cases.py"
