#!/bin/sh
# A writable mount whose daemon is killed with SIGKILL while programs write
# through it, WRITE_KILLS times (default 200) in field directories and as
# many in tree/, then as many read-only daemons following another writer:
# tests/fs/write_kill.py checks every read, zr verify, that every value
# whose fsync returned is kept, and that every daemon dies.
. "$(dirname "$0")/lib.sh"
: "${ZR:?ZR must name the zr binary}"
"$PY" "$(dirname "$0")/write_kill.py" "$ZR" "$ZRFS" "$DS" "$MNT" "${WRITE_KILLS:-200}" ||
	fail "write_kill.py exited $?; the daemons said: $(tail -5 "$DS.log" 2>/dev/null)"
