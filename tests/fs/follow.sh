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

"$PY" "$(dirname "$0")/follow.py" "$ZR" "$DS" "$MNT" "${FOLLOW_COMMITS:-1000}" \
	"${FOLLOW_KILLS:-100}" || fail "follow.py; the daemon said: $(tail -5 "$T/log")"
kill -0 $pid 2>/dev/null || fail "the daemon died: $(tail -5 "$T/log")"
"$ZR" verify "$DS" >/dev/null || fail "zr verify"
fusermount3 -u "$MNT" || fail "unmount"
wait $pid || fail "zrfs exited $?: $(tail -5 "$T/log")"
