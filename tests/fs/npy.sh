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
# FIELD.present.npy: a bool per record, True where the field has a value
# (record 7's vec is missing; an empty value is present)
import os
n = len(np.load(f"{mnt}/lab.npy"))
for name in ("img", "txt", "vec", "lab"):
    have = {int(f.split(".")[0]) for f in os.listdir(f"{mnt}/{name}")}
    got = np.load(f"{mnt}/{name}.present.npy")
    assert got.dtype == np.bool_ and got.shape == (n,), (name, got.dtype, got.shape)
    assert got.tolist() == [i in have for i in range(n)], name
    mm = np.load(f"{mnt}/{name}.present.npy", mmap_mode="r")
    assert mm[n // 3:n // 2].tolist() == got[n // 3:n // 2].tolist(), name
assert not np.load(f"{mnt}/vec.present.npy")[7]
PY

# a bool field's .npy is a bool array (numpy's |b1), as imported
: "${ZR:?ZR must name the zr binary}"
fusermount3 -u "$MNT" || fail "unmount"
"$PY" -c "import numpy as np; np.save('$T/flags.npy', np.arange(12).reshape(6, 2) % 3 == 0)" ||
	fail "flags.npy"
rm -rf "$DS" && "$ZR" import npy "$T/flags.npy" "$DS" --field ok >/dev/null || fail "import"
mount_ds
"$PY" -c "
import numpy as np
got, want = np.load('$MNT/ok.npy'), np.load('$T/flags.npy')
assert got.dtype == np.bool_ and np.array_equal(got, want), (got.dtype, got)
" || fail "ok.npy is not the bool array imported"
