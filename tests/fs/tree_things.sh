#!/bin/sh
# tree/ keeps what rsync -a of a tree keeps besides its files: directories
# (empty ones too, with their modes and times), symbolic links, FIFOs,
# sockets and devices. Real
# trees (/usr/share/icons: 332 empty directories; /usr/share/zoneinfo: 365
# links) and a made one (links relative, absolute, dangling, to a
# directory; directories 0700, 0555, timed) go in by zr import dir and come
# back, equal by diff -r, find (kind, mode, size, time, target), du
# --apparent-size, find -executable (access(2)) and rsync -ani --delete,
# through a read-only mount and zr export dir; rsync -a --delete and tar x
# into a writable tree/ land and stay after a remount; mkdir, rmdir, chmod,
# ln -s, mv and rm of links (onto files too), mkfifo, bind, mknod of devices
# and utimes on directories, links, FIFOs and devices are kept; a read-only
# mount follows another writer's.
. "$(dirname "$0")/lib.sh"
: "${ZR:?ZR must name the zr binary}"
unmount_all() {
	mountpoint -q "$T/ro" 2>/dev/null && { fusermount3 -u "$T/ro" 2>/dev/null || umount -l "$T/ro"; }
	cleanup
}
trap unmount_all EXIT

# what find sees of a tree, all of it: kind and mode, links, owner and
# group, size (@dirsize 0: not a directory's, which mkdir through a mount
# does not make 4096), time to the nanosecond, path, a link's target; then
# each device's number, and the names of each file with hard links
look() { # look DIR [nodirsize] > LIST
	(cd "$1" && find . -printf '%M %n %U:%G %s %T@ %p -> %l\n' | sort -k6) |
		if [ "${2:-}" = nodirsize ]; then awk '$1 ~ /^d/ {$4 = "-"} {print}'; else cat; fi
	(cd "$1" && find . \( -type b -o -type c \) -exec stat -c '%n %F %t:%T' {} + | sort)
	(cd "$1" && find . ! -type d -links +1 -printf '%i %p\n' | sort -k2 |
		awk '{names[$1] = names[$1] " " $2} END {for (i in names) print "same:" names[i]}' |
		sort)
}
sock() { "$PY" -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$1"; }
same_tree() { # same_tree SRC TREE WHAT [nodirsize]
	# (diff -r calls two FIFOs different, and opens devices, which a nodev
	# mount refuses: find and rsync compare them)
	(cd "$1" && find . \( -type p -o -type s -o -type b -o -type c \) -printf '%f\n') >"$T/x"
	diff -r --no-dereference -X "$T/x" "$1" "$2" >/dev/null ||
		fail "$3: diff -r: $(diff -r --no-dereference -X "$T/x" "$1" "$2" 2>&1 | head -3)"
	look "$1" "${4:-}" >"$T/a.find"
	look "$2" "${4:-}" >"$T/b.find"
	diff "$T/a.find" "$T/b.find" >/dev/null ||
		fail "$3: find differs: $(diff "$T/a.find" "$T/b.find" | head -6)"
	# access(2): root runs what an x bit lets run (each file was)
	(cd "$1" && find . -executable | sort) >"$T/a.x"
	(cd "$2" && find . -executable | sort) >"$T/b.x"
	diff "$T/a.x" "$T/b.x" >/dev/null ||
		fail "$3: find -executable differs: $(diff "$T/a.x" "$T/b.x" | head -4)"
	out=$(rsync -aniH --delete "$1/" "$2/") || fail "$3: rsync -aniH --delete"
	[ -z "$out" ] || fail "$3: rsync -aniH --delete lists: $(echo "$out" | head -4)"
}

# ---- a made tree: every kind of link, empty directories, modes, times
SRC=$T/src
mkdir -p "$SRC/a/empty" "$SRC/a/locked" "$SRC/b/deep/er" "$SRC/ro"
printf 'x\n' >"$SRC/a/x.txt"
printf '#!/bin/sh\necho ran\n' >"$SRC/b/run.sh"
chmod 755 "$SRC/b/run.sh"
ln -s ../a/x.txt "$SRC/b/rel"
ln -s /etc/hostname "$SRC/b/abs"
ln -s nowhere "$SRC/b/dangling"
ln -s ../a "$SRC/b/dirlink"
printf 'r\n' >"$SRC/ro/r.txt"
mkfifo -m 640 "$SRC/a/fifo-p" && sock "$SRC/b/sock-s" || fail "a FIFO and a socket"
mknod -m 620 "$SRC/a/dev-tty" c 5 0 && mknod "$SRC/b/dev-loop" b 7 300 || fail "two devices"
ln "$SRC/a/x.txt" "$SRC/b/x-again" || fail "a hard link"
chmod 700 "$SRC/a/locked"
chmod 555 "$SRC/ro"
touch -h -d '2001-02-03 04:05:06.789' "$SRC/b/rel" "$SRC/a/fifo-p" "$SRC/b/sock-s" "$SRC/a/dev-tty"
touch -d '2002-03-04 05:06:07.123456789' "$SRC/a/empty" "$SRC/b/deep/er" "$SRC/b/deep"
touch -d '2003-01-01' "$SRC/a" "$SRC/b" "$SRC/ro" "$SRC"
"$ZR" import dir "$SRC" "$DS" --ext "" >/dev/null 2>"$T/import.err" || fail "import dir: $(cat "$T/import.err")"
[ ! -s "$T/import.err" ] || fail "import dir said: $(cat "$T/import.err")"
mount_ds
same_tree "$SRC" "$MNT/tree" "made tree, read-only"
[ "$(du -s --apparent-size "$SRC" | cut -f1)" = "$(du -s --apparent-size "$MNT/tree" | cut -f1)" ] ||
	fail "du -s --apparent-size differs"
[ "$(cat "$MNT/tree/b/rel")" = x ] || fail "a relative link does not lead to its file"
[ "$("$MNT/tree/b/run.sh")" = ran ] || fail "an executable file does not run"
# links are never records: the sampler sees the files only
[ "$("$ZR" info "$DS" | awk '/^records/ {print $2}')" = 3 ] || fail "links or directories became records"
"$ZR" info "$DS" |
	grep -qx 'tree         8 directories, 4 symbolic links, 4 FIFOs, sockets or devices, 1 hard link (beside the records)' ||
	fail "zr info: $("$ZR" info "$DS" | grep '^tree')"
"$ZR" export dir "$DS" "$T/out" >/dev/null || fail "export dir"
same_tree "$SRC" "$T/out" "zr export dir" nodirsize
fusermount3 -u "$MNT" || fail "unmount"

# ---- writable: each change kept after a remount, as on a local directory
"$ZRFS" "$DS" "$MNT" -o writable,log="$T/log" || fail "zrfs -o writable"
cp -a "$SRC" "$T/ref"
for r in "$T/ref" "$MNT/tree"; do
	mkdir -p "$r/made/sub" || fail "mkdir -p in $r"
	chmod 750 "$r/made" || fail "chmod of a directory in $r"
	# mkdir(2)'s own mode, the umask applied (no chmod after it)
	"$PY" -c 'import os, sys; os.mkdir(sys.argv[1], 0o700)' "$r/private" ||
		fail "mkdir(0700) in $r"
	(umask 077 && "$PY" -c 'import os, sys; os.mkdir(sys.argv[1])' "$r/masked") ||
		fail "mkdir under umask 077 in $r"
	touch -d '2003-03-03' "$r/private" "$r/masked"
	ln -s ../a/x.txt "$r/made/l" || fail "ln -s in $r"
	mv "$r/b/rel" "$r/b/rel2" || fail "mv of a link in $r"
	rm "$r/b/dangling" || fail "rm of a link in $r"
	rmdir "$r/a/empty" || fail "rmdir of an imported directory in $r"
	mkdir "$r/keep" && touch -d '1999-09-09' "$r/keep" || fail "a directory's time in $r"
	touch -h -d '1998-08-08' "$r/made/l" || fail "a link's time in $r"
	# FIFOs and sockets: made, moved, their modes, owners and times set
	mkfifo -m 600 "$r/made/fifo-q" && mv "$r/a/fifo-p" "$r/made/fifo-p2" &&
		chmod 604 "$r/made/fifo-p2" && chown -h 5:6 "$r/made/fifo-q" &&
		rm "$r/b/sock-s" && sock "$r/made/sock-t" && chmod 700 "$r/made/sock-t" &&
		touch -h -d '1997-07-07' "$r/made/fifo-q" "$r/made/fifo-p2" "$r/made/sock-t" ||
		fail "FIFOs and sockets in $r"
	# devices: made, moved, their modes, owners and times set; one removed
	mknod -m 600 "$r/made/dev-null" c 1 3 && mv "$r/b/dev-loop" "$r/made/dev-loop2" &&
		chmod 2640 "$r/made/dev-loop2" && chown -h 7:8 "$r/made/dev-null" &&
		mknod "$r/made/dev-gone" b 8 1 && rm "$r/made/dev-gone" &&
		touch -h -d '1995-05-05' "$r/made/dev-null" "$r/made/dev-loop2" ||
		fail "devices in $r"
	# hard links: made by ln (to a file, a link, a FIFO, a device), kept
	# as either name is removed, renamed or replaced, and as their
	# directory moves
	mkdir "$r/hl" && printf 'one\n' >"$r/hl/a" && ln "$r/hl/a" "$r/hl/b" &&
		ln "$r/hl/a" "$r/made/c" && ln "$r/hl/b" "$r/hl/d" && rm "$r/hl/a" &&
		mv "$r/hl/b" "$r/hl/b2" && printf 'new\n' >"$r/hl/n" && mv "$r/hl/n" "$r/hl/d" &&
		printf 'more\n' >>"$r/made/c" && ln -s c "$r/made/s" && ln "$r/made/s" "$r/hl/s2" &&
		ln "$r/made/fifo-q" "$r/hl/fifo-q2" && ln "$r/made/dev-null" "$r/hl/dev-null2" &&
		mkdir "$r/hl/in" && ln "$r/hl/b2" "$r/hl/in/e" && mv "$r/hl/in" "$r/hl/out" &&
		touch -d '1993-03-03' "$r/hl/b2" "$r/hl/d" && touch -h -d '1993-03-03' "$r/made/s" &&
		touch -d '1994-04-04' "$r/hl" "$r/hl/out" || fail "hard links in $r"
	printf 'onto\n' >"$r/made/f" && mv "$r/made/f" "$r/b/abs" || fail "a file onto a link in $r"
	# a link and a FIFO onto files, by rename(2) itself (mv would copy
	# and remove on EXDEV): an imported file's record goes, and a new one
	printf 'new\n' >"$r/made/fifo-g" && ln -s ../b/rel2 "$r/made/over" && mkfifo "$r/made/fifo-o" &&
		"$PY" -c 'import os, sys; os.rename(*sys.argv[1:3]); os.rename(*sys.argv[3:])' \
			"$r/made/over" "$r/b/run.sh" "$r/made/fifo-o" "$r/made/fifo-g" &&
		touch -h -d '1996-06-06' "$r/b/run.sh" "$r/made/fifo-g" ||
		fail "a link and a FIFO renamed onto files in $r"
	# owners and groups (chown, chgrp, chown -h of a link), kept
	chown 1234:5678 "$r/a/x.txt" && chgrp 77 "$r/made/sub" && chown -h 99:98 "$r/made/l" &&
		chown 4000000000:3 "$r/keep" || fail "chown in $r"
	# a set-group-ID directory's group and bit, passed on
	mkdir "$r/sg" && chgrp 77 "$r/sg" && chmod 2775 "$r/sg" && touch "$r/sg/f" &&
		mkdir "$r/sg/s" && ln -s f "$r/sg/l" || fail "a set-group-ID directory in $r"
	touch -h -d '2006-06-06' "$r/sg/f" "$r/sg/s" "$r/sg/l" "$r/sg"
	touch -d '2005-05-05' "$r/made/sub" "$r/b/abs" # made at a moment of its own
	touch -d '2004-04-04' "$r/made" "$r/b" "$r/a" "$r"
done
[ "$(readlink "$MNT/tree/b/rel2")" = ../a/x.txt ] || fail "a link moved lost its target"
[ -f "$MNT/tree/b/abs" ] && [ ! -L "$MNT/tree/b/abs" ] || fail "a file renamed onto a link is not the file"
# what mount refuses: a link or hard link in a field's directory, a link
# whose name or target is not text (EILSEQ: the dataset keeps them as text),
# a device in a field's directory, opening a device (nodev)
ln -s "$(printf 'a\377')" "$MNT/tree/bin" 2>"$T/err" && fail "a link to a target not UTF-8 made"
grep -q 'Invalid or incomplete multibyte or wide character' "$T/err" || fail "ln -s said: $(cat "$T/err")"
ln -s x "$MNT/data/l" 2>/dev/null && fail "a link made in a field's directory"
ln "$MNT/tree/a/x.txt" "$MNT/data/hard" 2>/dev/null && fail "a hard link made in a field's directory"
mknod "$MNT/data/dev" c 1 3 2>/dev/null && fail "a device made in a field's directory"
head -c1 "$MNT/tree/made/dev-null" 2>"$T/err" && fail "a device opened on a nodev mount"
grep -q 'Permission denied' "$T/err" || fail "opening a device said: $(cat "$T/err")"
# what a local filesystem without the feature answers, as zrfs(8) lists it
refused=$("$PY" - "$MNT/tree/a" <<'EOF'
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
d = sys.argv[1]
def code(f):
    try:
        f()
        return 'ok'
    except OSError as e:
        return errno.errorcode[e.errno]  # EOPNOTSUPP is ENOTSUP
def exchange():
    if libc.renameat2(-100, (d + '/x.txt').encode(), -100, (d + '/y').encode(), 2) < 0:
        raise OSError(ctypes.get_errno(), 'renameat2')
open(d + '/y', 'w').close()
print(code(lambda: os.setxattr(d + '/x.txt', 'user.k', b'v')),
      code(lambda: os.listxattr(d + '/x.txt')),
      code(lambda: os.open(d, os.O_TMPFILE | os.O_WRONLY, 0o600)),
      code(exchange))
os.unlink(d + '/y')
EOF
) || fail "the refusals' probe"
[ "$refused" = "ENOTSUP ENOTSUP ENOTSUP EINVAL" ] ||
	fail "xattrs, O_TMPFILE, RENAME_EXCHANGE: $refused"
touch -d '2004-04-04' "$MNT/tree/a" # as the loop left it
# rename(2) of a directory moves it: its files keep their numbers, a file
# open for writing in it is stored at its new path; onto a directory with
# something in it ENOTEMPTY, into itself EINVAL, onto a file ENOTDIR
mkdir -p "$MNT/tree/mv1/in" && printf x >"$MNT/tree/mv1/in/f" || fail "a directory to move"
ino=$(stat -c %i "$MNT/tree/mv1/in/f")
exec 3>"$MNT/tree/mv1/in/open" && printf a >&3 || fail "a file open in it"
moved=$("$PY" - "$MNT/tree" <<'EOF'
import errno, os, sys
os.chdir(sys.argv[1])
def code(a, b):
    try:
        os.rename(a, b)
        return 'ok'
    except OSError as e:
        return errno.errorcode[e.errno]
print(code('mv1', 'mv2'), code('mv2', 'a'), code('mv2', 'mv2/in/x'), code('mv2', 'a/x.txt'))
EOF
) || fail "rename(2) of directories"
printf b >&3 && exec 3>&- || fail "writing on in a directory renamed"
[ "$moved" = "ok ENOTEMPTY EINVAL ENOTDIR" ] || fail "rename(2) of directories: $moved"
[ "$(stat -c %i "$MNT/tree/mv2/in/f")" = "$ino" ] || fail "a file's number changed with its directory's name"
[ "$(cat "$MNT/tree/mv2/in/open")" = ab ] || fail "a file open in a renamed directory: $(cat "$MNT/tree/mv2/in/open")"
[ ! -e "$MNT/tree/mv1" ] || fail "a renamed directory is still there"
rm -r "$MNT/tree/mv2" && touch -d '2004-04-04' "$MNT/tree" || fail "rm -r of the renamed directory"
same_tree "$T/ref" "$MNT/tree" "changes, mounted" nodirsize
unmount_wait
mount_ds
same_tree "$T/ref" "$MNT/tree" "changes, after a remount" nodirsize
fusermount3 -u "$MNT" || fail "unmount"
# zr export dir gives it all back: devices, FIFOs, sockets, hard links
"$ZR" export dir "$DS" "$T/exp" >/dev/null || fail "export dir after the changes"
same_tree "$T/ref" "$T/exp" "zr export dir after the changes" nodirsize

# ---- rsync -a --delete and tar x of real trees (/dev too) into a writable
# tree/
ZONE=/usr/share/zoneinfo
ICONS=/usr/share/icons
[ -d "$ZONE" ] && [ -d "$ICONS" ] || fail "$ZONE or $ICONS is missing (tzdata, hicolor-icon-theme)"
"$ZRFS" "$DS" "$MNT" -o writable,log="$T/log" || fail "zrfs -o writable"
rsync -a --delete "$ZONE/" "$MNT/tree/" || fail "rsync -a --delete of $ZONE exited $?"
out=$(rsync -ai --delete "$ZONE/" "$MNT/tree/") || fail "a second rsync -a --delete"
[ -z "$out" ] || fail "a second rsync -a --delete sent: $(echo "$out" | head -4)"
# /dev, as this machine has it (a copy, which nothing changes meanwhile):
# devices, symbolic links, directories
rsync -ax /dev/ "$T/devs/" || fail "rsync -ax /dev/ to $T/devs"
find "$T/devs" -type c | grep -q . || fail "no device in /dev"
rsync -a "$T/devs/" "$MNT/tree/dev/" || fail "rsync -a of /dev exited $?"
out=$(rsync -ai "$T/devs/" "$MNT/tree/dev/") || fail "a second rsync -a of /dev"
[ -z "$out" ] || fail "a second rsync -a of /dev sent: $(echo "$out" | head -4)"
mkdir "$MNT/tree/icons" && tar cf - -C "$ICONS" . | tar xf - -C "$MNT/tree/icons" ||
	fail "tar x of $ICONS into tree/"
# GNU tar's placeholder for a link that leaves the directory (an empty
# file, checked by its inode before the link replaces it, after the files
# that follow: here 30 MB of them); another user's archive, whose owners
# root's tar x gives back (it failed: chown EPERM, exit status 2); a
# device, and a hard link to the big file (tar x links it)
mkdir -p "$T/arc/x/sub" && ln -s ../../zone.tab "$T/arc/x/sub/up" &&
	mknod -m 640 "$T/arc/x/sub/dev-c" c 4 70 &&
	head -c 30000000 /dev/urandom >"$T/arc/x/big" && ln "$T/arc/x/big" "$T/arc/x/sub/big2" &&
	tar cf "$T/arc.tar" --owner=1000 --group=1001 -C "$T/arc" x ||
	fail "the archive with a ../ link"
tar xf "$T/arc.tar" -C "$MNT/tree" || fail "tar x of a ../ link and a big file after it"
[ "$(readlink "$MNT/tree/x/sub/up")" = ../../zone.tab ] || fail "tar x left no link: $(ls -l "$MNT/tree/x/sub")"
cmp -s "$T/arc/x/big" "$MNT/tree/x/big" || fail "tar x: the big file differs"
[ "$(stat -c '%i %h' "$MNT/tree/x/big")" = "$(stat -c '%i %h' "$MNT/tree/x/sub/big2")" ] &&
	[ "$(stat -c %h "$MNT/tree/x/big")" = 2 ] || fail "tar x: the hard link is not the big file"
[ "$(stat -c '%F %a %t:%T' "$MNT/tree/x/sub/dev-c")" = 'character special file 640 4:46' ] ||
	fail "tar x: the device is $(stat -c '%F %a %t:%T' "$MNT/tree/x/sub/dev-c")"
for f in x x/sub x/sub/up x/sub/dev-c x/big; do
	[ "$(stat -c %u:%g "$MNT/tree/$f")" = 1000:1001 ] || fail "tar x: $f is $(stat -c %u:%g "$MNT/tree/$f")"
done
rm -r "$MNT/tree/x" || fail "rm -r of what tar x made"
# cp -al: a tree of hard links (5,000 and more), as a backup tool makes it
cp -al "$MNT/tree/icons" "$MNT/tree/icons-al" || fail "cp -al in tree/"
touch -d '2000-01-01' "$MNT/tree" # icons/ made in it
unmount_wait
mount_ds
mkdir "$T/both" && cp -a "$ZONE/." "$T/both/" && mkdir "$T/both/icons" &&
	cp -a "$ICONS/." "$T/both/icons/" && cp -a "$T/devs" "$T/both/dev" &&
	cp -al "$T/both/icons" "$T/both/icons-al" &&
	touch -d '2000-01-01' "$T/both" || fail "the reference"
touch -r "$MNT/tree/icons" "$T/both/icons" # made by mkdir: its time the mount's
same_tree "$T/both" "$MNT/tree" "rsync and tar x, after a remount" nodirsize

# ---- an import of a real tree: empty directories, links, and another
# writer's changes followed by a read-only mount
fusermount3 -u "$MNT" || fail "unmount"
rm -rf "$DS"
"$ZR" import dir "$ICONS" "$DS" >/dev/null 2>"$T/import.err" || fail "import $ICONS"
mount_ds
same_tree "$ICONS" "$MNT/tree" "$ICONS, read-only"
mkdir "$T/ro"
"$ZRFS" "$DS" "$T/ro" -o writable,log="$T/log" || fail "zrfs -o writable"
rmdir "$(find "$T/ro/tree" -type d -empty | head -1)" || fail "rmdir in the writable mount"
ln -s hicolor "$T/ro/tree/made-link" || fail "ln -s in the writable mount"
sync "$T/ro/tree" || fail "sync"
followed() { [ -L "$MNT/tree/made-link" ] && [ "$(find "$MNT/tree" -type d -empty | wc -l)" -eq "$(find "$T/ro/tree" -type d -empty | wc -l)" ]; }
within 10 followed || fail "the read-only mount does not follow the writable one's links and directories"
same_tree "$T/ro/tree" "$MNT/tree" "followed"
