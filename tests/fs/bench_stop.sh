#!/bin/sh
# An interrupted `zr bench` leaves nothing behind: a SIGINT, SIGTERM or
# SIGHUP while its zrfs is mounted stops the daemon, unmounts, removes the
# scratch directory, and zr dies of the signal.
. "$(dirname "$0")/lib.sh"
: "${ZR:?ZR must name the zr binary}"

B=$T/bench
mkdir "$B"
mounts_under() { awk -v d="$1/" 'index($2, d) == 1 {print $2}' /proc/mounts; }
# whatever a failing case leaves mounted under $T goes before lib.sh's clean-up
trap 'for m in $(mounts_under "$T"); do fusermount3 -u -z "$m" || umount -l "$m"; done; cleanup' EXIT

n=0
for sig in INT TERM HUP; do
	"$ZR" bench batches --records 2000 --runs 100 --dir "$B" --zrfs "$ZRFS" >"$T/out" 2>&1 &
	pid=$!
	# hold zr while its zrfs is mounted, then signal it
	tries=0
	while :; do
		timeout 120 sh -c "until grep -q ' $B/' /proc/mounts; do :; done" ||
			fail "zr bench never mounted its zrfs: $(cat "$T/out")"
		kill -STOP "$pid"
		[ -n "$(mounts_under "$B")" ] && break
		kill -CONT "$pid" # it unmounted in between: again
		tries=$((tries + 1))
		[ $tries -lt 100 ] || fail "could not catch zr bench with its zrfs mounted"
	done
	kill -"$sig" "$pid"
	kill -CONT "$pid"
	rc=0
	wait "$pid" || rc=$?
	case $sig in INT) want=130 ;; TERM) want=143 ;; HUP) want=129 ;; esac
	[ "$rc" = "$want" ] || fail "SIG$sig: zr bench exited $rc, not $want: $(cat "$T/out")"
	[ -z "$(mounts_under "$B")" ] || fail "SIG$sig: left mounted: $(mounts_under "$B")"
	[ -z "$(ls -A "$B")" ] || fail "SIG$sig: left behind in $B: $(ls -A "$B")"
	! pgrep -f "$B/" >/dev/null || fail "SIG$sig: a process of the benchmark still runs"
	n=$((n + 1))
done
echo "ok: zr bench stopped by $n signals while mounted, nothing left"
