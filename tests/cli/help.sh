#!/bin/sh
# zr --help and every command's --help succeed and say how to use them;
# unknown commands and missing arguments are usage errors (exit 2).
. "$(dirname "$0")/lib.sh"

zr --help
expect_rc 0
expect_out_has 'usage: zr COMMAND*'
expect_out_has '  create *'
for c in create import put set rm cat export ls stat info verify rebalance sample bench; do
	zr "$c" --help
	expect_rc 0
	expect_out_has "usage: zr $c*"
done
zr
expect_rc 2
zr frobnicate
expect_rc 2
expect_err_has "zr: unknown command 'frobnicate'*"
zr --version
expect_rc 0
expect_out_has 'zr *[0-9].[0-9]*'
# the man pages format with no warning (an undefined macro, a bad request)
for m in zr.1 zrfs.8; do
	run groff -man -ww -z "$(dirname "$0")/../../packaging/man/$m"
	expect_rc 0
	expect_err_empty
done
