#!/bin/sh
# /.batches: batch files hold exactly the sampler's ids and those records'
# bytes (raw and flate, fixed and variable sizes); .npy batches load with
# numpy; reads at odd offsets work; ranks cover an epoch exactly once; tails
# follow the policy; hostile spec names are ENOENT and the daemon serves on;
# .npy batches of flate and raw rows with missing records read whole and in
# pieces.
. "$(dirname "$0")/lib.sh"
: "${ZR:?ZR must name the zr binary}"
make_ds --records 300
mount_ds -o batches=shuffle,seed=42,batch=16,world=2,rank=0:block,seed=3,batch=10,tail=keep,block=32
B="$MNT/.batches"
[ "$(ls "$B" | tr '\n' ' ')" = "block,seed=3,batch=10,tail=keep,block=32 shuffle,batch=256,tail=keep shuffle,seed=42,batch=16,world=2,rank=0 " ] ||
	fail ".batches lists: $(ls "$B")"
# the spec the issue names works as written, unlisted
[ -s "$B/shuffle,seed=42,batch=256/epoch-0/0/ids" ] || fail "shuffle,seed=42,batch=256 missing"

# ids are the sampler's, for several specs, epochs and ranks
# (from=P: a resume on another world size, its steps from position P)
for spec in shuffle,seed=42,batch=16,world=2,rank=1 block,seed=3,batch=10,tail=keep,block=32 \
	seq,batch=7,tail=pad window,window=5,stride=3 random,seed=9,batch=20 \
	shuffle,seed=3,batch=7,world=2,rank=1,tail=keep,from=100; do
	for e in 0 3; do
		"$ZR" sample "$spec" --n 300 --epoch $e 2>/dev/null >"$T/want" || fail "zr sample $spec"
		steps=$(wc -l <"$T/want")
		[ "$(ls "$B/$spec/epoch-$e" | wc -l)" -eq "$steps" ] || fail "$spec epoch $e: step count"
		k=0
		while read -r line; do
			got=$(od -An -v -tu8 "$B/$spec/epoch-$e/$k/ids" | tr -s ' \n' ' ' | sed 's/^ //; s/ $//')
			[ "$got" = "$line" ] || fail "$spec epoch $e step $k: ids '$got', want '$line'"
			k=$((k + 1))
		done <"$T/want"
	done
done
# info.json says where a resume goes on from: after this step of every rank
grep -q '"position_after": 114$' "$B/shuffle,seed=3,batch=7,world=2,rank=1,tail=keep,from=100/epoch-0/0/info.json" ||
	fail "position_after of a from= spec's step 0"
# a job that saved its position after the epoch's last step resumes on an
# epoch with no steps left (the README's resume example then does nothing)
ls "$B/shuffle,seed=3,batch=7,world=2,tail=keep,from=300/epoch-0" >"$T/none" ||
	fail "from= the epoch's end is not an empty epoch"
[ -s "$T/none" ] && fail "from= the epoch's end lists steps: $(head -3 "$T/none")"
ls "$B/shuffle,seed=3,batch=7,from=301/epoch-0" 2>/dev/null && fail "from= past the end is a directory"

"$PY" - "$B" "$REF" <<'PY' || fail "batch contents"
import json, os, random, sys
import numpy as np
B, ref = sys.argv[1:]
names = {"img": ".jpg", "txt": ".txt", "vec": "", "lab": ""}
def record(field, i):
    p = f"{ref}/{field}/{i}{names[field]}"
    return open(p, "rb").read() if os.path.exists(p) else b""
rnd = random.Random(5)
for spec in ("shuffle,seed=42,batch=16,world=2,rank=0", "block,seed=3,batch=10,tail=keep,block=32"):
    seen = []
    for rank in (0, 1):
        s = spec.replace("rank=0", f"rank={rank}") if "world" in spec else spec
        if rank and "world" not in spec:
            break
        ep = f"{B}/{s}/epoch-1"
        for k in sorted(os.listdir(ep), key=int):
            d = f"{ep}/{k}"
            ids = np.fromfile(f"{d}/ids", dtype="<u8").tolist()
            seen += ids
            info = json.load(open(f"{d}/info.json"))
            assert info["step"] == int(k) and info["epoch"] == 1 and info["batch_size"] == len(ids)
            # where a resume goes on from (spec key from=): after this step of every rank
            assert info["position_after"] == min((int(k) + 1) * info["batch_size"] * info["world"],
                                                 info["records"]) or info["batch_size"] != len(ids)
            # seeds above 2^53 lose precision as JSON numbers: also a string
            assert int(info["seed_str"]) == json.loads(open(f"{d}/info.json").read(),
                                                       parse_int=int)["seed"]
            for field in names:
                want = [record(field, i) for i in ids]
                data = open(f"{d}/{field}", "rb").read()
                assert data == b"".join(want), (d, field)
                offs = np.fromfile(f"{d}/{field}.offsets", dtype="<u8")
                assert offs.tolist() == np.cumsum([0] + [len(w) for w in want]).tolist()
                # odd offsets and sizes
                fd = os.open(f"{d}/{field}", os.O_RDONLY)
                for _ in range(5):
                    off, n = rnd.randrange(0, len(data) + 3), rnd.choice((1, 3, 4097, 1 << 20))
                    assert os.pread(fd, n, off) == data[off:off + n]
                os.close(fd)
            vec = np.load(f"{d}/vec.npy")
            assert vec.shape == (len(ids), 4, 3) and vec.dtype == np.float32
            for row, i in zip(vec, ids):
                w = record("vec", i)
                assert (row.tobytes() == w) if w else not row.any()
            lab = np.load(f"{d}/lab.npy")
            assert lab.tolist() == [int(i % 10) - 3 for i in ids]
    if "world" in spec:  # drop tail: 300 // 32 steps of 16 per rank
        assert sorted(seen) == sorted(set(seen)) and len(seen) == 300 // 32 * 32, len(seen)
    else:  # keep tail: every id once, last batch short
        assert sorted(seen) == list(range(300)), "block epoch is not a permutation"
        last = sorted(os.listdir(f"{B}/{spec}/epoch-1"), key=int)[-1]
        assert os.path.getsize(f"{B}/{spec}/epoch-1/{last}/ids") == 8 * (300 % 10 or 10)

# a reader moving on drops batch files drop_behind (default 16) steps behind
# it from the page cache (in the background: polled, with a deadline), and
# reading one again gives the same bytes
import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                      ctypes.c_long)
libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
def cached_pages(path):
    fd = os.open(path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    addr = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED: maps, reads nothing
    os.close(fd)
    assert addr not in (None, ctypes.c_void_p(-1).value), "mmap failed"
    vec = (ctypes.c_ubyte * ((size + 4095) // 4096))()
    assert libc.mincore(addr, size, vec) == 0
    libc.munmap(addr, size)
    return sum(v & 1 for v in vec)
ep = f"{B}/seq,batch=16/epoch-2"
for field in ("img", "txt"):  # raw and flate
    first = open(f"{ep}/0/{field}", "rb").read()
    assert len(first) > 4096 and cached_pages(f"{ep}/0/{field}") > 0
    for k in range(1, 17):  # reading step 16 drops step 0
        open(f"{ep}/{k}/{field}", "rb").read()
    deadline = time.monotonic() + 20
    while cached_pages(f"{ep}/0/{field}") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert cached_pages(f"{ep}/0/{field}") == 0, f"step 0 of {field} still cached"
    assert open(f"{ep}/0/{field}", "rb").read() == first

# hostile names: ENOENT, and the mount keeps serving
bad = ["..", "shuffle,seed=-1", "shuffle,batch=0", "Shuffle", "shuffle,rank=2", "x" * 300,
       "seq,batch=1000", "shuffle,hi=301", "shuffle,seed=01", "shuffle,,seed=1", "seq,lo=300"]
r = random.Random(1)
while len(bad) < 2000:
    bad.append("".join(r.choice("shufleqbatchseed=,0123456789-") for _ in range(r.randrange(1, 40))))
for name in bad:
    try:
        os.stat(f"{B}/{name}/epoch-0/0/ids")
    except OSError as e:
        continue
    # a random name that happens to be a valid spec is fine: it must work
    assert os.path.getsize(f"{B}/{name}/epoch-0/0/ids") > 0, name
for name in ("epoch-01", "epoch--1", "epoch-x", "epoch-1099511627777", "epoch-"):
    assert not os.path.exists(f"{B}/seq,batch=7/{name}"), name
for name in ("43", "01", "-1", "x"):
    assert not os.path.exists(f"{B}/seq,batch=7/epoch-0/{name}"), name
assert not os.path.exists(f"{B}/seq,batch=7/epoch-0/0/nofield")
assert open(f"{B}/seq,batch=7/epoch-0/0/ids", "rb").read() == np.arange(7, dtype="<u8").tobytes()
# a .npy view of several pages read in pieces: O_DIRECT sends each read to
# the daemon at its own offset and size (what it leaves short, the kernel
# reads through the page cache, emptied first so that those reads reach the
# daemon too)
for spec in ("seq,batch=256", "shuffle,seed=7,batch=256"):
    d = f"{B}/{spec}/epoch-0/0"
    ids = np.fromfile(f"{d}/ids", dtype="<u8").tolist()
    full = open(f"{d}/vec.npy", "rb").read()
    hdr = len(full) - 48 * len(ids)
    assert hdr % 64 == 0 and len(full) > 3 * 4096
    assert full[hdr:] == b"".join(record("vec", i) or bytes(48) for i in ids)
    fd = os.open(f"{d}/vec.npy", os.O_RDONLY | os.O_DIRECT)
    for _ in range(200):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        off, n = rnd.randrange(0, len(full) + 3), rnd.choice((1, 47, 49, 100, 4097, 9000))
        assert os.pread(fd, n, off) == full[off:off + n], (d, off, n)
    os.close(fd)
PY

# a flate batch or record larger than the cache is refused with EFBIG and a
# log line, not made outside the bound; smaller ones still read
big=$(cd "$REF/txt" && ls -S | head -1)
cache=$(($(stat -c %s "$REF/txt/$big") - 1))
[ $(($(stat -c %s "$REF/txt/0.txt") + 16)) -le $cache ] || fail "txt record 0 is not small"
fusermount3 -u "$MNT" || fail "unmount"
"$ZRFS" "$DS" "$MNT" -f -o cache=$cache 2>"$T/log" &
pid=$!
timeout 20 sh -c "until mountpoint -q '$MNT'; do :; done" || fail "not mounted with cache=$cache"
for f in "$MNT/txt/$big" "$B/seq,batch=300/epoch-0/0/txt"; do
	out=$(cat "$f" 2>&1 >/dev/null) && fail "$f, larger than the cache, was served"
	case $out in *"File too large"*) ;; *) fail "$f: $out" ;; esac
done
same "$REF/txt/0.txt" "$MNT/txt/0.txt"
same "$REF/txt/0.txt" "$B/seq,batch=1/epoch-0/0/txt"
# names of bad specs are logged escaped (a newline cannot forge a line),
# and at most 10 such lines a second however many lookups
"$PY" - "$B" >"$T/secs" <<'PY' || fail "bad spec lookups"
import os, sys, time
B = sys.argv[1]
t0 = time.monotonic()
for name in ["seq,batch=0\nzrfs: forged line"] + ["seq,batch=x%d" % i for i in range(3000)]:
    assert not os.path.exists(f"{B}/{name}/epoch-0/0/ids"), name
print(int(time.monotonic() - t0) + 1)
PY
fusermount3 -u "$MNT"
wait $pid || fail "zrfs exited $?"
grep -q '^zrfs: forged line' "$T/log" && fail "a spec name forged a log line"
grep -q 'seq,batch=0\\x0azrfs: forged line' "$T/log" || fail "no escaped name: $(head -3 "$T/log")"
n=$(grep -c "^zrfs: .batches/seq,batch=" "$T/log")
[ "$n" -le $((10 * ($(cat "$T/secs") + 1))) ] || fail "$n lines for bad specs in $(cat "$T/secs") s"
grep -q "the next are left out (and counted)" "$T/log" || [ "$n" -eq 3001 ] ||
	fail "$n of 3001 lines logged, and no line says the rest were left out"
[ "$(grep -c "larger than the cache (-o cache=$cache bytes): not served (EFBIG)" "$T/log")" -ge 2 ] ||
	fail "no log lines for the refused files: $(cat "$T/log")"

# .npy batches of rows several to a page, flate and raw, some records
# missing: read whole and in odd O_DIRECT pieces, both give the rows in
# batch order with zeros for the missing ones
DS=$T/rows
"$ZR" create "$DS" --field a:f32:flate:shape=32x16 --field b:f32:shape=32x16 >/dev/null ||
	fail "zr create"
"$PY" - "$T/row" <<'PY' || fail "rows"
import sys
import numpy as np
for i in range(40):
    np.full((32, 16), i + 0.5, dtype="<f4").tofile(f"{sys.argv[1]}{i}")
PY
i=0
while [ $i -lt 40 ]; do
	case $((i % 7)) in # 3: a is missing, 5: b is
	3) set -- --b="$T/row$i" ;;
	5) set -- --a="$T/row$i" ;;
	*) set -- --a="$T/row$i" --b="$T/row$i" ;;
	esac
	"$ZR" put "$DS" "$@" >/dev/null || fail "zr put $i"
	i=$((i + 1))
done
mount_ds
"$PY" - "$MNT" <<'PY' || fail "flate and raw .npy batch views with missing rows"
import os, random, sys
import numpy as np
mnt = sys.argv[1]
rnd = random.Random(11)
epoch = f"{mnt}/.batches/shuffle,seed=9,batch=32,tail=keep/epoch-0"
for k in ("0", "1"):
    d = f"{epoch}/{k}"
    ids = np.fromfile(f"{d}/ids", dtype="<u8").tolist()
    for field, gap in (("a", 3), ("b", 5)):
        want = np.stack([np.full((32, 16), 0 if i % 7 == gap else i + 0.5, "<f4") for i in ids])
        full = open(f"{d}/{field}.npy", "rb").read()
        assert np.array_equal(np.load(f"{d}/{field}.npy"), want), (d, field)
        fd = os.open(f"{d}/{field}.npy", os.O_RDONLY | os.O_DIRECT)
        for _ in range(100):
            off, n = rnd.randrange(0, len(full) + 3), rnd.choice((1, 100, 2047, 4097, 9000, 1 << 20))
            assert os.pread(fd, n, off) == full[off:off + n], (d, field, off, n)
        os.close(fd)
PY

# why a spec is refused for the records the mount shows: .batches/.why/SPEC,
# looked up anew each time (it follows appends), listed nowhere
why="$MNT/.batches/.why/seq,batch=41"
[ "$(cat "$why")" = "seq,batch=41: 40 records make no full batch of 41 for 1 rank (use tail=keep or tail=pad)" ] ||
	fail ".why of a batch past the records: $(cat "$why")"
[ "$(cat "$MNT/.batches/.why/seq,batch=40")" = "ok: 1 step an epoch over 40 records" ] ||
	fail ".why of a spec taken: $(cat "$MNT/.batches/.why/seq,batch=40")"
[ -z "$(ls -A "$MNT/.batches/.why")" ] || fail ".why lists $(ls -A "$MNT/.batches/.why")"
ls -A "$MNT/.batches" | grep -q why && fail ".batches lists .why"
"$ZR" put "$DS" --a="$T/row0" --b="$T/row0" >/dev/null || fail "zr put 41"
timeout 20 sh -c "until [ -e '$MNT/a/40' ]; do :; done" || fail "the 41st record is not shown"
[ "$(cat "$why")" = "ok: 1 step an epoch over 41 records" ] || fail ".why after an append: $(cat "$why")"

# a batch far larger than the dataset and the cache (16,777,216 ids, the
# tail padded from 300 records): every request takes memory for what it
# reads. Parts made in the cache (a raw field's offsets, a flate field's
# batch) larger than it are refused (EFBIG); the ids and a raw .npy view
# are read in pieces; the daemon's peak resident size stays far below
# what one request used to take (2 GB)
fusermount3 -u "$MNT" || fail "unmount"
"$ZRFS" "$T/ds" "$MNT" -f -o cache=16M 2>"$T/log" &
pid=$!
timeout 20 sh -c "until mountpoint -q '$MNT'; do :; done" || fail "not mounted with cache=16M"
"$PY" - "$MNT" "$pid" <<'PY' || fail "a huge batch"
import errno, os, sys
import numpy as np
mnt, pid = sys.argv[1], sys.argv[2]
def peak_mb():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
base = peak_mb()
d = f"{mnt}/.batches/seq,batch=16777216,tail=pad/epoch-0/0"
ids = open(f"{d}/ids", "rb")
ids.seek(8 * 16777000)
assert np.frombuffer(ids.read(8 * 16), "<u8").tolist() == [(16777000 + i) % 300 for i in range(16)]
assert os.path.getsize(f"{d}/ids") == 8 * 16777216
for name in ("img.offsets", "img", "txt", "txt.offsets"):
    try:
        open(f"{d}/{name}", "rb").read(131072)
        raise SystemExit(f"{name}: served, though larger than the cache")
    except OSError as e:
        assert e.errno == errno.EFBIG, (name, e)
vec = open(f"{d}/vec.npy", "rb")
head = vec.read(128)
assert head.startswith(b"\x93NUMPY") and b"(16777216, 4, 3)" in head, head
vec.seek(len(head) + 48 * 299)
row = np.frombuffer(vec.read(48 * 2), "<f4").reshape(2, 4, 3)
ref = np.load(f"{mnt}/vec.npy")
assert np.array_equal(row[0], ref[299]) and np.array_equal(row[1], ref[0]), "padded rows"
# property: random batch sizes up to 2^24, random tails and pieces: each
# read is right or EFBIG (a part made in the cache that does not fit it)
import random
rnd = random.Random(5)
for k in range(20):
    b = rnd.choice((1, 7, 300, 4096, 65537, 1 << 20, 3 << 20, 1 << 24, rnd.randrange(1, 1 << 24)))
    tail = rnd.choice(("pad", "keep", "drop")) if b <= 300 else "pad"
    d = f"{mnt}/.batches/seq,batch={b},tail={tail}/epoch-1/0"
    n = os.path.getsize(f"{d}/ids") // 8
    for name in ("ids", "img.offsets", "img", "vec.npy", "txt.offsets"):
        try:
            with open(f"{d}/{name}", "rb") as f:
                size = os.fstat(f.fileno()).st_size
                off = rnd.randrange(0, max(size, 1))
                f.seek(off)
                got = f.read(rnd.choice((1, 4096, 65536)))
        except OSError as e:
            assert e.errno == errno.EFBIG, (b, name, e)
            assert (n + 1) * 8 > 16 << 20 or name == "txt.offsets", (b, name, "EFBIG")
            continue
        if name == "ids":
            want = [(i % 300) for i in range(off // 8, off // 8 + len(got) // 8 + 1)]
            with open(f"{d}/ids", "rb") as f:
                f.seek(off - off % 8)
                v = np.frombuffer(f.read(8 * len(want)), "<u8")
            assert v.tolist() == want[:len(v)], (b, "ids")
grew = peak_mb() - base
# (an ASan build keeps up to 256 MB of freed blocks in its quarantine)
limit = 100 + (300 if os.environ.get("ASAN_OPTIONS") else 0)
assert grew < limit, f"the daemon's peak grew by {grew} MB"
print(f"peak grew by {grew} MB", file=sys.stderr)
PY
fusermount3 -u "$MNT"
wait $pid || fail "zrfs exited $?"
grep -q "larger than the cache (-o cache=16777216 bytes): not served (EFBIG)" "$T/log" ||
	fail "no log line for the refused parts: $(cat "$T/log")"
