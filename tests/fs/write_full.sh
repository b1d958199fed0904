#!/bin/sh
# A full disk under a writable mount: the writing program is told ENOSPC
# (by write, fsync or close), a new file that cannot be stored goes away
# whole, a record replaced meanwhile keeps its old value or takes the new
# one whole, every file whose fsync returned is there byte-exact, zr verify
# is clean, and once there is room again writing goes on.
. "$(dirname "$0")/lib.sh"
: "${ZR:?ZR must name the zr binary}"
SMALL=$T/small
pid=
full_cleanup() {
	if mountpoint -q "$MNT" 2>/dev/null; then
		fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT"
	fi
	if mountpoint -q "$SMALL" 2>/dev/null; then
		umount "$SMALL" 2>/dev/null || umount -l "$SMALL"
	fi
	rm -rf "$T"
}
trap full_cleanup EXIT
mkdir "$SMALL" "$T/want"
mount -t tmpfs -o size=8m zrfs-test-full "$SMALL" || fail "cannot mount a tmpfs on $SMALL"
"$ZR" create "$SMALL/ds" --field img:bytes:ext=bin >/dev/null || fail "zr create"
head -c 3000000 /dev/zero >"$SMALL/filler" || fail "filler"
${ZRFS_WRAP:-} "$ZRFS" "$SMALL/ds" "$MNT" -o writable -f 2>"$T/log" &
pid=$!
timeout 60 sh -c "until mountpoint -q '$MNT'; do :; done" || fail "not mounted: $(cat "$T/log")"

"$PY" - "$MNT" "$SMALL" "$T/want" "$T/log" <<'EOF' || fail "writing on a full disk (daemon said: $(tail -5 "$T/log"))"
import errno, os, sys, time
mnt, small, want, log = sys.argv[1:]
img = mnt + '/img'

def put(path, data, flags=os.O_WRONLY | os.O_CREAT | os.O_EXCL):
    """Write @data to @path and fsync it: None, or the OSError met."""
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        return e
    err = None
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except OSError as e:
        err = e
    try:
        os.close(fd)
    except OSError as e:
        err = err or e
    return err

def records():
    return sorted(int(n.split('.')[0]) for n in os.listdir(img) if n[0].isdigit())

# new files until the disk is full
ok = []
for i in range(100):
    data = os.urandom(300_000)
    err = put(f'{img}/new{i}.bin', data)
    if err:
        break
    ok.append(data)
assert err is not None, 'the disk never filled'
assert err.errno == errno.ENOSPC, err
assert len(ok) >= 3, f'only {len(ok)} files fitted'
failed, failed_data = f'{img}/new{i}.bin', data
have = records()
assert have[:len(ok)] == list(range(len(ok))), have

# fill what is left, then replace record 0: refused, or whole
fd = os.open(small + '/filler2', os.O_WRONLY | os.O_CREAT, 0o644)
try:
    while True:
        os.write(fd, b'\0' * 4096)
except OSError as e:
    assert e.errno == errno.ENOSPC, e
os.close(fd)
# a new file closed on the full disk: the committer retries it less and
# less often (100 ms, then twice as long each time, 5 s at most: 5 tries in
# 3 s), not every 100 ms (30). Each try logs a line for it and one for the
# file that failed above; the log's own limit (10 lines a second) would
# let a spin write 30. The count is over a window, not a wait for it
with open(img + '/retried.bin', 'wb') as f:
    f.write(os.urandom(50_000))
def tries():
    return sum('cannot store' in l for l in open(log, errors='replace'))
t0 = tries()
time.sleep(3)
assert tries() - t0 <= 16, f'{tries() - t0} lines of tries to store two files in 3 s'
os.remove(img + '/retried.bin')
new0 = os.urandom(300_000)
err = put(img + '/0.bin', new0, os.O_WRONLY | os.O_TRUNC)
got0 = open(img + '/0.bin', 'rb').read()
if err:
    assert err.errno == errno.ENOSPC, err
    assert got0 in (ok[0], new0), f'record 0 is {len(got0)} bytes of neither value'
else:
    assert got0 == new0
final0 = got0

# room again: writing goes on
os.remove(small + '/filler')
os.remove(small + '/filler2')
more = [os.urandom(300_000) for _ in range(2)]
for j, data in enumerate(more):
    err = put(f'{img}/more{j}.bin', data)
    assert err is None, err
# the file that failed is not stored and its name is gone, or (its fsync
# failed at the commit, after its value was appended) it was stored whole
names = os.listdir(img)
assert all(n[0].isdigit() for n in names), names
have = records()
values = [open(f'{img}/{n}.bin', 'rb').read() for n in have]
assert have == list(range(len(have))), have
expect = [final0] + ok[1:]
if len(have) == len(ok) + 3:  # the failed file was committed after all
    expect.append(failed_data)
expect += more
assert len(values) == len(expect), (len(values), len(expect))
for n, (v, e) in enumerate(zip(values, expect)):
    assert v == e, f'record {n}: {len(v)} bytes, not the {len(e)} written'
for n, v in enumerate(values):
    open(f'{want}/{n}', 'wb').write(v)
EOF
grep -q "No space left on device" "$T/log" || fail "the daemon's log says nothing of the full disk"
fusermount3 -u "$MNT" || fail "unmount"
wait "$pid" || fail "the daemon exited $?: $(tail -5 "$T/log")"
"$ZR" verify "$SMALL/ds" >"$T/verify" 2>&1 || fail "zr verify: $(cat "$T/verify")"
n=$("$ZR" info "$SMALL/ds" | awk '/^records/ {print $2}')
w=$(ls "$T/want" | wc -l)
[ "$n" = "$w" ] || fail "the dataset holds $n records, the mount showed $w"
i=0
while [ $i -lt "$n" ]; do
	"$ZR" cat "$SMALL/ds" img $i >"$T/got" || fail "zr cat img $i"
	same "$T/want/$i" "$T/got"
	i=$((i + 1))
done
echo "ok: full disk: ENOSPC told, $n records intact, verify clean"
