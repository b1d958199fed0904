#!/bin/sh
# The Python package as pip installs it: into a venv that sees Debian's
# numpy and torch (--system-site-packages), offline (--no-index
# --no-build-isolation: setuptools is Debian's), from a copy of
# tools/python (a build leaves files beside the sources). Then, from
# another directory, the venv's python imports it from the venv, with the
# project's version (CMakeLists.txt), and reads nothing of the source tree;
# the README's loader example, run by that python, reads a mount.
# SRC: the source tree; ZR, ZRFS: the binaries.
set -u
: "${SRC:?SRC must name the source tree}" "${ZR:?}" "${ZRFS:?}"
PY=/usr/bin/python3
T=$(mktemp -d /tmp/zrfs-pkg-XXXXXX)
trap 'mountpoint -q "$T/mnt" 2>/dev/null && fusermount3 -u "$T/mnt"; rm -rf "$T"' EXIT
fail() {
	echo "FAIL: $*" >&2
	exit 1
}
want=$(sed -n 's/^project(zrfs VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
[ -n "$want" ] || fail "no project version in CMakeLists.txt"
"$PY" -m venv --system-site-packages "$T/env" || fail "python3 -m venv"
cp -r "$SRC/tools/python" "$T/src"
out=$("$T/env/bin/pip" install -q --no-index --no-build-isolation "$T/src" 2>&1) ||
	fail "pip install: $out"
got=$(cd "$T" && PYTHONPATH= "$T/env/bin/python" -c \
	'import zrfs, numpy; print(zrfs.__version__, zrfs.__file__, hasattr(zrfs.Loader, "set_epoch"))') ||
	fail "import zrfs from the venv"
set -- $got
[ "$1" = "$want" ] || fail "zrfs.__version__ is $1, the project's is $want"
case $2 in "$T/env/"*) ;; *) fail "zrfs imported from $2, not the venv" ;; esac
[ "$3" = True ] || fail "the installed Loader has no set_epoch"
# the README's loader example, as written but for its mount point, by the
# venv's python (torch: Debian's, seen through --system-site-packages)
for c in tabby siamese persian; do
	mkdir -p "$T/photos/$c"
	for k in 1 2 3 4 5; do head -c $((k * 100)) /dev/urandom >"$T/photos/$c/$k.jpg"; done
done
"$ZR" import dir "$T/photos" "$T/cats" --field image --label-from-parent label >/dev/null ||
	fail "zr import dir"
mkdir "$T/mnt" && "$ZRFS" "$T/cats" "$T/mnt" 2>/dev/null || fail "zrfs"
"$PY" - "$SRC/README.md" "$T/loader.py" "$T/mnt" <<'PY' || fail "no loader example in README.md"
import re, sys
text = open(sys.argv[1]).read()
body = re.search(r"```python\n# example: loader\n(.*?)```", text, re.S).group(1)
open(sys.argv[2], "w").write(body.replace("/mnt/cats", sys.argv[3]))
PY
out=$(cd "$T" && PYTHONPATH= "$T/env/bin/python" loader.py 2>&1) || fail "the README's loader example: $out"
echo "$out" | grep -qF "'epoch': 1, 'step': 4}" || fail "the README's loader example printed: $out"
fusermount3 -u "$T/mnt" || fail "unmount"
meta=$("$T/env/bin/pip" show zrfs 2>&1) || fail "pip show zrfs: $meta"
echo "$meta" | grep -qx "Version: $want" || fail "pip show: $meta"
echo "$meta" | grep -q "^Requires: numpy" || fail "pip show: no numpy requirement: $meta"
"$T/env/bin/pip" uninstall -q -y zrfs || fail "pip uninstall"
(cd "$T" && "$T/env/bin/python" -c 'import zrfs' 2>/dev/null) && fail "zrfs importable after uninstall"
echo "ok: pip installed zrfs $want into a venv, imported from it, ran the README's loader, uninstalled"
