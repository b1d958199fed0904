#!/bin/sh
# Real consumers: torchvision's ImageFolder over /by/label yields the same
# images and labels as the original directory; a torch DataLoader with 2
# workers over record files, and one over batch .npy files, produce tensors
# equal to the source data (with np.load, and with the load_npy of README's
# PyTorch example, which reads a batch with O_DIRECT where it is used: in the
# main process, or there after a worker handed over its path; the test checks
# the tensors are neither mappings nor shared memory, and that those kept hold
# the same data after the mount dropped the pages, drop_behind=1). Then that
# load_npy over the batches of a dataset with an f32 4x3 raw field and an i64
# flate one, in this process and through a worker's handover, against np.load.
. "$(dirname "$0")/lib.sh"
: "${ZR:?ZR must name the zr binary}"
"$PY" -c 'import torch, torchvision' 2>/dev/null || fail "python3-torch/torchvision missing (packaging/deps.sh installs them)"

mkdir -p "$T/src/cat" "$T/src/dog" "$T/src/ünï cödé"
i=0
for c in cat dog "ünï cödé"; do
	for k in 1 2 3 4 5 6 7; do head -c $((i * 37 + k * 11 + 1)) /dev/urandom >"$T/src/$c/img-$k.jpg"; done
	i=$((i + 1))
done
"$ZR" import dir "$T/src" "$DS" --label-from-parent label >/dev/null || fail "import"
# README's PyTorch helpers (imports, npy_tensor, read_npy, Read, load_npy), run by both parts
"$PY" - "${README:?README must name README.md}" >"$T/helpers.py" <<'PY' || fail "README's PyTorch example"
import re, sys
example = re.search(r"```python\n# example: pytorch\n(.*?)```", open(sys.argv[1]).read(), re.S).group(1)
print(example[:example.index("class Steps")])
PY
mount_ds -o batches=shuffle,seed=3,batch=4,tail=keep,drop_behind=1
"$PY" - "$MNT" "$T/src" "$T/helpers.py" <<'PY' || fail "torch consumers"
import os, sys
import numpy as np, torch
from torch.utils.data import DataLoader, Dataset, get_worker_info
from torchvision.datasets import ImageFolder
mnt, src, helpers = sys.argv[1:]
exec(open(helpers).read())
read = lambda p: open(p, "rb").read()
a, b = ImageFolder(f"{mnt}/by/label", loader=read), ImageFolder(src, loader=read)
assert a.classes == b.classes, (a.classes, b.classes)
assert len(a) == len(b) == 21
assert sorted((l, x) for x, l in a) == sorted((l, x) for x, l in b)

class Records(Dataset):
    def __init__(self, root, n):
        self.root, self.n = root, n
    def __len__(self):
        return self.n
    def __getitem__(self, i):
        data = np.frombuffer(read(f"{self.root}/data/{i}.jpg"), dtype=np.uint8)
        label = int(np.fromfile(f"{self.root}/label/{i}", dtype="<i8")[0])
        return torch.from_numpy(data.copy()), label

files = sorted(os.path.relpath(os.path.join(d, f), src) for d, _, fs in os.walk(src) for f in fs)
got = {}
for data, label in DataLoader(Records(mnt, 21), batch_size=None, num_workers=2):
    got.setdefault(int(label), []).append(bytes(data.numpy()))
want = {}
for rel in files:
    want.setdefault(b.class_to_idx[rel.split("/")[0]], []).append(read(f"{src}/{rel}"))
assert {k: sorted(v) for k, v in got.items()} == {k: sorted(v) for k, v in want.items()}

class Batches(Dataset):
    def __init__(self, d):
        self.d = d
        self.steps = sorted(os.listdir(d), key=int)
    def __len__(self):
        return len(self.steps)
    def __getitem__(self, k):
        s = f"{self.d}/{self.steps[k]}"
        return (torch.from_numpy(np.load(f"{s}/label.npy")),
                torch.from_numpy(np.fromfile(f"{s}/ids", "<u8").astype(np.int64)),
                load_npy(f"{s}/label.npy"), f"{s}/label.npy")
def mapped_files():
    return {l.split(maxsplit=5)[5].rstrip("\n") for l in open("/proc/self/maps") if l.count(" ") >= 5 and "/" in l}
all_labels = np.load(f"{mnt}/label.npy")
epoch = f"{mnt}/.batches/shuffle,seed=3,batch=4,tail=keep/epoch-0"
for workers in (0, 2):
    seen, kept = [], []
    for lab, ids, got, path in DataLoader(Batches(epoch), batch_size=None, num_workers=workers):
        assert torch.equal(lab, torch.from_numpy(all_labels[ids.numpy()]))
        assert got.dtype == torch.int64 and torch.equal(got, lab), (got, lab)
        # read into this process's own memory: not a mapping of the batch file and,
        # from a worker, not a copy in shared memory
        assert path not in mapped_files() and not got.is_shared(), (workers, path)
        seen += ids.tolist()
        kept.append((got, lab))
    assert sorted(seen) == list(range(21))
    # drop_behind=1 dropped each step's pages when the next was read: the tensors kept theirs
    assert all(torch.equal(got, lab) for got, lab in kept)
    del got, kept
PY

fusermount3 -u "$MNT" || fail "unmount"
DS=$T/ds2
make_ds --records 50
mount_ds -o batches=shuffle,seed=5,batch=8,tail=keep
"$PY" - "$MNT" "$T/helpers.py" <<'PY' || fail "load_npy of f32 4x3 raw and i64 flate batches"
import os, pickle, sys
import numpy as np, torch
mnt, helpers = sys.argv[1:]
exec(open(helpers).read())
epoch = f"{mnt}/.batches/shuffle,seed=5,batch=8,tail=keep/epoch-0"
steps = sorted(os.listdir(epoch), key=int)
assert len(steps) == 7, steps
for k in steps:
    for field, dtype, shape in (("vec", torch.float32, (4, 3)), ("lab", torch.int64, ())):
        path = f"{epoch}/{k}/{field}.npy"
        want = torch.from_numpy(np.load(path))
        rows = 50 - 8 * int(k) if k == steps[-1] else 8
        for got in (read_npy(path), pickle.loads(pickle.dumps(Read(path)))):
            assert got.dtype == dtype and got.shape == (rows,) + shape, (path, got.shape)
            assert torch.equal(got, want), path
PY
