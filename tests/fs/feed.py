"""feed.py - the zrfs Python package's Loader, byte for byte against zr.

usage: feed.py ZR MOUNT DATASET BADMOUNT

MOUNT is a mount of DATASET (made by mkds: img raw bytes, txt flate bytes,
vec f32 4x3 raw, lab i64 flate; some values missing, some empty).
BADMOUNT mounts a dataset of mkds --corrupt (img 10 and txt 20 damaged).
Checked, for several sampler specs, ranks, from=, tail modes and epochs:
every batch's ids are `zr sample`'s, in step order; every record of every
field is `zr cat`'s (a missing fixed-shape value reads as zeros, a missing
variable one as empty), as NumPy arrays, as torch tensors, through
BatchDataset in a DataLoader with and without workers (one with a batch
size of its own is told to pass batch_size=None), with and without
O_DIRECT, resumed at a step, after set_epoch, from state_dict, with rank=
and world_size=; from= the end of an epoch is an empty epoch,
a spec the mount refuses (from= past the end, a bad value) raises; a
damaged record's batch raises ZrfsError naming the file and the spec, from
a reading thread.
"""
import os
import subprocess
import sys

import numpy as np
import torch
from torch.utils.data import DataLoader

ZR, MNT, DS, BAD = sys.argv[1:5]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tools", "python"))
import zrfs  # noqa: E402  (from the source tree)


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


N = int(next(l.split()[1] for l in subprocess.run([ZR, "info", DS], capture_output=True,
                                                     check=True).stdout.decode().splitlines()
             if l.startswith("records")))
VALUES = {}


def value(field, i):
    """zr cat's bytes of record @i of @field (None: missing)."""
    if (field, i) not in VALUES:
        r = subprocess.run([ZR, "cat", DS, field, str(i)], capture_output=True)
        VALUES[(field, i)] = r.stdout if r.returncode == 0 else None
    return VALUES[(field, i)]


def sample(spec, epoch):
    r = subprocess.run([ZR, "sample", spec, "--n", str(N), "--epoch", str(epoch)],
                       capture_output=True, check=True)
    return [[int(x) for x in l.split()] for l in r.stdout.decode().splitlines()]


FIXED = {"vec": (np.dtype("<f4"), (4, 3)), "lab": (np.dtype("<i8"), ())}


def check(spec, epoch, batches, how):
    want = sample(spec, epoch)
    if len(batches) != len(want):
        fail(f"{spec} epoch {epoch} ({how}): {len(batches)} batches, zr sample has {len(want)}")
    for k, (b, ids) in enumerate(zip(batches, want)):
        b = {f: tuple(np.asarray(x) for x in v) if isinstance(v, (tuple, list)) else np.asarray(v)
             for f, v in b.items() if f != "info"}
        if b["ids"].tolist() != ids:
            fail(f"{spec} step {k} ({how}): ids {b['ids'].tolist()}, zr sample {ids}")
        for f in ("img", "txt"):
            data, offs = b[f]
            for j, i in enumerate(ids):
                got = bytes(data[offs[j]:offs[j + 1]])
                if got != (value(f, i) or b""):
                    fail(f"{spec} step {k} ({how}): {f} of record {i} differs")
        for f, (dt, shape) in FIXED.items():
            a = b[f]
            if a.shape != (len(ids),) + shape or a.dtype != dt:
                fail(f"{spec} step {k} ({how}): {f} is {a.shape} {a.dtype}")
            for j, i in enumerate(ids):
                v = value(f, i)
                want_row = np.frombuffer(v, dt).reshape(shape) if v else np.zeros(shape, dt)
                if not np.array_equal(a[j], want_row):
                    fail(f"{spec} step {k} ({how}): {f} of record {i} differs")


SPECS = [("seq,batch=8", 0), ("shuffle,seed=7,batch=8", 1), ("shuffle,seed=7,batch=8,tail=keep", 0),
         ("shuffle,seed=7,batch=8,tail=pad", 2), ("block,seed=3,batch=6,block=16", 0),
         ("random,seed=5,batch=5", 0), ("window,window=7,stride=5", 0),
         ("shuffle,seed=9,batch=4,rank=1,world=3", 0), ("shuffle,seed=9,batch=4,rank=2,world=3,tail=keep", 1),
         ("shuffle,seed=9,batch=4,from=17,tail=keep", 0), ("seq,batch=8,lo=5,hi=40", 0)]


def ids(batches):
    return [b["ids"].tolist() for b in batches]


def raises(what, call, says):
    try:
        call()
    except zrfs.ZrfsError as e:
        if says not in str(e):
            fail(f"{what}: {e}")
        return
    fail(f"{what}: taken")


def api():
    """What a torch user calls: set_epoch, len, state_dict, rank= and
    world_size=, a field by name, and errors at construction."""
    spec = "shuffle,seed=7,batch=8,tail=keep"
    loader = zrfs.Loader(MNT, spec)
    loader.set_epoch(1)
    check(spec, 1, list(loader), "after set_epoch(1)")
    if len(loader) != len(sample(spec, 1)):
        fail(f"len after set_epoch: {len(loader)}")
    # stopped after three steps, resumed by another loader from its state
    it = iter(loader)
    head = [next(it) for _ in range(3)]
    state = loader.state_dict()
    if state != {"spec": spec, "epoch": 1, "step": 3}:
        fail(f"state_dict after 3 steps: {state}")
    other = zrfs.Loader(MNT, spec, 0)
    other.load_state_dict(state)
    if ids(head) + ids(other) != sample(spec, 1) or len(other) != len(sample(spec, 1)) - 3:
        fail("stopped at step 3 and resumed from state_dict: other batches")
    if other.state_dict()["step"] != len(sample(spec, 1)):
        fail(f"state_dict at the end of the epoch: {other.state_dict()}")
    raises("a state of another spec", lambda: zrfs.Loader(MNT, "seq,batch=8").load_state_dict(
        state), "not of seq,batch=8")
    # rank and world_size as arguments: the spec's rank=,world=
    got = zrfs.Loader(MNT, "shuffle,seed=9,batch=4", rank=1, world_size=3)
    if ids(got) != sample("shuffle,seed=9,batch=4,rank=1,world=3", 0):
        fail("rank=1, world_size=3: not the spec's rank=1,world=3")
    if ids(zrfs.Loader(MNT, "seq,batch=8", rank="auto", world_size="auto")) != \
            sample("seq,batch=8", 0):
        fail("rank=\"auto\" without torch.distributed: not the whole of each step")
    raises("rank twice", lambda: zrfs.Loader(MNT, "seq,batch=4,rank=0,world=2", rank=0,
                                             world_size=2), "not both")
    raises("rank past the world", lambda: zrfs.Loader(MNT, "seq,batch=4", rank=2,
                                                      world_size=2), "0 <= rank < world_size")
    raises("rank without world_size", lambda: zrfs.Loader(MNT, "seq,batch=4", rank=0),
           "both given")
    # a field by its name, not letter by letter
    b = next(iter(zrfs.Loader(MNT, "seq,batch=8", fields="lab")))
    if set(b) != {"ids", "lab"}:
        fail(f"fields=\"lab\": {sorted(b)}")
    # the dataset's directory instead of its mount, a bad epoch, a bad spec:
    # at construction, saying what to do
    raises("a dataset directory", lambda: zrfs.Loader(DS, "seq,batch=8"),
           "a dataset directory: mount it")
    raises("epoch -1", lambda: zrfs.Loader(MNT, "seq,batch=8", -1), "a number 0 or more")
    raises("a misspelt spec", lambda: zrfs.Loader(MNT, "shufle,seed=42,batch=4"),
           "unknown order 'shufle'")
    # by default not the fields zr import keeps beside the files
    fake = os.path.join(os.path.dirname(DS), "fake-meta")
    os.makedirs(fake, exist_ok=True)
    with open(os.path.join(fake, "meta.json"), "w") as f:
        f.write('{"fields": [{"name": "image", "dtype": "bytes"}, {"name": "name", '
                '"dtype": "bytes"}, {"name": "mtime", "dtype": "i64"}, {"name": "uid", '
                '"dtype": "u32"}, {"name": "gid", "dtype": "u32"}], "names": {"field": '
                '"name", "kind": "path", "mtime": "mtime", "uid": "uid", "gid": "gid"}}')
    fields, kept = zrfs.loader.fields_of(fake)
    if [f.name for f in fields] != ["image", "name", "mtime", "uid", "gid"] or \
            kept != {"name", "mtime", "uid", "gid"}:
        fail(f"the names and times zr import keeps: {kept}")
    # BatchDataset: set_epoch as a DistributedSampler's
    ds = zrfs.BatchDataset(MNT, spec, 0)
    ds.set_epoch(1)
    got = list(DataLoader(ds, batch_size=None))
    check(spec, 1, got, "BatchDataset after set_epoch(1)")


def main():
    for spec, epoch in SPECS:
        check(spec, epoch, list(zrfs.Loader(MNT, spec, epoch, threads=3)), "numpy")
    spec, epoch = "shuffle,seed=7,batch=8,tail=keep", 1
    check(spec, epoch, list(zrfs.Loader(MNT, spec, epoch, device="cpu")), "torch")
    check(spec, epoch, list(zrfs.Loader(MNT, spec, epoch, direct=False, threads=1)),
          "no O_DIRECT, one thread")
    whole = list(zrfs.Loader(MNT, spec, epoch))
    tail = list(zrfs.Loader(MNT, spec, epoch, steps=range(3, len(whole))))
    if [b["ids"].tolist() for b in tail] != [b["ids"].tolist() for b in whole[3:]]:
        fail("resumed at step 3: other batches")
    info = next(iter(zrfs.Loader(MNT, spec, epoch, info=True, fields=["lab"])))
    if info["info"]["step"] != 0 or set(info) != {"ids", "lab", "info"}:
        fail(f"info and fields: {sorted(info)}")
    for w in (0, 2):
        got = list(DataLoader(zrfs.BatchDataset(MNT, spec, epoch), batch_size=None,
                              num_workers=w))
        if not all(isinstance(b["ids"], torch.Tensor) for b in got):
            fail("BatchDataset: not tensors")
        order = {tuple(s): k for k, s in enumerate(sample(spec, epoch))}
        got.sort(key=lambda b: order.get(tuple(b["ids"].tolist()), -1))
        check(spec, epoch, got, f"BatchDataset, {w} workers")
    # a DataLoader that batches the batches again is told what to pass
    for w in (0, 2):
        try:
            next(iter(DataLoader(zrfs.BatchDataset(MNT, spec, epoch), batch_size=8,
                                 num_workers=w)))
            fail(f"DataLoader(BatchDataset, batch_size=8), {w} workers: no error")
        except ValueError as e:
            if "batch_size=None" not in str(e):
                fail(f"DataLoader(BatchDataset, batch_size=8), {w} workers: {e}")
    # a position at the end of an epoch: nothing left of it
    if list(zrfs.Loader(MNT, f"shuffle,seed=9,batch=4,from={N}", 0)):
        fail(f"from={N}: batches past the end")
    # a spec the mount refuses is an error, with or without from= (a
    # resumed job must not train on nothing), saying why: what zr sample
    # says of it for the dataset's records, which a shell user reads in
    # .batches/.why/SPEC too
    for bad in ("seq,batch=4,from=abc", "seq,batch=4,from=8,tail=kep",
                f"seq,batch=4,from={N + 1}", "shufle,seed=42,batch=4",
                f"seq,batch={N + 1}", "seq,batch=4,rank=2,world=2"):
        said = subprocess.run([ZR, "sample", bad, "--n", str(N)], capture_output=True)
        why = said.stderr.decode().strip().removeprefix("zr: sample: ")
        why = why.removeprefix(f"spec '{bad}': ")
        if said.returncode == 0 or not why:
            fail(f"{bad}: zr sample takes it")
        with open(os.path.join(MNT, ".batches", ".why", bad)) as f:
            shown = f.read()
        if shown != why + "\n":
            fail(f".batches/.why/{bad}: {shown!r}, where zr sample says {why!r}")
        try:
            n = len(zrfs.Loader(MNT, bad, 0))
            fail(f"{bad}: taken, {n} steps")
        except zrfs.ZrfsError as e:
            if f"refuses batches {bad}: {why}" not in str(e):
                fail(f"{bad}: {e} (zr sample says {why!r})")
    with open(os.path.join(MNT, ".batches", ".why", "seq,batch=4")) as f:
        if not f.read().startswith("ok: "):
            fail(".batches/.why/seq,batch=4 does not say ok")
    api()
    try:
        zrfs.Loader(MNT, "seq,batch=8", fields=["nope"])
        fail("an unknown field was taken")
    except zrfs.ZrfsError as e:
        if "no field nope" not in str(e):
            fail(f"unknown field: {e}")
    # a damaged record: the error of the reading thread, naming file and spec
    try:
        for _ in zrfs.Loader(BAD, "seq,batch=8", threads=4):
            pass
        fail("a damaged record's batch was read")
    except zrfs.ZrfsError as e:
        if "/1/img" not in str(e) or "seq,batch=8" not in str(e) or e.errno != 5:
            fail(f"the damaged batch's error: {e}")
    print(f"ok: {len(SPECS)} specs and the torch, DataLoader, resume and error paths "
          f"match zr sample and zr cat over {N} records")


main()
