#!/bin/sh
# The Python package as pip installs it: into a venv that sees Debian's
# numpy and torch (--system-site-packages), offline (--no-index
# --no-build-isolation: setuptools is Debian's), from a copy of
# tools/python (a build leaves files beside the sources). Then, from
# another directory, the venv's python imports it from the venv, with the
# project's version (CMakeLists.txt), and reads nothing of the source tree.
# SRC: the source tree.
set -u
: "${SRC:?SRC must name the source tree}"
PY=/usr/bin/python3
T=$(mktemp -d /tmp/zrfs-pkg-XXXXXX)
trap 'rm -rf "$T"' EXIT
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
meta=$("$T/env/bin/pip" show zrfs 2>&1) || fail "pip show zrfs: $meta"
echo "$meta" | grep -qx "Version: $want" || fail "pip show: $meta"
echo "$meta" | grep -q "^Requires: numpy" || fail "pip show: no numpy requirement: $meta"
"$T/env/bin/pip" uninstall -q -y zrfs || fail "pip uninstall"
(cd "$T" && "$T/env/bin/python" -c 'import zrfs' 2>/dev/null) && fail "zrfs importable after uninstall"
echo "ok: pip installed zrfs $want into a venv, imported from it, uninstalled"
