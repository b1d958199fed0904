"""The labels of an image folder imported with --label-from-parent follow
the paths of tree/ as a writable mount's programs change them (issue 49
item 5): a file removed removes its record, one moved to another class
directory takes that class, one copied in takes its directory's class, and
one in a directory that names no class has none. Then label.npy, by/label,
the Loader (zrfs.Loader) and torchvision's ImageFolder over tree/ agree,
record by record, with the class each path gives; and so they do after a
remount, read-only.

usage: labels.py ZR ZRFS WORKDIR"""
import os
import shutil
import subprocess
import sys

import numpy as np

ZR, ZRFS, T = sys.argv[1:4]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tools", "python"))
import zrfs  # noqa: E402  (from the source tree)

SRC, DS, MNT = os.path.join(T, "src"), os.path.join(T, "ds"), os.path.join(T, "mnt")
CLASSES = ["actions", "apps", "places"]


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def run(*cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        fail(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def expected():
    """Each file of tree/ and the class its parent directory names (None:
    a directory that names no class)."""
    tree = os.path.join(MNT, "tree")
    out = {}
    for d, _, files in os.walk(tree):
        for f in files:
            rel = os.path.relpath(os.path.join(d, f), tree)
            cls = os.path.dirname(rel)
            out[rel] = CLASSES.index(cls) if cls in CLASSES else None
    return out


def agree(how, epoch):
    want = expected()
    names = {}
    for f in os.listdir(os.path.join(MNT, "name")):
        with open(os.path.join(MNT, "name", f)) as fh:
            names[int(f.split(".")[0])] = fh.read()
    if sorted(names.values()) != sorted(want):
        fail(f"{how}: records {sorted(names.values())}, tree/ {sorted(want)}")
    labels = np.load(os.path.join(MNT, "label.npy"))
    present = np.load(os.path.join(MNT, "label.present.npy"))
    by = {}
    for c in os.listdir(os.path.join(MNT, "by", "label")):
        for f in os.listdir(os.path.join(MNT, "by", "label", c)):
            by[int(f.split(".")[0])] = CLASSES.index(c)
    loaded = {}
    # an epoch of its own: a step shows the state of its first read, so
    # that its files agree with each other (zrfs(8), .batches)
    for batch in zrfs.Loader(MNT, "seq,batch=4,tail=keep", epoch, fields=["label"]):
        for i, cls in zip(batch["ids"], batch["label"]):
            loaded[int(i)] = int(cls)
    for i, path in names.items():
        cls = want[path]
        got = int(labels[i]) if present[i] else None
        if got != cls:
            fail(f"{how}: {path} (record {i}): label.npy says {got}, its directory {cls}")
        if by.get(i) != cls:
            fail(f"{how}: {path} (record {i}): by/label says {by.get(i)}, its directory {cls}")
        if cls is not None and loaded.get(i) != cls:
            fail(f"{how}: {path} (record {i}): the Loader says {loaded.get(i)}, "
                 f"its directory {cls}")
    # torchvision's ImageFolder over tree/: the classes it finds are the
    # dataset's where every class directory is there
    from torchvision.datasets import ImageFolder
    folder = ImageFolder(os.path.join(MNT, "tree"), loader=lambda p: p,
                         is_valid_file=lambda p: p.endswith(".png"))
    for path, cls in folder.samples:
        rel = os.path.relpath(path, os.path.join(MNT, "tree"))
        if folder.classes[cls] in CLASSES and want[rel] != CLASSES.index(folder.classes[cls]):
            fail(f"{how}: ImageFolder says {rel} is {folder.classes[cls]}")


def main():
    for c in CLASSES:
        os.makedirs(os.path.join(SRC, c))
        for k in range(4):
            with open(os.path.join(SRC, c, f"{c}{k}.png"), "wb") as f:
                f.write(os.urandom(100 + k))
    run(ZR, "import", "dir", SRC, DS, "--label-from-parent", "label")
    os.makedirs(MNT)
    run(ZRFS, DS, MNT, "-o", "writable,log=" + os.path.join(T, "log"))
    try:
        tree = os.path.join(MNT, "tree")
        agree("as imported", 0)
        os.remove(os.path.join(tree, "apps", "apps1.png"))
        os.rename(os.path.join(tree, "actions", "actions2.png"),
                  os.path.join(tree, "places", "actions2.png"))
        shutil.copy(os.path.join(SRC, "apps", "apps0.png"),
                    os.path.join(tree, "apps", "added.png"))
        shutil.copy(os.path.join(SRC, "apps", "apps0.png"),
                    os.path.join(tree, "places", "added2.png"))
        os.makedirs(os.path.join(tree, "elsewhere"))
        shutil.copy(os.path.join(SRC, "apps", "apps2.png"),
                    os.path.join(tree, "elsewhere", "x.png"))
        # mv(1) of a file into another class directory
        run("mv", os.path.join(tree, "places", "places3.png"), os.path.join(tree, "apps"))
        run("sync", tree)
        agree("after the edits", 1)
        n = int(run(ZR, "info", DS).split("records")[1].split()[0])
        if n != 12 - 1 + 3:
            fail(f"{n} records after the edits, not 14 (one removed, three added)")
    finally:
        subprocess.run(["fusermount3", "-u", MNT])
    run(ZRFS, DS, MNT)
    try:
        agree("after a remount", 2)
    finally:
        subprocess.run(["fusermount3", "-u", MNT])


main()
