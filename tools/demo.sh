#!/bin/sh
# Set up zrfs and run it on a small generated demo dataset:
#   1. install the Debian packages the build needs (if missing);
#   2. build zr into build/demo;
#   3. create demo-data/: 512 records of a tiny image dataset
#      (image: 8x8 u8, label: i64 scalar, caption: text, flate-compressed);
#   4. inspect it: info, verify, and one record of each field.
# Run from anywhere; everything it writes stays under the source tree.
# DEMO_DIR overrides where the dataset goes.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build/demo
data=${DEMO_DIR:-$top/demo-data}

"$top/packaging/deps.sh"
echo "==> building"
cmake -S "$top" -B "$build" -DBUILD_TESTING=OFF >/dev/null
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
zr=$build/tools/zr

echo "==> creating $data"
rm -rf "$data"
"$zr" create "$data" --chunk-size 128 \
	--field image:u8:shape=8x8 \
	--field label:i64:shape= \
	--field caption:bytes:flate:ext=txt
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
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
