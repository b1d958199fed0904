#!/bin/sh
# A developer's day in a writable tree/: a git clone of this repository,
# configured by cmake and built by make, a file edited by sed -i and built
# again, git status, stash, commit, gc and fsck. The same steps run in a
# native directory and on the mount; what each printed (the objects make
# built, in order of name, the commit, the status) and the tree they leave
# (kind, mode, size, path, link target; build/ by name: its files hold
# their own paths) are compared. After a remount, make builds nothing, git
# finds the work tree clean and the repository whole.
. "$(dirname "$0")/lib.sh"
: "${ZR:?ZR must name the zr binary}"
REPO=$(cd "$HERE/../.." && pwd)
git -C "$REPO" rev-parse --git-dir >/dev/null 2>&1 ||
	{ echo "SKIP: $REPO is not a git checkout: nothing to clone"; exit 77; }
for p in git cmake make cc; do
	command -v $p >/dev/null || fail "$p is missing (packaging/deps.sh installs it)"
done
# the same author, committer and times on both sides: their commits (and
# stashes) are the same objects; the clone is of the commit checked out
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.org GIT_COMMITTER_NAME=t
export GIT_COMMITTER_EMAIL=t@example.org GIT_AUTHOR_DATE='2026-01-01T00:00:00Z'
export GIT_COMMITTER_DATE='2026-01-01T00:00:00Z' GIT_CONFIG_NOSYSTEM=1 HOME="$T"
git clone -q "$REPO" "$T/origin" || fail "git clone $REPO"

# built() < make's output: the objects and targets it built, by name
built() { sed -n 's/^\[ *[0-9]*%\] \(Building C object\|Linking C [a-z ]*\) //p' | sort; }

day() { # day DIR > what it printed
	cd "$1" || fail "cd $1"
	# (a local clone links objects where it can, copies them otherwise,
	# as on the mount: without hard links, zrfs(8))
	git clone -q --no-hardlinks "$T/origin" repo && cd repo || fail "$1: git clone"
	cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >"$T/cmake.out" 2>&1 ||
		fail "$1: cmake: $(tail -5 "$T/cmake.out")"
	echo "# make"
	make -C build -j2 zr 2>&1 | built
	./build/tools/zr --version || fail "$1: the zr it built"
	echo "# make again"
	make -C build zr 2>&1 | built
	echo "# an edit"
	sed -i 's/^#include "zr_i.h"$/& \/* edited *\//' tools/info.c || fail "$1: sed -i"
	make -C build zr 2>&1 | built
	git status --short
	git stash -q && git status --short && git stash pop -q || fail "$1: git stash"
	# (one thread: packs that several make differ from run to run)
	git commit -qam 'an edit' && git -c pack.threads=1 gc -q &&
		git fsck --no-dangling 2>&1 || fail "$1: git"
	git log --format='%H %s' -2
	git status --short
	echo "# make after the stash (it wrote tools/info.c twice)"
	make -C build zr 2>&1 | built
}
# look DIR > what find sees of it, and build/ by name; a directory's size
# where the native one is on ext4 (the mount gives ext4's)
EXT4=$(stat -f -c %T "$T")
look() {
	(cd "$1" && find . -path ./build -prune -o -printf '%y %M %s %p -> %l\n' && find build) |
		awk -v ext4="$([ "$EXT4" = ext2/ext3 ] && echo 1)" '$1 == "d" && !ext4 {$3 = "-"} {print}' |
		sort
}

mkdir -p "$T/src/a" "$T/native" && printf 'x\n' >"$T/src/a/x.txt" || fail "a tree"
"$ZR" import dir "$T/src" "$DS" >/dev/null || fail "import dir"
(day "$T/native") >"$T/native.out" || exit 1
grep -q 'info.c.o' "$T/native.out" || fail "native: the edit built nothing: $(cat "$T/native.out")"
mount_ds -o writable,log="$T/log"
(day "$MNT/tree") >"$T/mount.out" || exit 1
diff "$T/native.out" "$T/mount.out" >"$T/out.diff" ||
	fail "the mount printed otherwise: $(head -8 "$T/out.diff")"
look "$T/native/repo" >"$T/native.find"
look "$MNT/tree/repo" >"$T/mount.find"
diff "$T/native.find" "$T/mount.find" >"$T/find.diff" ||
	fail "the mount left another tree: $(head -8 "$T/find.diff")"
unmount_wait
mount_ds -o writable,log="$T/log"
R=$MNT/tree/repo
out=$(make -C "$R/build" zr 2>&1 | built)
[ -z "$out" ] || fail "after a remount make built: $(echo "$out" | head -4)"
out=$(git -C "$R" status --short) && [ -z "$out" ] ||
	fail "after a remount git status: $(echo "$out" | head -4)"
git -C "$R" fsck --no-dangling >"$T/fsck" 2>&1 ||
	fail "after a remount git fsck: $(head -4 "$T/fsck")"
[ "$(git -C "$R" log --format=%H -1)" = "$(git -C "$T/native/repo" log --format=%H -1)" ] ||
	fail "after a remount another commit: $(git -C "$R" log --oneline -1)"
look "$R" | diff "$T/native.find" - >"$T/find.diff" ||
	fail "after a remount another tree: $(head -8 "$T/find.diff")"
