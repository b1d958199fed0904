#!/bin/sh
# The Debian package: builds with CPack, installs with dpkg, mounts through
# `mount -t fuse.zrfs` (mount.fuse3 finding /usr/bin/zrfs), reads, unmounts
# and removes cleanly. Changes the machine: CI runs it as root on a fresh one.
# SRC: the source tree.
set -u
: "${SRC:?SRC must name the source tree}"
T=$(mktemp -d /tmp/zrfs-pkg-XXXXXX)
installed=0
cleanup() {
	mountpoint -q "$T/mnt" 2>/dev/null && umount "$T/mnt"
	[ $installed = 1 ] && dpkg -r zrfs >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	exit 1
}
[ "$(id -u)" = 0 ] || fail "needs root (dpkg -i, mount)"

cmake -S "$SRC" -B "$T/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
	-DBUILD_TESTING=OFF >/dev/null || fail "configure"
cmake --build "$T/build" -j2 >/dev/null || fail "build"
(cd "$T/build" && cpack -G DEB >/dev/null) || fail "cpack"
deb=$(ls "$T"/build/zrfs_*.deb) || fail "no .deb produced"
dpkg-deb -I "$deb" | grep -q 'Depends: fuse3' || fail "the package does not depend on fuse3"
dpkg -i "$deb" >/dev/null || fail "dpkg -i"
installed=1
for f in /usr/bin/zr /usr/bin/zrfs /usr/include/zrecord.h /usr/include/zrecord_names.h /usr/include/zrsampler.h \
	/usr/share/man/man1/zr.1 /usr/share/man/man8/zrfs.8 \
	/usr/lib/python3/dist-packages/zrfs/loader.py; do
	[ -e "$f" ] || fail "$f not installed"
done
pkg-config --exists zrecord || PKG_CONFIG_PATH=/usr/lib/pkgconfig pkg-config --exists zrecord ||
	fail "pkg-config does not find zrecord"

/usr/bin/zr create "$T/ds" --field note:bytes:ext=txt >/dev/null || fail "installed zr create"
printf 'hello from the package' >"$T/n"
/usr/bin/zr put "$T/ds" --note="$T/n" >/dev/null || fail "installed zr put"
mkdir "$T/mnt"
mount -t fuse.zrfs "$T/ds" "$T/mnt" -o ro || fail "mount -t fuse.zrfs"
[ "$(cat "$T/mnt/note/0.txt")" = "hello from the package" ] || fail "reading through the mount"
# the installed Python package reads the mount's batches (outside the source tree)
out=$(cd / && /usr/bin/python3 -c "
import zrfs
b = next(iter(zrfs.Loader('$T/mnt', 'seq,batch=1')))
print(bytes(b['note'][0]).decode())") || fail "the installed zrfs Python package"
[ "$out" = "hello from the package" ] || fail "zrfs.Loader read: $out"
grep -q "fuse.zrfs" /proc/mounts || fail "not listed as fuse.zrfs"
umount "$T/mnt" || fail "umount"
# without ro, mount(8) passes rw: still read-only (-o writable writes)
mount -t fuse.zrfs "$T/ds" "$T/mnt" 2>/dev/null || fail "mount -t fuse.zrfs without -o"
grep -q " $T/mnt fuse.zrfs ro," /proc/mounts || fail "mount -t fuse.zrfs without ro is writable"
umount "$T/mnt" || fail "umount"

dpkg -r zrfs >/dev/null || fail "dpkg -r"
installed=0
[ ! -e /usr/bin/zrfs ] && [ ! -e /usr/include/zrecord.h ] &&
	[ ! -e /usr/lib/python3/dist-packages/zrfs ] || fail "files left after dpkg -r"
echo "deb: built, installed, mounted, read, removed"
