#!/bin/sh
# What a reader can make the daemon keep is bounded. A batch step shows the
# view current at its first lookup, which keeps that older state (and the
# writer's journal of it) alive; steps made ready ahead pin nothing, and
# past 64 pinned steps the kernel is told to forget the oldest, whose
# FORGET unpins it: a reader of step 0 of 150 epochs, with a commit that changes
# a record after each, leaves the writer at most 64 journals, not 150, and
# every step it reads shows the state of its lookup.
. "$(dirname "$0")/lib.sh"
: "${ZR:?ZR must name the zr binary}"
make_ds
mount_ds
journals() { find "$DS" -maxdepth 1 -name 'journal*' | wc -l; }
e=0
while [ $e -lt 150 ]; do
	# reading offset 0 of step 0's txt queues steps 1 and 2 ahead
	head -c 1 "$MNT/.batches/seq,batch=4/epoch-$e/0/txt" >/dev/null || fail "epoch $e: step 0"
	printf "v$e" >"$T/v"
	"$ZR" set "$DS" 0 --txt="$T/v" >/dev/null || fail "zr set, epoch $e"
	e=$((e + 1))
done
# a step let go is unpinned by the kernel's FORGET, which comes on its own
# time; a journal goes at the next commit once no view holds its state
timeout 30 sh -c "until [ \$(find '$DS' -maxdepth 1 -name 'journal*' | wc -l) -le 66 ]; do
	'$ZR' set '$DS' 0 --txt='$T/v' >/dev/null || exit 1; done" ||
	fail "$(journals) journals after 150 epochs read, a commit each: pins are not bounded"
# a step let go shows, at its next lookup, the state the mount shows then
timeout 20 sh -c "until [ \"\$(cat '$MNT/txt/0.txt')\" = v149 ]; do :; done" ||
	fail "the mount does not show the last commit"
got=$(head -c 4 "$MNT/.batches/seq,batch=4/epoch-0/0/txt")
[ "$got" = "v149" ] || fail "epoch 0's step 0, let go, shows '$got', not v149"
fusermount3 -u "$MNT" || fail "unmount"
n=$(journals)
[ "$n" -eq 0 ] || {
	# the next writer applies what no reader holds any more
	"$ZR" set "$DS" 0 --txt="$T/v" >/dev/null || fail "zr set after unmount"
	[ "$(journals)" -eq 0 ] || fail "$(journals) journals left after the mount went"
}
