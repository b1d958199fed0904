#!/bin/sh
# Real consumers: torchvision's ImageFolder over /by/label yields the same
# images and labels as the original directory; a torch DataLoader with 2
# workers over record files, and one over batch .npy files, produce tensors
# equal to the source data (with np.load, and with the load_npy of README's
# PyTorch example, which hands a worker's batch to the main process as a
# mapping of the batch file: the test checks it is one, and that it still
# holds the same data after the mount dropped its pages, drop_behind=1).
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
mount_ds -o batches=shuffle,seed=3,batch=4,tail=keep,drop_behind=1
"$PY" - "$MNT" "$T/src" "${README:?README must name README.md}" <<'PY' || fail "torch consumers"
import os, re, sys
import numpy as np, torch
from torch.utils.data import DataLoader, Dataset, get_worker_info
from torchvision.datasets import ImageFolder
mnt, src, readme = sys.argv[1:]
example = re.search(r"```python\n# example: pytorch\n(.*?)```", open(readme).read(), re.S).group(1)
exec(example[:example.index("class Steps")])  # imports, map_npy, Mapped, load_npy
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
                load_npy(f"{s}/label.npy", f"{self.d}/{self.steps[k + 1]}/label.npy"
                         if k + 1 < len(self.steps) else None), f"{s}/label.npy")
def mapped_files():
    return {l.split(maxsplit=5)[5].rstrip("\n") for l in open("/proc/self/maps") if l.count(" ") >= 5 and "/" in l}
all_labels = np.load(f"{mnt}/label.npy")
epoch = f"{mnt}/.batches/shuffle,seed=3,batch=4,tail=keep/epoch-0"
for workers in (0, 2):
    seen, kept = [], []
    for lab, ids, got, path in DataLoader(Batches(epoch), batch_size=None, num_workers=workers):
        assert torch.equal(lab, torch.from_numpy(all_labels[ids.numpy()]))
        assert got.dtype == torch.int64 and torch.equal(got, lab), (got, lab)
        # from a worker: a mapping of the batch file, not a copy in shared memory
        assert (path in mapped_files()) == (workers == 2) and not got.is_shared(), (workers, path)
        seen += ids.tolist()
        kept.append((got, lab))
    assert sorted(seen) == list(range(21))
    # drop_behind=1 drops a step's pages when the next is read, mapped or not:
    # mapped tensors read them again, the same
    assert all(torch.equal(got, lab) for got, lab in kept)
    got[0] = -1  # private: a write stays in this process
    assert np.load(path)[0] != -1
    del got, kept
PY
