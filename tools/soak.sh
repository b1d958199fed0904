#!/bin/sh
# Soak test of a mount under a living dataset (figures in RELIABILITY.md).
#
#   tools/soak.sh [SECONDS] [ZRFS-OPTIONS]     (root; default 600 s,
#                                              cache=256M,check)
#
# Uses $ZRFS, $ZR and $MKDS when set, else builds build/ci if needed. Makes
# a 2,000-record dataset with the test helper and mounts it read-only; then,
# for SECONDS, a writer commits changes to random records (zr set, which
# journals them while readers hold older states) while a reader does what
# a training job and its users do: random partial epochs of several specs
# (a few steps each, from any step), random steps of random epochs, record
# files, files held open for a while and read again, and probes of many
# epochs and specs never seen before (more than the daemon's tables hold
# at once, within the first minute). Every 10 s it
# samples the daemon's resident memory (VmRSS), its open descriptors, the
# dataset's journals, the change log's size and its chunk files (the
# writer's values fill new ones: the daemon's descriptors follow them, up
# to its pool's bound), and prints a line. Every 30 s it damages the
# dataset from outside, as bit rot or a stray write would: one byte of a
# random img value is changed in its chunk file. The mount checks raw values
# (-o check): every img value and batch read is compared with what mkds
# wrote, and must be those bytes, or EIO where the value was damaged; at the
# end zr verify must name exactly the damaged values.
#
# Exit status is non-zero when a read fails or returns bytes no committed
# state had the size of (or, for img, other bytes than its own), when a read
# of an undamaged value fails, when the daemon dies, or when after the warm-up
# (the first quarter) the daemon's memory grew by more than 64 MB or the
# journals or the change log grew past their bounds (64 journals above the
# warm-up's, 4 MiB), or when 10 s after the load stops a commit still
# leaves a journal (the daemon still holds an older state it showed).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-600}
opts=${2:-cache=256M,check}
b=$top/build/ci
if [ -z "${ZRFS:-}" ] || [ -z "${MKDS:-}" ] || [ -z "${ZR:-}" ]; then
	[ -x "$b/fs/zrfs" ] && [ -x "$b/tests/mkds" ] && [ -x "$b/tools/zr" ] ||
		{ cmake -S "$top" -B "$b" >/dev/null && cmake --build "$b" -j2 >/dev/null; }
	ZRFS=$b/fs/zrfs MKDS=$b/tests/mkds ZR=$b/tools/zr
fi
T=$(mktemp -d /var/tmp/zr-soak-XXXXXX)
trap 'kill $writer 2>/dev/null || :; mountpoint -q "$T/mnt" && fusermount3 -uz "$T/mnt"; rm -rf "$T"' EXIT
trap 'exit 1' INT TERM
writer=
mkdir "$T/mnt"
"$MKDS" "$T/ds" "$T/ref" --records 2000 >/dev/null
"$ZRFS" "$T/ds" "$T/mnt" -o "$opts"
pid=$(pgrep -nf "zrfs $T/ds $T/mnt")

# the writer: a change to a random record's txt, committed, over and over
(
	i=0
	while [ ! -e "$T/stop" ]; do
		printf 'soak %d %0*d' $i $((i % 200)) 0 >"$T/value"
		"$ZR" set "$T/ds" $((i * 7919 % 2000)) --txt="$T/value" >/dev/null || exit 1
		i=$((i + 1))
	done
) &
writer=$!

/usr/bin/python3 - "$T" "$pid" "$secs" "$ZR" <<'PY'
import errno, json, os, random, re, subprocess, sys, time
T, pid, secs, zr = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
mnt, ds = f"{T}/mnt", f"{T}/ds"
rnd = random.Random(1)
specs = ["shuffle,seed=1,batch=32,tail=keep", "block,seed=2,batch=16,tail=keep",
         "seq,batch=64,tail=keep"]
held = []  # files held open, read again now and then
seeds = iter(range(1000, 1 << 62))  # specs of their own, one after the other

def status(key):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key):
            return int(line.split()[1]) // 1024
    return 0

def sample():
    journals = sum(1 for n in os.listdir(ds) if n.startswith("journal"))
    try:
        log = os.path.getsize(f"{ds}/changes")
    except FileNotFoundError:
        log = 0
    return (status("VmRSS:"), len(os.listdir(f"/proc/{pid}/fd")), journals, log,
            len(os.listdir(f"{ds}/chunk")))

damaged = set()  # img ids whose value was changed from outside

def img_ref(i):
    try:
        return open(f"{T}/ref/img/{i}.jpg", "rb").read()
    except FileNotFoundError:
        return b""  # a missing record: no bytes in a batch

def damage():
    """One byte of a random img value changed in place in its chunk file."""
    while True:
        i = rnd.randrange(2000)
        out = subprocess.run([zr, "stat", ds, "img", str(i)], capture_output=True,
                             text=True).stdout
        m = re.search(r"stored +(\d+) bytes in chunk/(\d+)\.zr at offset (\d+)", out)
        if m and i not in damaged:
            break
    n, chunk, off = (int(x) for x in m.groups())
    with open(f"{ds}/chunk/{chunk}.zr", "r+b") as f:
        f.seek(off + rnd.randrange(n))
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x20]))
    damaged.add(i)

def expect_eio(e, what, ids):
    if e.errno != errno.EIO or not damaged.intersection(ids):
        raise SystemExit(f"{what}: {e} (damaged: {sorted(damaged)})")

def read_step(d):
    ids = open(f"{d}/ids", "rb").read()
    nums = [int.from_bytes(ids[k:k + 8], "little") for k in range(0, len(ids), 8)]
    for f in ("img", "txt"):
        try:  # (checked, a batch's values are loaded whole: its offsets too)
            offs = open(f"{d}/{f}.offsets", "rb").read()
            data = open(f"{d}/{f}", "rb").read()
        except OSError as e:
            expect_eio(e, f"{d}/{f}", nums if f == "img" else [])
            continue
        n = len(offs) // 8 - 1
        if n != len(ids) // 8 or int.from_bytes(offs[-8:], "little") != len(data):
            raise SystemExit(f"{d}/{f}: offsets do not fit the data")
        if f == "img" and data != b"".join(img_ref(i) for i in nums):
            raise SystemExit(f"{d}/img: other bytes than the records' (damaged: {sorted(damaged)})")

def read_img(i):
    try:
        got = open(f"{mnt}/img/{i}.jpg", "rb").read()
    except FileNotFoundError:
        return  # a missing record
    except OSError as e:
        return expect_eio(e, f"img/{i}.jpg", [i])
    if got != img_ref(i):
        raise SystemExit(f"img/{i}.jpg: other bytes than its own (damaged: {sorted(damaged)})")

def work():
    k = rnd.random()
    if k < 0.35:  # a partial epoch: a few steps from anywhere
        d = f"{mnt}/.batches/{rnd.choice(specs)}/epoch-{rnd.randrange(1 << 16)}"
        steps = len(os.listdir(d))
        first = rnd.randrange(steps)
        for s in range(first, min(steps, first + rnd.randrange(1, 6))):
            read_step(f"{d}/{s}")
    elif k < 0.55:  # one random step of a random epoch
        d = f"{mnt}/.batches/{rnd.choice(specs)}/epoch-{rnd.randrange(1 << 30)}"
        read_step(f"{d}/{rnd.randrange(len(os.listdir(d)))}")
    elif k < 0.70:  # a record file of img, its bytes compared
        read_img(rnd.randrange(2000))
    elif k < 0.85:  # a record file of txt
        try:
            open(f"{mnt}/txt/{rnd.randrange(2000)}.txt", "rb").read()
        except FileNotFoundError:
            pass  # a missing record
    elif k < 0.95:  # a file held open, and one of those held read again or closed
        name = f"{mnt}/txt/{rnd.randrange(2000)}.txt"
        try:
            held.append(open(name, "rb"))
        except FileNotFoundError:
            pass
        if held:
            f = rnd.choice(held)
            f.seek(0)
            f.read()
        while len(held) > 32:
            held.pop(rnd.randrange(len(held))).close()
    else:  # probes: 200 epochs of a spec, 10 specs never seen, each a lookup
        spec = rnd.choice(specs)
        for _ in range(200):
            os.stat(f"{mnt}/.batches/{spec}/epoch-{rnd.randrange(1 << 40)}")
        for _ in range(10):
            os.stat(f"{mnt}/.batches/shuffle,seed={next(seeds)},batch=8")

start = time.monotonic()
next_sample, next_damage, rows, ops = start, start + 30, [], 0
print(f"{'s':>5} {'RSS MB':>7} {'fds':>5} {'journals':>8} {'changes KB':>10} {'chunks':>6} "
      f"{'reads':>8}")
while True:
    now = time.monotonic()
    if now >= next_sample:
        r = sample()
        rows.append((now - start,) + r)
        print(f"{now - start:5.0f} {r[0]:7d} {r[1]:5d} {r[2]:8d} {r[3] // 1024:10d} {r[4]:6d} "
              f"{ops:8d}", flush=True)
        next_sample += 10
        if now - start >= secs:
            break
    if now >= next_damage:
        damage()
        next_damage += 30
    work()
    ops += 1
warm = [r for r in rows if r[0] >= secs / 4]
base, worst = warm[0], [max(r[i] for r in warm) for i in range(1, 5)]
bad = []
if worst[0] - base[1] > 64:
    bad.append(f"memory grew {worst[0] - base[1]} MB after the warm-up")
if worst[2] - base[3] > 64:
    bad.append(f"journals grew from {base[3]} to {worst[2]}")
if worst[3] > 4 << 20:
    bad.append(f"the change log reached {worst[3]} bytes")
print(f"after the warm-up ({secs // 4} s): RSS {base[1]} -> max {worst[0]} MB, fds {base[2]} -> "
      f"max {worst[1]}, journals {base[3]} -> max {worst[2]}, change log {base[4] // 1024} -> "
      f"max {worst[3] // 1024} KB; {ops} reads")
# every value changed from outside is found, and nothing else
v = subprocess.run([zr, "verify", "--json", ds], capture_output=True, text=True)
found = {(p["field"], p["id"]) for p in json.loads(v.stdout)["problems"]}
if found != {("img", i) for i in damaged}:
    bad.append(f"zr verify found {sorted(found)}, the damage was img {sorted(damaged)}")
print(f"outside damage: {len(damaged)} img values changed, zr verify named "
      f"{len(found)}, no read returned a wrong byte")
if bad:
    raise SystemExit("; ".join(bad))
PY
touch "$T/stop" # the writer ends after its commit (killed, its zr would not)
wait $writer 2>/dev/null || :
writer=
# the load stopped (the reader's files closed): within 10 s the daemon lets
# go of the older states it showed, and a commit then leaves no journal
end=$(($(date +%s) + 10))
journals() { find "$T/ds" -maxdepth 1 -name 'journal*' | wc -l; }
until printf 'idle' >"$T/value" && "$ZR" set "$T/ds" 0 --txt="$T/value" >/dev/null &&
	[ "$(journals)" -eq 0 ]; do
	[ "$(date +%s)" -lt "$end" ] || {
		echo "soak: $(journals) journals 10 s after the load stopped" >&2
		exit 1
	}
done
echo "the load stopped: no journal within $((10 - end + $(date +%s))) s; RSS" \
	"$(awk '/VmRSS/ {print int($2 / 1024)}' /proc/$pid/status) MB," \
	"$(ls /proc/$pid/fd | wc -l) fds"
fusermount3 -u "$T/mnt"
echo "soak: passed"
