#!/bin/sh
# Reads of any size at any offset return the reference bytes, for raw
# records (spliced) and flate records (inflated, cached), from 4 threads.
. "$(dirname "$0")/lib.sh"
make_ds
mount_ds -o cache=1M
"$PY" - "$MNT" "$REF" <<'PY' || fail "random reads"
import os, random, sys, threading
mnt, ref = sys.argv[1:]
files = [f"{d}/{n}" for d in ("img", "txt") for n in os.listdir(f"{ref}/{d}")]
errors = []
def worker(seed):
    rnd = random.Random(seed)
    try:
        for _ in range(3000):
            rel = rnd.choice(files)
            want = open(f"{ref}/{rel}", "rb").read()
            fd = os.open(f"{mnt}/{rel}", os.O_RDONLY)
            try:
                for _ in range(3):
                    off = rnd.randrange(0, len(want) + 10)
                    n = rnd.choice((1, 7, 4096, 65536, 200000, 1 << 20))
                    got = os.pread(fd, n, off)
                    if got != want[off:off + n]:
                        errors.append(f"{rel} [{off}, +{n}): {len(got)} bytes differ")
                        return
            finally:
                os.close(fd)
    except Exception as e:
        errors.append(repr(e))
threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
[t.start() for t in threads]
[t.join() for t in threads]
assert not errors, errors[:5]
PY
