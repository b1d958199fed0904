#!/bin/sh
# zr sample prints one batch per line, canonical spec on stderr; a bad spec
# is a usage error with the parser's reason.
. "$(dirname "$0")/lib.sh"

zr sample seq,batch=4 --n 10
expect_rc 0
expect_out "0 1 2 3
4 5 6 7"
expect_err_has 'seq,batch=4: 2 steps per epoch'
zr sample window,window=4,stride=3 --n 10 --epoch 1 --steps 1:3
expect_out "5 6 7 8
8 9 0 1"
zr sample seq,batch=4,tail=keep,rank=1,world=2 --n 10
expect_out "4 5 6 7
9"
# a shuffle's epoch, over both ranks, is a permutation of the ids
zr sample shuffle,seed=7,batch=5,world=2,rank=0 --n 20
cp "$T/.out" r0
zr sample shuffle,seed=7,batch=5,world=2,rank=1 --n 20
cp "$T/.out" r1
cat r0 r1 | tr ' ' '\n' | sort -n >all
seq 0 19 | cmp -s - all || fail "ranks do not cover 0..19 exactly once"
# the same spec in another key order names the same sampler
zr sample shuffle,batch=5,seed=7,rank=1,world=2 --n 20
cmp -s "$T/.out" r1 || fail "key order changed the output"
expect_err_has 'shuffle,seed=7,batch=5,rank=1,world=2: 2 steps per epoch'

zr sample shuffle,seed=042 --n 10
expect_rc 2
expect_err_has "*leading zeros*"
zr sample shuffle,batch=64 --n 10
expect_rc 2
expect_err_has "*no full batch*"
zr sample seq --n 10 --steps 3:2
expect_rc 2
expect_err_has "zr: --steps: 3:2 is an empty range*"
zr sample seq --n 10 --steps 1:0
expect_rc 2
expect_err_has "zr: --steps: 1:0 is an empty range*"
zr sample seq --n 10 --steps 0:11
expect_rc 2
zr sample seq
expect_rc 2
