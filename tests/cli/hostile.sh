#!/bin/sh
# Hostile dataset files and trees: what is not a regular file where a
# dataset file should be (a FIFO would block every open or read forever)
# is refused by every command, naming it, and nothing is lost.
# Each command runs under a bound (timeout 20): a hang fails the case.
. "$(dirname "$0")/lib.sh"

# bounded CMD...: run it as `run` does, failing the case if it hangs
bounded() {
	run timeout 20 "$@"
	[ "$RC" -ne 124 ] || fail "hung (killed after 20 s)"
}

zr create ds --field a:bytes --field b:i64:shape=
expect_rc 0
printf abc >r
printf 12345678 >l
for i in 1 2 3; do
	zr put ds --a=r --b=l
	expect_rc 0
done
cp -a ds ds.orig

# fifo_at FILE [readers-pass|all-pass]: a FIFO at ds/FILE; no command
# hangs, every one refuses the dataset naming FILE (readers-pass: readers
# carry on without it, it only registers them; all-pass: writers too, it
# only tells a second writer who holds the lock), then the file comes back
# and the dataset is as it was
fifo_at() {
	mv "ds/$1" "$T/saved" 2>/dev/null
	mkfifo "ds/$1"
	for cmd in "info ds" "verify ds" "cat ds a 0" "ls ds a" "put ds --a=r --b=l"; do
		# shellcheck disable=SC2086
		bounded "$ZR" $cmd
		if [ "${2:-}" = all-pass ] || { [ "${2:-}" = readers-pass ] && [ "${cmd%% *}" != put ]; }; then
			expect_rc 0
			continue
		fi
		[ "$RC" -ne 0 ] || fail "zr $cmd took a FIFO at $1"
		if [ "$cmd" = "verify ds" ] && [ "${1#chunk/}" != "$1" ]; then
			# chunks are opened on first use: verify names each record
			# of the chunk, as for any damaged record, on stdout
			expect_out_has "field a, record 0: *ds/$1*not a regular file*"
		else
			expect_err_has "*ds/$1*not a regular file*"
		fi
	done
	[ "${2:-}" = all-pass ] && { rm -rf ds && cp -a ds.orig ds; }
	rm "ds/$1"
	[ -e "$T/saved" ] && mv "$T/saved" "ds/$1"
	zr verify ds
	expect_rc 0
	expect_out 'ds: 3 records, 0 problems'
}
fifo_at meta.json
fifo_at a.offset
fifo_at b.offset
fifo_at chunk/0.zr
fifo_at journal          # an earlier version's journal, read at open
fifo_at readers readers-pass
fifo_at writer all-pass

# a FIFO where the next commit's journal goes (a change of committed
# records writes one): a writer clears what no commit refers to at open,
# so the change is committed, and nothing hangs
gen=$("$ZR" info --json ds | sed -n 's/^ *"generation": \([0-9]*\),*/\1/p')
mkfifo "ds/journal.$((gen + 1))"
printf xyz >r2
bounded "$ZR" set ds 1 --a=r2
expect_rc 0
[ -p "ds/journal.$((gen + 1))" ] && fail "the FIFO journal.$((gen + 1)) is still there"
zr verify ds
expect_rc 0
expect_out 'ds: 3 records, 0 problems'
zr cat ds a 1
expect_out xyz

# symbolic links left where a writer writes whole files (meta.json.tmp,
# the next commit's journal, the next chunk, the writer's note), pointing
# outside the dataset: a writer removes them as any leftover, never
# following one, so the change is committed and what they point at is
# untouched
printf 'not the dataset' >"$T/victim"
gen=$("$ZR" info --json ds | sed -n 's/^ *"generation": \([0-9]*\),*/\1/p')
for f in meta.json.tmp "journal.$((gen + 1))" writer chunk/1.zr; do
	ln -s "$T/victim" "ds/$f"
done
printf uvw >r3
bounded "$ZR" set ds 2 --a=r3
expect_rc 0
[ "$(cat "$T/victim")" = 'not the dataset' ] || fail "a writer wrote through a link: $(cat "$T/victim")"
for f in meta.json.tmp "journal.$((gen + 1))" writer; do
	[ -L "ds/$f" ] && fail "the link ds/$f is still there"
done
zr verify ds
expect_rc 0
expect_out 'ds: 3 records, 0 problems'
zr cat ds a 2
expect_out uvw

# import dir does not follow symbolic links unless asked: a link to a file
# outside the tree (/etc/shadow, run as root) must not become a record. It
# keeps them as links (their targets as text, nothing read through them);
# without names (so no tree to keep them in) dangling links, loops, links
# to directories, FIFOs and devices are skipped with one warning, never an
# abort
mkdir -p tree/a
printf 'the secret' >secret
printf one >tree/a/1
ln -s "$T/secret" tree/a/2
ln -s "$T/nowhere" tree/a/3
ln -s 4 tree/a/4
ln -s .. tree/a/5
mkfifo tree/a/6
mknod tree/a/7 c 1 3
bounded "$ZR" import dir tree noln --no-names
expect_rc 0
expect_err_has "zr: import: skipped 4 symbolic links, 2 FIFOs, sockets or devices (--follow-links follows links to files); the first: tree/a/*"
zr info noln
expect_out_has "records      1"
grep -rq "the secret" noln && fail "a link's target was imported"
bounded "$ZR" import dir tree ln --follow-links --no-names
expect_rc 0
expect_err_has "zr: import: skipped 2 dangling or looping symbolic links, 1 symbolic link to a directory, 2 FIFOs, sockets or devices; the first: tree/a/*"
zr cat ln data 1
expect_out "the secret"
# with names: every link kept as a link, the FIFO as a FIFO (never opened:
# bounded would stop a hang), the device as a device with its number, given
# back by the export; with --follow-links
# the link to a file is that file, the others links
chmod 640 tree/a/6
bounded "$ZR" import dir tree lnk
expect_rc 0
expect_err_empty
grep -rq "the secret" lnk && fail "a link's target was imported"
zr export dir lnk lnkout
expect_rc 0
for l in 2 3 4 5; do
	[ "$(readlink "lnkout/a/$l")" = "$(readlink "tree/a/$l")" ] || fail "link a/$l not kept"
done
fifo=$(stat -c '%F %a %Y' tree/a/6)
[ "$(stat -c '%F %a %Y' lnkout/a/6)" = "$fifo" ] ||
	fail "the FIFO came back as $(stat -c '%F %a %Y' lnkout/a/6), not as $fifo"
dev=$(stat -c '%F %a %Y %t:%T' tree/a/7)
[ "$(stat -c '%F %a %Y %t:%T' lnkout/a/7)" = "$dev" ] ||
	fail "the device came back as $(stat -c '%F %a %Y %t:%T' lnkout/a/7), not as $dev"
# FIFO and device members of a shard: kept, and such members of the export
# again
mkdir -p shard/d && printf one >shard/d/s0.txt && mkfifo -m 604 shard/d/p &&
	mknod -m 660 shard/d/loop b 7 300 && tar cf fifo.tar -C shard d || fail "tar cf of a FIFO"
zr import tar fifo.tar fifods
expect_rc 0
expect_err_empty
zr export tar fifods fifo2.tar
expect_rc 0
tar tvf fifo2.tar | grep -q '^prw----r-- .* d/p$' ||
	fail "the FIFO is not a FIFO of the tar: $(tar tvf fifo2.tar)"
tar tvf fifo2.tar | grep -q '^brw-rw---- .* 7,300 .* d/loop$' ||
	fail "the device is not a device of the tar: $(tar tvf fifo2.tar)"
bounded "$ZR" import dir tree lnf --follow-links
expect_rc 0
zr export dir lnf lnfout
expect_rc 0
[ -f lnfout/a/2 ] && [ ! -L lnfout/a/2 ] && [ "$(cat lnfout/a/2)" = "the secret" ] ||
	fail "--follow-links: the link to a file is not that file"
[ "$(readlink lnfout/a/5)" = .. ] || fail "--follow-links: the link to a directory is not kept"
# an export into a directory where a link stands at a directory's path
# fails there, and never sets the mode or times of what the link points to
mkdir -p tdir/empty vdir && printf x >tdir/f && chmod 700 tdir/empty && chmod 755 vdir &&
	touch -d 2001-01-01 vdir
zr import dir tdir tds
expect_rc 0
mkdir planted && ln -s "$T/vdir" planted/empty
zr export dir tds planted
expect_rc 1
expect_err_has "zr: export: planted/empty: *"
[ "$(stat -c '%a %Y' vdir)" = "755 $(date -d 2001-01-01 +%s)" ] || fail "the export changed a link's target"

# zr rebalance on a full disk: its new tables are stored through a mapping,
# so their blocks are reserved first: ENOSPC and a message, never SIGBUS
# (root: a 2 MiB tmpfs, 40,000 one-byte records, a 640 KB table to write)
if [ "$(id -u)" = 0 ]; then
	mkdir small
	trap 'umount "$T/small" 2>/dev/null; rm -rf "$T"' EXIT
	mount -t tmpfs -o size=2m tmpfs small || fail "cannot mount a tmpfs"
	head -c 40000 /dev/urandom >flat
	zr import flat flat small/ds --record-size 1
	expect_rc 0
	avail=$(df -k --output=avail small | tail -1)
	head -c $(((avail - 100) * 1024)) /dev/zero >small/fill 2>/dev/null
	bounded "$ZR" rebalance small/ds
	expect_rc 1
	expect_err_has "zr: rebalance: small/ds/data.offset.new: cannot reserve 640000 bytes: No space left on device"
	zr verify small/ds
	expect_rc 0
	expect_out 'small/ds: 40000 records, 0 problems'
	zr cat small/ds data 39999
	[ "$(od -An -tu1 "$T/.out")" -eq "$(tail -c 1 flat | od -An -tu1)" ] || fail "record 39999 changed"
	# zr rm on the disk, now quite full: its commit fails, and it says
	# nothing moved, since nothing did
	cat /dev/zero >small/fill2 2>/dev/null
	bounded "$ZR" rm small/ds 7
	expect_rc 1
	expect_err_has "zr: rm: *No space left on device*"
	[ -s "$T/.out" ] && fail "zr rm said what it did not commit"
	zr info small/ds
	expect_out_has "records      40000"
	umount small
fi
