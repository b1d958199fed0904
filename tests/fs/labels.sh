#!/bin/sh
# The labels an image folder's paths give (zr import dir --label-from-parent)
# follow the edits programs make in a writable tree/: label.npy, by/label,
# the Loader and torchvision's ImageFolder agree after them (labels.py).
. "$(dirname "$0")/lib.sh"
: "${ZR:?ZR must name the zr binary}"
"$PY" -c 'import torch, torchvision' 2>/dev/null ||
	fail "python3-torch or python3-torchvision missing (packaging/deps.sh installs them)"
rmdir "$MNT"
"$PY" "$(dirname "$0")/labels.py" "$ZR" "$ZRFS" "$T" || fail "labels.py"
