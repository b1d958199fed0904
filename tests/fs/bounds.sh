#!/bin/sh
# What a reader can make the daemon keep is bounded. A batch step shows the
# view current at its first lookup, which keeps that older state (and the
# writer's journal of it) alive; steps made ready ahead pin nothing, and
# past 64 states held the kernel is told to forget the steps of the oldest,
# whose FORGET unpins them: a reader of step 0 of 150 epochs, with a commit
# that changes a record after each, leaves the writer at most 64 journals,
# not 150, and every step it reads shows the state of its lookup, also
# after the kernel forgets the steps held of itself. Once readers stop, the
# steps held are let go within seconds: a commit then leaves no journal of
# what they showed.
# Record files and steps the kernel keeps cached after a commit, unused
# (or once closed), are let go the same way.
#
# The tables of specs (4,096) and of epochs opened (65,536) are bounded the
# same way: 5,000 specs and 70,000 epochs looked up one after the other
# leave every new spec and epoch working, while an epoch whose file and
# directory are held open keeps its numbers and its order throughout.
. "$(dirname "$0")/lib.sh"
: "${ZR:?ZR must name the zr binary}"
make_ds --records 300
mount_ds
journals() { find "$DS" -maxdepth 1 -name 'journal*' | wc -l; }
e=0
while [ $e -lt 150 ]; do
	# reading offset 0 of step 0's txt queues steps 1 and 2 ahead
	head -c 1 "$MNT/.batches/seq,batch=4/epoch-$e/0/txt" >/dev/null || fail "epoch $e: step 0"
	printf "v$e" >"$T/v"
	"$ZR" set "$DS" 0 --txt="$T/v" >/dev/null || fail "zr set, epoch $e"
	# the next epoch's step is looked up once the mount shows this commit
	# (it follows commits of other processes on its own time)
	timeout 20 sh -c "until [ \"\$(cat '$MNT/txt/0.txt')\" = v$e ]; do :; done" ||
		fail "the mount does not show commit v$e"
	e=$((e + 1))
done
# a step let go is unpinned by the kernel's FORGET, which comes on its own
# time; a journal goes at the next commit once no view holds its state
timeout 30 sh -c "until [ \$(find '$DS' -maxdepth 1 -name 'journal*' | wc -l) -le 66 ]; do
	'$ZR' set '$DS' 0 --txt='$T/v' >/dev/null || exit 1; done" ||
	fail "$(journals) journals after 150 epochs read, a commit each: pins are not bounded"
# the steps held keep their views when the kernel forgets them of itself
# (here, all it can): a reader of a step's files one after another sees one
# state. A step looked up, a commit, the kernel's caches dropped:
head -c 1 "$MNT/.batches/seq,batch=4/epoch-150/0/txt" >/dev/null || fail "epoch 150: step 0"
printf v150 >"$T/v"
"$ZR" set "$DS" 0 --txt="$T/v" >/dev/null || fail "zr set v150"
timeout 20 sh -c "until [ \"\$(cat '$MNT/txt/0.txt')\" = v150 ]; do :; done" ||
	fail "the mount does not show commit v150"
echo 2 >/proc/sys/vm/drop_caches
got=$(head -c 4 "$MNT/.batches/seq,batch=4/epoch-150/0/txt")
[ "$got" = "v149" ] || fail "epoch 150's step 0, forgotten by the kernel, shows '$got', not v149"
# a step let go shows, at its next lookup, the state the mount shows then
got=$(head -c 4 "$MNT/.batches/seq,batch=4/epoch-0/0/txt")
[ "$got" = "v150" ] || fail "epoch 0's step 0, let go, shows '$got', not v150"
# readers stopped: within seconds (5 s idle) the steps held are let go, and a
# commit leaves no journal of the states they showed (it removes those no
# view holds)
no_journal_left() {
	"$ZR" set "$DS" 0 --txt="$T/v" >/dev/null || fail "zr set"
	[ "$(journals)" -eq 0 ]
}
within 20 no_journal_left ||
	fail "$(journals) journals 20 s after the last reader: the steps held keep their views"
# the spec and epoch tables: more of each than they hold at once
"$PY" - "$MNT/.batches" "$ZR" 300 <<'PY' || fail "spec and epoch tables"
import os, subprocess, sys
B, zr, n = sys.argv[1], sys.argv[2], sys.argv[3]
def want(spec, epoch, step):
    out = subprocess.run([zr, "sample", spec, "--n", n, "--epoch", str(epoch)],
                         check=True, capture_output=True, text=True).stdout
    return [int(x) for x in out.splitlines()[step].split()]
def ids(path):
    with open(path, "rb") as f:
        b = f.read()
    return [int.from_bytes(b[i:i + 8], "little") for i in range(0, len(b), 8)]
listed = sorted(os.listdir(B))
held_spec = "shuffle,seed=5,batch=3"
held_dir = os.open(f"{B}/{held_spec}/epoch-9", os.O_RDONLY | os.O_DIRECTORY)
held = os.open(f"{B}/{held_spec}/epoch-9/1/ids", os.O_RDONLY)
held_ino = os.fstat(held).st_ino
first = os.pread(held, 4096, 0)
assert ids(f"{B}/{held_spec}/epoch-9/1/ids") == want(held_spec, 9, 1)
for seed in range(5000):
    os.stat(f"{B}/shuffle,seed={seed},batch=4")
for epoch in range(70000):
    os.stat(f"{B}/seq,batch=4/epoch-{epoch}")
# new ones work, with the sampler's ids
for spec, epoch in (("shuffle,seed=123456,batch=4", 0), ("seq,batch=256", 0),
                    ("seq,batch=4", 70001), ("shuffle,seed=17,batch=4", 3)):
    assert ids(f"{B}/{spec}/epoch-{epoch}/0/ids") == want(spec, epoch, 0), (spec, epoch)
# what is held kept its numbers and its order; the listing did not change
assert os.pread(held, 4096, 0) == first
assert os.stat(f"{B}/{held_spec}/epoch-9/1/ids").st_ino == held_ino
assert ids(f"{B}/{held_spec}/epoch-9/2/ids") == want(held_spec, 9, 2)
assert sorted(os.listdir(held_dir)) == sorted(os.listdir(f"{B}/{held_spec}/epoch-9"))
assert sorted(os.listdir(B)) == listed
PY
# Record files looked up before a commit changes them: the kernel keeps a
# name and an inode it does not use until memory is short, and each old
# number shows the state it showed, which the writer keeps a journal for.
# The next path through the directory has the kernel drop the names under
# it, but a directory nobody reads again keeps them: the mount has the
# kernel drop those not open at once and those open once closed. A file
# held open across the commit keeps its bytes until it is closed, and
# within seconds of that a commit leaves no journal.
for i in 1 2 3 4 6 7 8; do # 5 has no txt
	same "$MNT/txt/$i.txt" "$REF/txt/$i.txt"
done
exec 3<"$MNT/txt/9.txt"
for i in 1 2 3 4 6 7 8 9; do
	printf "new$i" >"$T/v"
	"$ZR" set "$DS" "$i" --txt="$T/v" >/dev/null || fail "zr set $i"
done
# (waited for through the root: a path through txt/ would have the kernel
# drop the names under it, as a next reader of that directory does)
within 20 cmp -s "$MNT/meta.json" "$DS/meta.json" || fail "the mount does not show commit new9"
cmp -s - "$REF/txt/9.txt" <&3 || fail "record 9, held open, changed under its reader"
no_journal_left && fail "the state record 9's open file shows went while it was open"
exec 3<&-
within 20 no_journal_left ||
	fail "$(journals) journals 20 s after record files read before a commit were let go"
# A step let go while a file of it is open keeps its view until it is
# closed, and then goes (the kernel is asked again every second).
step="$MNT/.batches/seq,batch=4/epoch-151/0/txt"
cat "$step" >"$T/step" || fail "epoch 151's step 0"
exec 3<"$step"
printf v151 >"$T/v"
"$ZR" set "$DS" 0 --txt="$T/v" >/dev/null || fail "zr set v151"
within 20 cmp -s "$MNT/meta.json" "$DS/meta.json" || fail "the mount does not show commit v151"
no_journal_left && fail "the state a step's open file shows went while it was open"
# other steps are read; idle for hold_ms, it is let go while open
k=1
while [ $k -le 64 ]; do
	head -c 1 "$MNT/.batches/seq,batch=4/epoch-151/$k/txt" >/dev/null || fail "epoch 151's step $k"
	k=$((k + 1))
done
cmp -s - "$T/step" <&3 || fail "epoch 151's step 0, held open, changed under its reader"
no_journal_left && fail "the state a step's open file shows went while it was open"
exec 3<&-
within 20 no_journal_left ||
	fail "$(journals) journals 20 s after a step let go while open was closed"
unmount_wait
n=$(journals)
[ "$n" -eq 0 ] || {
	# the next writer applies what no reader holds any more
	"$ZR" set "$DS" 0 --txt="$T/v" >/dev/null || fail "zr set after unmount"
	[ "$(journals)" -eq 0 ] || fail "$(journals) journals left after the mount went"
}
# A step keeps its state while it is held, also when the table
# of epochs gives its epoch back (more than half of 65,536 epochs opened
# after it, the kernel told to forget the names under /.batches): a reader
# of a step's ids, then its offsets, then its data sees one state, with a
# commit that moves a record of the step and 70,000 epochs looked up in
# between. hold_ms keeps the step held for as long as the
# lookups take, however slow the build.
mount_ds -o hold_ms=3600000
"$PY" - "$MNT" "$ZR" "$DS" <<'PY' || fail "a step whose epoch the table gave back"
import os, subprocess, sys, time
M, zr, ds = sys.argv[1:]
step = f"{M}/.batches/seq,batch=4/epoch-5/2"
def read(path):
    with open(path, "rb") as f:
        return f.read()
def value(i):
    try:
        return read(f"{M}/txt/{i}.txt")
    except FileNotFoundError: # a missing value: none in the batch
        return b""
ids, offsets = read(f"{step}/ids"), read(f"{step}/txt.offsets")
want = b"".join(value(i) for i in range(8, 12))
# record 9 removed: the last record moves into its place
subprocess.run([zr, "rm", ds, "9"], check=True, stdout=subprocess.DEVNULL)
meta, end = read(f"{ds}/meta.json"), time.monotonic() + 20
while read(f"{M}/meta.json") != meta:
    assert time.monotonic() < end, "the mount does not show the removal"
for epoch in range(6, 70006):
    os.stat(f"{M}/.batches/seq,batch=4/epoch-{epoch}")
data = read(f"{step}/txt")
assert read(f"{step}/ids") == ids
assert read(f"{step}/txt.offsets") == offsets, "the step's offsets changed"
offs = [int.from_bytes(offsets[i:i + 8], "little") for i in range(0, len(offsets), 8)]
assert offs[-1] == len(data), f"offsets end at {offs[-1]}, the data is {len(data)} bytes"
assert data == want, f"the step's records are not those of its state: {data!r}"
PY
unmount_wait
