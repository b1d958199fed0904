#!/bin/sh
# The zrfs Python package (tools/python/zrfs): its Loader and BatchDataset
# read a mount's batches byte for byte as zr sample and zr cat give them,
# for several specs, ranks, from=, tail modes, flate and variable-size
# fields, and raise an error naming the file and spec for a damaged record
# (tests/fs/feed.py says what is checked); and a Loader's batches are each
# of one state while a writer commits (below).
. "$(dirname "$0")/lib.sh"
: "${ZR:?ZR must name the zr binary}"
"$PY" -c 'import torch' 2>/dev/null || fail "python3-torch missing (packaging/deps.sh installs it)"
make_ds --records 60
"$MKDS" "$T/bad" "$T/badref" --records 30 --corrupt >/dev/null || fail "mkds --corrupt"
mkdir "$T/badmnt"
unmount_bad() {
	mountpoint -q "$T/badmnt" 2>/dev/null && { fusermount3 -u "$T/badmnt" || umount -l "$T/badmnt"; }
	cleanup
}
trap unmount_bad EXIT
mount_ds
"$ZRFS" "$T/bad" "$T/badmnt" -o log="$T/badlog" || fail "mounting the damaged dataset"
"$PY" "$(dirname "$0")/feed.py" "$ZR" "$MNT" "$DS" "$T/badmnt" || fail "feed.py"

# A Loader's batch is of one state while a writer commits: it holds a
# step's ids open while its threads read the step's other files, so the
# mount keeps the step's state for them however slow they are. With
# -o hold_ms=0 the mount holds no step of itself (a step reopened file by
# file would show the state of each open); a writer replaces records with
# values of other sizes meanwhile, and every batch's offsets must fit its
# data and slice it into values its records had, also where the thread
# reading a step's data is held up while the others read the rest.
unmount_wait
mount_ds -o hold_ms=0
pkg="$(dirname "$0")/../../tools/python"
"$PY" - "$ZR" "$MNT" "$DS" "$REF" "$pkg" <<'PY' || fail "a Loader's batches while a writer commits"
import os, random, subprocess, sys, tempfile, threading, time, types
zr, mnt, ds, ref = sys.argv[1:5]
sys.path.insert(0, sys.argv[5])
import zrfs, zrfs.loader
n = len(os.listdir(f"{mnt}/img"))
def slowed_open(path, flags, *more):  # a reading thread held up before the data
    if path.endswith("/img"):
        time.sleep(0.05)  # meanwhile the step's other files are read and closed
    return os.open(path, flags, *more)
zrfs.loader.os = types.SimpleNamespace(**{**vars(os), "open": slowed_open})
stop = threading.Event()
made = {"commits": 0, "error": None}  # the writer's, told after it stops
def value(i, k, rng):  # a value of record i, distinct by its size and bytes
    return (b"%d.%d;" % (i, k)) * rng.choice((1, 7, 300, 2000))
def writer():
    rng, k = random.Random(1), 0
    with tempfile.TemporaryDirectory() as tmp:
        while not stop.is_set():
            i, k = rng.randrange(n), k + 1
            with open(f"{tmp}/v", "wb") as f:
                f.write(value(i, k, rng))
            r = subprocess.run([zr, "set", ds, str(i), f"--img={tmp}/v"],
                               capture_output=True)
            if r.returncode != 0:
                made["error"] = f"zr set exited {r.returncode}: {r.stderr.decode()}"
                return
            made["commits"] += 1
def original(i):
    try:
        with open(f"{ref}/img/{i}.jpg", "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""
def fits(i, b):  # a value record i had
    if b == original(i):
        return True
    unit = b[:b.find(b";") + 1]
    return unit.startswith(b"%d." % i) and b == unit * (len(b) // len(unit))
w = threading.Thread(target=writer)
w.start()
batches = 0
try:
    for epoch in range(10):
        for b in zrfs.Loader(mnt, "seq,batch=4", epoch, fields="img", threads=4):
            data, offs = b["img"]
            if len(offs) != len(b["ids"]) + 1 or offs[-1] != len(data):
                sys.exit(f"epoch {epoch}: offsets {list(offs)} do not fit {len(data)} bytes")
            for j, i in enumerate(b["ids"]):
                if not fits(int(i), bytes(data[offs[j]:offs[j + 1]])):
                    sys.exit(f"epoch {epoch}: record {i} holds bytes it never had")
            batches += 1
finally:
    stop.set()
    w.join()
# a writer that failed, or barely ran, would leave nothing to check
if made["error"] or made["commits"] < 10:
    sys.exit(f"the writer made {made['commits']} commits: {made['error'] or 'too few'}")
print(f"{batches} batches read while a writer made {made['commits']} commits: each of one state")
PY
