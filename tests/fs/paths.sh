#!/bin/sh
# Hostile and random names get ENOENT (or the kernel's own ENAMETOOLONG),
# and the daemon keeps serving; writes of every kind get EROFS.
. "$(dirname "$0")/lib.sh"
make_ds --records 100
mount_ds
"$PY" - "$MNT" "$REF" <<'PY' || fail "bad paths"
import errno, os, random, sys
mnt = sys.argv[1]
names = ["..", ".", "...", "-1", "+1", "01", "00", "1e3", " 1", "1 ", "0x1", "100", "101",
         "99999999999999999999999", "1099511627776", "18446744073709551616", "5.jpg.jpg",
         "5.JPG", "5.", "5.txt", ".jpg", "5jpg", "\u00e9", "5\n", "a" * 255, "img", "meta.json"]
rnd = random.Random(7)
alphabet = "0123456789.jpgtx/-+ \\\u00e9\x01"
while len(names) < 10000:
    names.append("".join(rnd.choice(alphabet) for _ in range(rnd.randrange(1, 30))))
bad = 0
for d in ("img", "txt", "vec"):
    for name in names:
        path = f"{mnt}/{d}/{name}"
        try:
            os.stat(path)
        except OSError as e:
            assert e.errno in (errno.ENOENT, errno.ENAMETOOLONG, errno.ENOTDIR), (path, e)
            bad += 1
            continue
        # the few valid ones must be real records of this field
        base = os.path.normpath(path)
        assert base.startswith(mnt), path
for name in ("meta.json/x", "img.npy/0", "nope/0", "img/5.jpg/x"):
    try:
        os.stat(f"{mnt}/{name}")
        raise AssertionError(name)
    except OSError as e:
        assert e.errno in (errno.ENOENT, errno.ENOTDIR), (name, e)
assert bad > 29000, bad
# still serving
assert open(f"{mnt}/img/1.jpg", "rb").read() == open(sys.argv[2] + "/img/1.jpg", "rb").read()
PY
for cmd in "touch $MNT/img/new" "mkdir $MNT/d" "rm $MNT/img/1.jpg" "mv $MNT/img/1.jpg $MNT/img/2.jpg" \
	"chmod 777 $MNT/img/1.jpg" "truncate -s 0 $MNT/img/1.jpg" "cp /etc/hostname $MNT/img/1.jpg" \
	"ln -s x $MNT/img/l"; do
	out=$($cmd 2>&1) && fail "'$cmd' succeeded"
	case $out in *"Read-only file system"*) ;; *) fail "'$cmd': $out" ;; esac
done
"$PY" -c "import os,sys; os.open(sys.argv[1], os.O_WRONLY)" "$MNT/img/1.jpg" 2>&1 |
	grep -q "Read-only file system" || fail "open for writing is not EROFS"
