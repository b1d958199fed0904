#!/bin/sh
# FIELD.npy views load with numpy (also memory-mapped) and hold every record,
# missing ones as zeros; raw and flate fields alike.
. "$(dirname "$0")/lib.sh"
make_ds
mount_ds
"$PY" - "$MNT" "$REF" <<'PY' || fail "numpy check"
import sys, numpy as np
mnt, ref = sys.argv[1:]
for name, dtype, shape in (("vec", np.float32, (4, 3)), ("lab", np.int64, ())):
    want = np.fromfile(f"{ref}/{name}.bin", dtype=dtype).reshape((-1,) + shape)
    got = np.load(f"{mnt}/{name}.npy")
    assert got.dtype == dtype and got.shape == want.shape, (got.dtype, got.shape)
    assert np.array_equal(got, want), name
    mm = np.load(f"{mnt}/{name}.npy", mmap_mode="r")
    assert np.array_equal(mm, want), name + " (mmap)"
    # random slices read through the memory map
    rng = np.random.default_rng(1)
    for _ in range(200):
        a = int(rng.integers(0, len(want)))
        b = int(rng.integers(a, len(want) + 1))
        assert np.array_equal(mm[a:b], want[a:b])
assert np.load(f"{mnt}/vec.npy")[7].sum() == 0  # record 7 is missing: zeros
PY
