#!/usr/bin/python3
"""bench_feed.py - feeding a training loop from one process: the zrfs Loader
against torch's DataLoader.

usage: tools/bench_feed.py [--records N] [--size B] [--runs R] [--workers W]
                           [--zr PATH] [--zrfs PATH] [--dir DIR]

Builds N records of B bytes (default 100000 x 8192) as a dataset (one u8
field 'data' of shape B, zr import flat) and as a native directory of N
files, then times one epoch per run of each of, alternately:
  loader    zrfs.Loader over the mount's shuffle,seed=1,batch=256 batch files,
            W threads, tensors to CUDA where torch sees a GPU (pinned
            buffers, a copy stream), else torch tensors on the host
  native    torch's DataLoader over the native files in the same order
            (a Dataset that opens each file, batch 256, W workers, pin_memory
            with a GPU), tensors moved to the device the same way
  readme    README.md's PyTorch example (load_npy over the batch .npy files
            in a DataLoader with W workers)
  raw       the mount's batch files read with W threads and nothing else done
            with them: the ceiling the loader reads against
Every zrfs pass runs on a fresh mount; each pass first reads its data so
that it starts in the page cache. A first run warms up and is not counted.
Prints samples/s per run and the medians; the last line is
  feed: loader X samples/s, DataLoader over native files Y samples/s
  (workers W), ratio R
with R the median of the per-run ratios (target >= 3 with W=2 on 2 CPUs).
Needs root or FUSE access and Debian's python3-torch.
"""
import argparse
import concurrent.futures
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.join(HERE, "..", "build", "ci")
sys.path.insert(0, os.path.join(HERE, "python"))
import zrfs  # noqa: E402  (from the source tree)

SPEC = "shuffle,seed=1,batch=256"
DEVICE = torch.device("cuda") if torch.cuda.is_available() else None


def readme_helpers():
    """npy_tensor, read_npy, Read and load_npy as README.md's PyTorch example defines them."""
    text = open(os.path.join(HERE, "..", "README.md"), encoding="utf-8").read()
    example = re.search(r"```python\n# example: pytorch\n(.*?)```", text, re.S).group(1)
    exec(example[:example.index("class Steps")], globals())  # picklable as __main__.read_npy


readme_helpers()


class Steps(Dataset):
    def __init__(self, epoch_dir):
        self.dir, self.n = epoch_dir, len(os.listdir(epoch_dir))

    def __len__(self):
        return self.n

    def __getitem__(self, k):
        return load_npy(f"{self.dir}/{k}/data.npy")  # noqa: F821 (README's)


class Files(Dataset):
    def __init__(self, root, order):
        self.root, self.order = root, order

    def __len__(self):
        return len(self.order)

    def __getitem__(self, i):
        with open(f"{self.root}/{self.order[i]}", "rb", buffering=0) as f:
            return torch.frombuffer(bytearray(f.read()), dtype=torch.uint8)


def to_device(t):
    if DEVICE is None:
        return t
    return t.to(DEVICE, non_blocking=True)


def timed(batches):
    """Samples per second of an epoch of @batches (tensors or dicts of them)."""
    t, n = time.perf_counter(), 0
    for b in batches:
        x = b["data"] if isinstance(b, dict) else to_device(b)
        n += x.shape[0]
    if DEVICE is not None:
        torch.cuda.synchronize()
    return n / (time.perf_counter() - t)


def raw(epoch_dir, threads):
    """Samples per second of reading every batch file with @threads threads."""
    steps = len(os.listdir(epoch_dir))
    bufs = {}

    def read(k):
        fd = os.open(f"{epoch_dir}/{k}/data.npy", os.O_RDONLY | os.O_DIRECT)
        try:
            size = os.fstat(fd).st_size
            buf = bufs.setdefault(threading.get_ident(), np.empty(size + 4096, np.uint8))
            done = 0
            while done < size:
                done += os.preadv(fd, [memoryview(buf)[done:size]], done)
            return size
        finally:
            os.close(fd)
    t = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(threads) as ex:
        total = sum(ex.map(read, range(steps)))
    return total, time.perf_counter() - t


def warm(root):
    buf = bytearray(1 << 20)
    for d, _, files in os.walk(root):
        for name in files:
            with open(os.path.join(d, name), "rb", buffering=0) as f:
                while f.readinto(buf):
                    pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=100000)
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--zr", default=os.path.join(BUILD, "tools", "zr"))
    ap.add_argument("--zrfs", default=os.path.join(BUILD, "fs", "zrfs"))
    a = ap.parse_args()
    w = a.workers
    base = tempfile.mkdtemp(prefix="zr-bench-feed-", dir=a.dir)
    mnt, ds, tree = f"{base}/mnt", f"{base}/ds", f"{base}/tree"
    try:
        os.mkdir(mnt)
        os.mkdir(tree)
        rng = np.random.default_rng(1)
        with open(f"{base}/flat.bin", "wb") as flat:
            for lo in range(0, a.records, 4096):
                part = rng.integers(0, 256, size=(min(4096, a.records - lo), a.size),
                                    dtype=np.uint8)
                part.tofile(flat)
                for i, row in enumerate(part):
                    row.tofile(f"{tree}/{lo + i}")
        subprocess.run([a.zr, "import", "flat", f"{base}/flat.bin", ds, "--record-size",
                        str(a.size)], check=True, stdout=subprocess.DEVNULL)
        os.unlink(f"{base}/flat.bin")
        order = rng.permutation(a.records).tolist()
        epoch_dir = f"{mnt}/.batches/{SPEC}/epoch-0"
        print(f"bench_feed: {a.records} records x {a.size} B, batch 256, {w} workers/threads, "
              f"{a.runs} runs, torch {torch.__version__}, "
              f"{'CUDA ' + torch.cuda.get_device_name() if DEVICE else 'no GPU: tensors stay on the host'}",
              flush=True)

        def mounted(fn):
            warm(ds)
            subprocess.run([a.zrfs, ds, mnt, "-o", f"log={base}/zrfs.log"], check=True)
            try:
                return fn()
            finally:
                subprocess.run(["fusermount3", "-u", mnt], check=True)

        def raw_rate():  # samples/s and bytes/s (a batch file's header is < 0.1 %)
            total, secs = raw(epoch_dir, w)
            return total / secs / a.size, total / secs

        res = {}
        for r in range(a.runs + 1):  # run 0 warms up Python, torch and the kernel: not counted
            got = {"loader": mounted(lambda: timed(zrfs.Loader(
                       mnt, SPEC, 0, fields=["data"], threads=w, device=DEVICE or "cpu")))}
            warm(tree)
            got["native"] = timed(DataLoader(Files(tree, order), batch_size=256, num_workers=w,
                                             pin_memory=DEVICE is not None))
            got["readme"] = mounted(lambda: timed(DataLoader(Steps(epoch_dir), batch_size=None,
                                                             num_workers=w)))
            samples, gbs = mounted(raw_rate)
            got["raw"] = samples
            print(f"  run {r}{' (warm-up)' if r == 0 else ''}: " +
                  ", ".join(f"{k} {v:.0f}" for k, v in got.items()) +
                  f" samples/s (raw {gbs / 1e9:.2f} GB/s)", flush=True)
            if r > 0:
                for k, v in got.items():
                    res.setdefault(k, []).append(v)
                res.setdefault("ratio", []).append(got["loader"] / got["native"])
                res.setdefault("of_raw", []).append(got["loader"] / got["raw"])
        med = {k: statistics.median(v) for k, v in res.items()}
        print(f"\nsamples/s, medians of {a.runs} runs:")
        for k, label in (("loader", f"zrfs.Loader, {w} threads"),
                         ("native", f"DataLoader over native files, {w} workers"),
                         ("readme", f"README's DataLoader over batch .npy, {w} workers"),
                         ("raw", f"raw batch files, {w} threads (the ceiling)")):
            print(f"  {label:48} {med[k]:10.0f}")
        print(f"  loader / raw batch files {med['of_raw']:.2f}x (median of the runs' ratios)")
        print(f"feed: loader {med['loader']:.0f} samples/s, DataLoader over native files "
              f"{med['native']:.0f} samples/s (workers {w}), ratio {med['ratio']:.2f}")
    finally:
        if os.path.ismount(mnt):
            subprocess.run(["fusermount3", "-u", mnt])
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
