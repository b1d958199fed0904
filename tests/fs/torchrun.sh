#!/bin/sh
# Multi-process training on PyTorch's own runtime: torchrun starts 2 ranks
# (gloo, loopback); each reads its own rank's batch directories of one
# epoch; an all_gather of the ids shows the ranks disjoint and covering the
# epoch; re-reading from step k reproduces the same batches.
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
# --redirects/--tee as per-rank maps: torch 1.13's torchrun cannot parse the
# plain defaults under Python 3.11 (its Std flag lookup misses NONE)
out=$(cd "$T" && timeout 300 torchrun --nproc_per_node=2 --nnodes=1 --master_addr=127.0.0.1 \
	--master_port=29517 --redirects 0:1,1:1 --tee 0:1,1:1 train.py "$MNT" 2>&1) ||
	fail "torchrun: $out"
echo "$out" | grep -q "rank 0: " && echo "$out" | grep -q "rank 1: " || fail "ranks did not report: $out"
