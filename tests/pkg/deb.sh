#!/bin/sh
# The Debian packages: CPack builds one a component (zrfs, libzrecord0,
# libzrsampler0, libzrecord-dev, python3-zrfs); lintian finds no error in
# them; each holds its own files; dpkg installs them, ldconfig then knows
# the libraries, a program builds against the -dev package with
# pkg-config; `mount -t fuse.zrfs` (mount.fuse3 finding /usr/bin/zrfs)
# mounts, the installed Python package reads; dpkg removes them, leaving
# nothing. Changes the machine: CI runs it as root on a fresh one.
# SRC: the source tree.
set -u
: "${SRC:?SRC must name the source tree}"
T=$(mktemp -d /tmp/zrfs-pkg-XXXXXX)
PKGS="zrfs python3-zrfs libzrecord-dev libzrecord0 libzrsampler0"
installed=0
cleanup() {
	mountpoint -q "$T/mnt" 2>/dev/null && umount "$T/mnt"
	[ $installed = 1 ] && dpkg -r $PKGS >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	exit 1
}
[ "$(id -u)" = 0 ] || fail "needs root (dpkg -i, mount)"
for p in $PKGS; do
	! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		fail "$p is installed already: the test would remove it"
done

cmake -S "$SRC" -B "$T/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
	-DBUILD_TESTING=OFF >/dev/null || fail "configure"
cmake --build "$T/build" -j2 >/dev/null || fail "build"
(cd "$T/build" && cpack -G DEB >"$T/cpack.out" 2>&1) || fail "cpack: $(tail -5 "$T/cpack.out")"
debs=""
for p in $PKGS; do
	d=$(ls "$T"/build/${p}_*.deb 2>/dev/null) || fail "no $p .deb produced: $(ls "$T/build")"
	debs="$debs $d"
done

# lintian: no error (its warnings are printed; see packaging/CMakeLists.txt)
lintian --allow-root $debs >"$T/lintian" 2>&1
grep -q '^E: ' "$T/lintian" && fail "lintian: $(grep '^E: ' "$T/lintian" | head -10)"
grep '^W: ' "$T/lintian" >&2

# what each package holds, and what it needs
holds() { # holds PKG FILE...: the package's .deb has every FILE
	p=$1
	shift
	dpkg-deb -c "$T"/build/${p}_*.deb | awk '{print substr($6, 2)}' >"$T/$p.files"
	for f in "$@" "/usr/share/doc/$p/copyright" "/usr/share/doc/$p/changelog.gz"; do
		grep -qx "$f" "$T/$p.files" || fail "$p does not hold $f"
	done
}
L=/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)
holds zrfs /usr/bin/zr /usr/bin/zrfs /usr/share/man/man1/zr.1.gz /usr/share/man/man8/zrfs.8.gz \
	/usr/share/bash-completion/completions/zr /usr/share/bash-completion/completions/zrfs
holds libzrecord0 $L/libzrecord.so.0
holds libzrsampler0 $L/libzrsampler.so.0
holds libzrecord-dev /usr/include/zrecord.h /usr/include/zrecord_names.h /usr/include/zrsampler.h \
	$L/libzrecord.so $L/pkgconfig/zrecord.pc $L/pkgconfig/zrsampler.pc
holds python3-zrfs /usr/lib/python3/dist-packages/zrfs/loader.py
grep -q '\.h$\|\.so$' "$T/zrfs.files" "$T/libzrecord0.files" && fail "headers or .so links outside -dev"
depends() { dpkg-deb -f "$T"/build/${1}_*.deb Depends; }
case $(depends zrfs) in *fuse3*libzrecord0*|*libzrecord0*fuse3*) ;; *) fail "zrfs depends on $(depends zrfs)" ;; esac
case $(depends zrfs) in *libc6*) ;; *) fail "zrfs does not depend on libc6: $(depends zrfs)" ;; esac
case $(depends python3-zrfs) in *python3*python3-numpy*) ;; *) fail "python3-zrfs depends on $(depends python3-zrfs)" ;; esac
[ "$(dpkg-deb -f "$T"/build/python3-zrfs_*.deb Architecture)" = all ] || fail "python3-zrfs is not Architecture: all"

dpkg -i $debs >"$T/dpkg.out" 2>&1 || fail "dpkg -i: $(tail -5 "$T/dpkg.out")"
installed=1
ldconfig -p | grep -q 'libzrecord.so.0 ' || fail "ldconfig does not know libzrecord.so.0 after install"
ldconfig -p | grep -q 'libzrsampler.so.0 ' || fail "ldconfig does not know libzrsampler.so.0 after install"
man -w zr >/dev/null 2>&1 && man -w 8 zrfs >/dev/null 2>&1 || fail "man does not find zr(1) and zrfs(8)"
# a program built against the -dev package, with pkg-config, runs
printf '#include <zrecord.h>\n#include <zrsampler.h>\nint main(void) { return 0; }\n' >"$T/p.c"
cc "$T/p.c" -o "$T/p" $(pkg-config --cflags --libs zrecord zrsampler) 2>"$T/cc.out" ||
	fail "building against libzrecord-dev: $(cat "$T/cc.out")"
"$T/p" || fail "a program built against libzrecord-dev does not run"

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
# zrfs(8)'s fstab line, as written but for its paths: read-only, others allowed
sed -n '/^\.SH FSTAB AND SYSTEMD/,/^\.fi/p' "$SRC/packaging/man/zrfs.8" | grep fuse.zrfs |
	sed "s|/srv/datasets/cats|$T/ds|; s|/mnt/cats|$T/mnt|" >"$T/fstab"
[ -s "$T/fstab" ] || fail "no fstab line in zrfs(8)"
mount -T "$T/fstab" "$T/mnt" 2>"$T/mount.err" || fail "zrfs(8)'s fstab line: $(cat "$T/mount.err")"
grep " $T/mnt fuse.zrfs " /proc/mounts | grep -q " ro,.*allow_other" ||
	fail "zrfs(8)'s fstab line mounts $(grep " $T/mnt " /proc/mounts)"
[ "$(cat "$T/mnt/note/0.txt")" = "hello from the package" ] || fail "reading the fstab mount"
umount "$T/mnt" || fail "umount"

dpkg -r $PKGS >/dev/null || fail "dpkg -r"
installed=0
for p in $PKGS; do
	while read -r f; do
		[ -d "$f" ] || [ ! -e "$f" ] || fail "$f ($p) left after dpkg -r"
	done <"$T/$p.files"
done
[ ! -e /usr/lib/python3/dist-packages/zrfs ] || fail "the Python package's directory left after dpkg -r"
ldconfig -p | grep -q 'libzrecord.so.0 ' && fail "ldconfig still knows libzrecord.so.0 after dpkg -r"
echo "deb: 5 packages built, lintian finds no error, installed, built against, mounted, read, removed"
