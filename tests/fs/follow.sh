#!/bin/sh
# A mount follows a dataset that keeps changing: a name looked up while
# missing becomes readable once appended; then tests/fs/follow.py: four
# readers check every read against the committed states while one writer
# makes FOLLOW_COMMITS commits (default 1000: put, set, rm, 3 rebalances),
# the mount equals zr export within 2 s after, and writers killed with
# SIGKILL at FOLLOW_KILLS random instants (default 100) leave the mount
# showing the committed state. The daemon serves throughout and unmounts
# cleanly.
. "$(dirname "$0")/lib.sh"
: "${ZR:?ZR must name the zr binary}"
"$ZR" create "$DS" --field img:bytes:ext=png --field lab:i64:shape= \
	--field emb:f32:flate:shape=4 >/dev/null || fail "zr create"
# ZRFS_WRAP: a command the daemon runs under (the valgrind build's memcheck)
${ZRFS_WRAP:-} "$ZRFS" "$DS" "$MNT" -f 2>"$T/log" &
pid=$!
timeout 60 sh -c "until mountpoint -q '$MNT'; do :; done" || fail "not mounted"

# a name looked up while missing (the kernel caches that), then appended
[ -e "$MNT/img/0.png" ] && fail "img/0.png exists in an empty dataset"
printf 'first' >"$T/img"
printf '\001\000\000\000\000\000\000\000' >"$T/lab"
printf '\000\000\200\077\000\000\000\100\000\000\100\100\000\000\200\100' >"$T/emb"
"$ZR" put "$DS" --img="$T/img" --lab="$T/lab" --emb="$T/emb" >/dev/null || fail "zr put"
timeout 5 sh -c "until [ -e '$MNT/img/0.png' ]; do :; done" ||
	fail "an appended record was not visible within 5 s: $(tail -5 "$T/log")"
[ "$(cat "$MNT/img/0.png")" = first ] || fail "img/0.png: $(cat "$MNT/img/0.png")"
# FIELD.present.npy follows too: a record without a label is False there
# (its row of lab.npy reads 0, which is also a label)
"$ZR" put "$DS" --img="$T/img" >/dev/null || fail "zr put without a label"
present() { "$PY" -c "import numpy as np; print(np.load('$MNT/$1.present.npy').astype(int).tolist())"; }
"$PY" - "$MNT" <<'PY' || fail "lab.present.npy is $(present lab), not [1, 0], 5 s after the commit"
import sys, time
import numpy as np
t = time.monotonic()
while np.load(f"{sys.argv[1]}/lab.present.npy").astype(int).tolist() != [1, 0]:
    if time.monotonic() - t > 5:
        sys.exit(1)
PY
[ "$(present img)" = '[1, 1]' ] || fail "img.present.npy is $(present img)"
[ "$("$PY" -c "import numpy as np; print(np.load('$MNT/lab.npy').tolist())")" = '[1, 0]' ] ||
	fail "lab.npy is not [1, 0]"
"$ZR" rm "$DS" 1 >/dev/null || fail "zr rm"
"$ZR" rm "$DS" 0 >/dev/null || fail "zr rm"

# one record changed 300 times: its file's number comes round again after
# 256 changes, and each new value reads as soon as the mount shows it (the
# cache served a flate value 256 changes old). A program holds the first
# 260 versions open, so the kernel keeps every number: the oldest is then
# taken back for the new bytes, and the versions held otherwise read their
# own bytes still.
"$ZR" put "$DS" --img="$T/img" --lab="$T/lab" --emb="$T/emb" >/dev/null || fail "zr put"
"$PY" - "$ZR" "$DS" "$MNT/emb/0" "$T/v" <<'PY' || fail "a record changed 300 times"
import os, struct, subprocess, sys, time
zr, ds, path, tmp = sys.argv[1:5]
held = []
def value(k):
    return struct.pack('<4f', k, k + 0.5, -k, 7)
for k in range(300):
    open(tmp, 'wb').write(value(k))
    subprocess.run([zr, 'set', ds, '0', '--emb=' + tmp], check=True, capture_output=True)
    t = time.monotonic()
    while True:
        try:  # the mount may show the removals before it (the record is gone)
            with open(path, 'rb') as f:
                got = f.read()
        except FileNotFoundError:
            got = None
        if got == value(k):
            break
        if time.monotonic() - t > 5:
            sys.exit(f'change {k}: emb/0 reads {got and struct.unpack("<4f", got)} 5 s after it')
    if k < 260:
        held.append(os.open(path, os.O_RDONLY))
for k in (100, 200, 259):
    got = os.pread(held[k], 64, 0)
    if got != value(k):
        sys.exit(f'emb/0 held open at change {k} reads {struct.unpack("<4f", got)}')
PY
"$ZR" rm "$DS" 0 >/dev/null || fail "zr rm"

"$PY" "$(dirname "$0")/follow.py" "$ZR" "$DS" "$MNT" "${FOLLOW_COMMITS:-1000}" \
	"${FOLLOW_KILLS:-100}" || fail "follow.py; the daemon said: $(tail -5 "$T/log")"
kill -0 $pid 2>/dev/null || fail "the daemon died: $(tail -5 "$T/log")"
"$ZR" verify "$DS" >/dev/null || fail "zr verify"
fusermount3 -u "$MNT" || fail "unmount"
wait $pid || fail "zrfs exited $?: $(tail -5 "$T/log")"
