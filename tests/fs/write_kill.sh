#!/bin/sh
# A writable mount whose daemon is killed with SIGKILL while programs write
# through it, WRITE_KILLS times (default 200): tests/fs/write_kill.py checks
# every read, zr verify, and that every value whose fsync returned is kept.
. "$(dirname "$0")/lib.sh"
: "${ZR:?ZR must name the zr binary}"
"$PY" "$(dirname "$0")/write_kill.py" "$ZR" "$ZRFS" "$DS" "$MNT" "${WRITE_KILLS:-200}" ||
	fail "write_kill.py; the daemons said: $(tail -5 "$DS.log" 2>/dev/null)"
