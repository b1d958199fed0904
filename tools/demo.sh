#!/bin/sh
# Set up zrfs and run it on a small generated demo dataset:
#   1. install the Debian packages the build needs (if missing);
#   2. build zr into build/demo;
#   3. create demo-data/: 512 records of a tiny image dataset
#      (image: 8x8 u8, label: i64 scalar, caption: text, flate-compressed);
#   4. inspect it: info, verify, and one record of each field;
#   5. mount it with zrfs (read-only) and read it as plain files: ls, cat,
#      numpy.load of the .npy views; then unmount.
# Run from anywhere; the dataset stays under the source tree (DEMO_DIR
# overrides where), the mount point is a temporary directory. DEMO_BUILD
# names a build directory made already: steps 1 and 2 are skipped (the
# test suite runs the demo so, with the build under test).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${DEMO_BUILD:-$top/build/demo}
data=${DEMO_DIR:-$top/demo-data}

if [ -z "${DEMO_BUILD:-}" ]; then
	"$top/packaging/deps.sh"
	echo "==> building"
	cmake -S "$top" -B "$build" -DBUILD_TESTING=OFF >/dev/null
	cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
fi
zr=$build/tools/zr
zrfs=$build/fs/zrfs

echo "==> creating $data"
rm -rf "$data"
"$zr" create "$data" --chunk-size 128 \
	--field image:u8:shape=8x8 \
	--field label:i64:shape= \
	--field caption:bytes:flate:ext=txt
src=$(mktemp -d)
mnt=$(mktemp -d)
cleanup() {
	mountpoint -q "$mnt" && fusermount3 -u "$mnt"
	rm -rf "$src"
	rmdir "$mnt"
}
trap cleanup EXIT
/usr/bin/python3 - "$src" <<'PY'
import os, struct, sys
out = sys.argv[1]
names = ["circle", "square", "cross", "stripe"]
for i in range(512):
    label = i % 4
    img = bytes(((x * 16 + y * 8 + label * 40 + i) & 0xFF) for y in range(8) for x in range(8))
    open(os.path.join(out, f"{i}.img"), "wb").write(img)
    open(os.path.join(out, f"{i}.lbl"), "wb").write(struct.pack("<q", label))
    open(os.path.join(out, f"{i}.txt"), "w").write(f"record {i}: a {names[label]}\n")
PY
i=0
while [ $i -lt 512 ]; do
	"$zr" put "$data" --image="$src/$i.img" --label="$src/$i.lbl" \
		--caption="$src/$i.txt" >/dev/null
	i=$((i + 1))
done

echo "==> zr info"
"$zr" info "$data"
echo "==> zr verify"
"$zr" verify "$data"
echo "==> record 42"
printf 'caption: '
"$zr" cat "$data" caption 42
printf 'label:   '
"$zr" cat "$data" label 42 | od -An -t d8 | tr -d ' '
echo 'image:'
"$zr" cat "$data" image 42 | od -An -t u1 -w8

echo "==> zrfs $data $mnt"
"$zrfs" "$data" "$mnt"
echo "\$ ls $mnt"
ls "$mnt"
echo "\$ ls $mnt/caption | head -3"
ls "$mnt/caption" | head -3
echo "\$ cat $mnt/caption/42.txt"
cat "$mnt/caption/42.txt"
echo "\$ python3: numpy.load of image.npy and label.npy"
/usr/bin/python3 - "$mnt" <<'PY'
import sys, numpy as np
mnt = sys.argv[1]
images = np.load(f"{mnt}/image.npy", mmap_mode="r")
labels = np.load(f"{mnt}/label.npy")
print(f"image.npy: {images.dtype} {images.shape}; label.npy: {labels.dtype} {labels.shape}")
print(f"record 42: label {labels[42]}, first image row {list(images[42, 0])}")
print("labels of records 0..7:", labels[:8].tolist())
PY
echo "==> unmounting"
