#!/usr/bin/python3
"""bench_torch.py - a PyTorch training-style loop over zrfs and a native directory.

usage: tools/bench_torch.py [--records N] [--size BYTES] [--runs R] [--dir DIR]
                            [--zr PATH] [--zrfs PATH]

Builds N records of SIZE bytes (default 50000 x 8192) as a dataset (one u8
field 'data' of shape SIZE, imported with `zr import flat`) and as a native
directory of N files, then times one epoch of a torch DataLoader (decoding
nothing, only making tensors; num_workers 0 and 2) over:
  batches  the mount's .batches/shuffle,seed=1,batch=256/epoch-0/K/data.npy, with the
           load_npy of README.md's PyTorch example (the main process reads the file
           with O_DIRECT straight into the tensor; a worker hands over the path and
           the main process reads it as it receives it)
  records  the mount's data/<id> files, in the same shuffled order, batch 256
  native   the native files, same order, batch 256, a Dataset that opens each
Every zrfs pass runs on a fresh mount; each pass first reads its data (the dataset
or the native files) so that it starts in the page cache. A first run of
each loader warms up and is not counted. Prints samples/s (medians of R runs,
default 3) and the median of the runs' ratios batches / native (target >= 3x).
Needs root or FUSE access and Debian's python3-torch.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.join(HERE, "..", "build", "ci")


class Batches(Dataset):
    def __init__(self, epoch_dir):
        self.dir = epoch_dir
        self.n = len(os.listdir(epoch_dir))

    def __len__(self):
        return self.n

    def __getitem__(self, k):  # as README.md's Steps
        return load_npy(f"{self.dir}/{k}/data.npy")


def readme_helpers():
    """Define npy_tensor, read_npy, Read and load_npy as README.md's PyTorch example does: the
    benchmark measures the documented code, which tests/fs/torch.sh runs too."""
    text = open(os.path.join(HERE, "..", "README.md"), encoding="utf-8").read()
    example = re.search(r"```python\n# example: pytorch\n(.*?)```", text, re.S).group(1)
    exec(example[:example.index("class Steps")], globals())  # picklable as __main__.read_npy


readme_helpers()


class Files(Dataset):
    def __init__(self, root, order, size):
        self.root, self.order, self.size = root, order, size

    def __len__(self):
        return len(self.order)

    def __getitem__(self, i):
        with open(f"{self.root}/{self.order[i]}", "rb") as f:
            return torch.frombuffer(bytearray(f.read()), dtype=torch.uint8)


def warm(root):
    """Read every file under root, so that a pass starts with its data in the page cache
    (some kernels reclaim page cache idle for seconds, e.g. DAMON's pageout scheme)."""
    buf = bytearray(1 << 20)
    for d, _, files in os.walk(root):
        for name in files:
            with open(os.path.join(d, name), "rb", buffering=0) as f:
                while f.readinto(buf):
                    pass


def epoch(loader):
    t, n = time.perf_counter(), 0
    for x in loader:
        n += x.shape[0]
    return n / (time.perf_counter() - t)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=50000)
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--zr", default=os.path.join(BUILD, "tools", "zr"))
    ap.add_argument("--zrfs", default=os.path.join(BUILD, "fs", "zrfs"))
    a = ap.parse_args()
    base = tempfile.mkdtemp(prefix="zr-bench-torch-", dir=a.dir)
    mnt, ds, tree = f"{base}/mnt", f"{base}/ds", f"{base}/tree"
    try:
        os.mkdir(mnt)
        os.mkdir(tree)
        rng = np.random.default_rng(1)
        data = rng.integers(0, 256, size=(a.records, a.size), dtype=np.uint8)
        data.tofile(f"{base}/flat.bin")
        for i in range(a.records):
            data[i].tofile(f"{tree}/{i}")
        subprocess.run([a.zr, "import", "flat", f"{base}/flat.bin", ds, "--record-size",
                        str(a.size)], check=True, stdout=subprocess.DEVNULL)
        order = rng.permutation(a.records).tolist()
        spec = "shuffle,seed=1,batch=256"
        print(f"bench_torch: {a.records} records x {a.size} B, {a.runs} runs, torch {torch.__version__}")

        def mounted(fn):
            warm(ds)
            subprocess.run([a.zrfs, ds, mnt], check=True)
            try:
                return fn()
            finally:
                subprocess.run(["fusermount3", "-u", mnt], check=True)

        res = {}
        for w in (0, 2):
            for r in range(a.runs + 1):  # run 0 warms up Python, torch and the kernel: not counted
                got = {"batches": mounted(lambda: epoch(DataLoader(
                           Batches(f"{mnt}/.batches/{spec}/epoch-0"), batch_size=None,
                           num_workers=w))),
                       "records": mounted(lambda: epoch(DataLoader(
                           Files(f"{mnt}/data", order, a.size), batch_size=256, num_workers=w)))}
                warm(tree)
                got["native"] = epoch(DataLoader(Files(tree, order, a.size), batch_size=256,
                                                 num_workers=w))
                print(f"  run {r}{' (warm-up)' if r == 0 else ''}, {w} workers: " +
                      ", ".join(f"{k} {v:.0f}" for k, v in got.items()) + " samples/s",
                      flush=True)
                if r > 0:
                    for k, v in got.items():
                        res.setdefault((k, w), []).append(v)
                    res.setdefault(("ratio", w), []).append(got["batches"] / got["native"])
        print(f"\n{'samples/s (median)':34} {'workers 0':>10} {'workers 2':>10}")
        med = {k: statistics.median(v) for k, v in res.items()}
        for k, label in (("batches", "zrfs batch .npy files"), ("records", "zrfs record files"),
                         ("native", "native directory, one file each")):
            print(f"{label:34} {med[(k, 0)]:10.0f} {med[(k, 2)]:10.0f}")
        print(f"{'zrfs batches / native (>= 3x)':34} {med[('ratio', 0)]:9.2f}x "
              f"{med[('ratio', 2)]:9.2f}x   (median of the runs' ratios)")
    finally:
        if os.path.ismount(mnt):
            subprocess.run(["fusermount3", "-u", mnt])
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
