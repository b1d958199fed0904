#!/bin/sh
# Multi-process training on PyTorch's own runtime: torchrun starts 2 ranks
# (gloo, loopback); each reads its own rank's batch directories of one
# epoch; an all_gather of the ids shows the ranks disjoint and covering the
# epoch; re-reading from step k reproduces the same batches. Then the
# README's resume example: 2 ranks stop after 3 steps, 1 rank goes on from
# the position they saved, and every record is read once.
. "$(dirname "$0")/lib.sh"
make_ds --records 203
mount_ds
cat >"$T/train.py" <<'PY'
import os, sys
import numpy as np, torch, torch.distributed as dist
mnt = sys.argv[1]
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
epoch = f"{mnt}/.batches/shuffle,seed=7,batch=8,rank={rank},world={world},tail=keep/epoch-2"
steps = sorted(os.listdir(epoch), key=int)
ids = [np.fromfile(f"{epoch}/{k}/ids", "<u8").astype(np.int64) for k in steps]
lab = [np.load(f"{epoch}/{k}/lab.npy") for k in steps]
mine = torch.from_numpy(np.concatenate(ids))
sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
dist.all_gather(sizes, torch.tensor([len(mine)]))
assert len(set(int(s) for s in sizes)) <= 2  # keep tail: sizes differ by less than a batch
pad = torch.full((int(max(sizes)),), -1, dtype=torch.int64)
pad[: len(mine)] = mine
everyone = [torch.zeros_like(pad) for _ in range(world)]
dist.all_gather(everyone, pad)
if rank == 0:
    allids = torch.cat(everyone)
    allids = allids[allids >= 0].tolist()
    assert sorted(allids) == list(range(203)), "ranks do not cover the epoch exactly once"
# restart at step 3: the same batches again
for k in steps[3:]:
    again = np.fromfile(f"{epoch}/{k}/ids", "<u8").astype(np.int64)
    assert (again == ids[int(k)]).all()
    assert (np.load(f"{epoch}/{k}/lab.npy") == lab[int(k)]).all()
    assert (lab[int(k)] == again % 10 - 3).all()  # labels of mkds: id % 10 - 3
dist.barrier()
dist.destroy_process_group()
print(f"rank {rank}: {len(mine)} ids in {len(steps)} steps")
PY
# a port nobody listens on now: the case runs beside its .uring twin
free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# --redirects/--tee as per-rank maps: torch 1.13's torchrun cannot parse the
# plain defaults under Python 3.11 (its Std flag lookup misses NONE)
out=$(cd "$T" && timeout 300 torchrun --nproc_per_node=2 --nnodes=1 --master_addr=127.0.0.1 \
	--master_port=$(free_port) --redirects 0:1,1:1 --tee 0:1,1:1 train.py "$MNT" 2>&1) ||
	fail "torchrun: $out"
echo "$out" | grep -q "rank 0: " && echo "$out" | grep -q "rank 1: " || fail "ranks did not report: $out"

# the README's resume example under torchrun: 2 ranks read 3 steps and
# save the position; 1 rank goes on from it; between them every record of
# the epoch is read once (checked with zr sample of the two runs' specs)
: "${ZR:?ZR must name the zr binary}"
: "${README:?README must name README.md}"
fusermount3 -u "$MNT" || fail "unmount"
for c in tabby siamese persian; do
	mkdir -p "$T/photos/$c"
	for k in 1 2 3 4 5 6 7 8 9 10 11; do head -c $((k * 50)) /dev/urandom >"$T/photos/$c/$k.jpg"; done
done
rm -rf "$DS" && "$ZR" import dir "$T/photos" "$DS" --field image --label-from-parent label >/dev/null ||
	fail "import"
mount_ds
"$PY" - "$README" "$T/resume.py" <<'PY' || fail "extracting the resume example"
import re, sys
text = open(sys.argv[1]).read()
body = re.search(r"```python\n# example: resume\n(.*?)```", text, re.S).group(1)
open(sys.argv[2], "w").write(body)
PY
sed -i "s|/mnt/cats|$MNT|g" "$T/resume.py"
# the worst schedule for the example: rank 1 starts once rank 0 has saved its
# first step (or after 2 s, as it does when the example keeps it waiting); each
# rank then says where it started and the last step it read
{
	cat <<'PY'
import os, time
if os.environ.get("RANK") == "1" and not os.path.exists("position.txt"):
    late = time.monotonic() + 2
    while not os.path.exists("position.txt") and time.monotonic() < late:
        time.sleep(0.01)
PY
	cat "$T/resume.py"
	echo 'print(f"rank {rank}: from {start} to step {k}", flush=True)'
} >"$T/resume.tmp" && mv "$T/resume.tmp" "$T/resume.py"
mkdir "$T/job"
run_ranks() { # run_ranks N [MAX_STEPS]
	(cd "$T/job" && env ${2:+MAX_STEPS=$2} timeout 300 torchrun --nproc_per_node=$1 --nnodes=1 \
		--master_addr=127.0.0.1 --master_port=$(free_port) --redirects 0:1,1:1 --tee 0:1,1:1 \
		../resume.py >"$T/torchrun.out" 2>&1) ||
		fail "torchrun with $1 ranks: $(grep -v '^ *$' "$T/torchrun.out" | tail -60)"
}
ran() { # ran RANK FROM LAST: rank RANK said it started at FROM and read to step LAST
	grep -q "rank $1: from $2 to step $3\$" "$T/torchrun.out" ||
		fail "rank $1 did not read from $2 to step $3: $(grep -v '^ *$' "$T/torchrun.out" | tail -60)"
}
run_ranks 2 3
ran 0 0 2 && ran 1 0 2
[ "$(cat "$T/job/position.txt")" = 24 ] || fail "2 ranks x 3 steps x 4 saved $(cat "$T/job/position.txt")"
run_ranks 1
ran 0 24 2
[ "$(cat "$T/job/position.txt")" = 33 ] || fail "the resumed run ended at $(cat "$T/job/position.txt")"
S=shuffle,seed=42,batch=4
{
	"$ZR" sample "$S,rank=0,world=2,tail=keep" --n 33 --steps 0:3
	"$ZR" sample "$S,rank=1,world=2,tail=keep" --n 33 --steps 0:3
	"$ZR" sample "$S,rank=0,world=1,tail=keep,from=24" --n 33
} 2>/dev/null | tr ' ' '\n' | sort -n >"$T/read"
seq 0 32 | diff - "$T/read" >/dev/null || fail "the two runs did not read every record once: $(cat "$T/read" | tr '\n' ' ')"
