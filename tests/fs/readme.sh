#!/bin/sh
# The README's examples run as written against a mount of a dataset made as
# the README says (/mnt/cats replaced by this test's mount point): "Use it",
# then "Mount it" and "Writing through the mount" on the dataset it made,
# then the others on a mount of the photos imported.
. "$(dirname "$0")/lib.sh"
: "${ZR:?ZR must name the zr binary}"
: "${README:?README must name README.md}"
for c in tabby siamese persian; do
	mkdir -p "$T/photos/$c"
	for k in 1 2 3 4 5; do head -c $((k * 100)) /dev/urandom >"$T/photos/$c/$k.jpg"; done
done
"$ZR" import dir "$T/photos" "$DS" --field image --label-from-parent label >/dev/null || fail "import"
mount_ds
"$PY" - "$README" "$T" <<'PY' || fail "extracting the examples"
import re, sys
text = open(sys.argv[1]).read()
blocks = re.findall(r"```(sh|python)\n# example: ([\w-]+)\n(.*?)```", text, re.S)
assert len(blocks) == 10, [b[1] for b in blocks]
for lang, name, body in blocks:
    open(f"{sys.argv[2]}/example-{name}.{lang}", "w").write(body)
PY
# "Use it" runs in a directory of its own, with the inputs it names and zr
# on the PATH
mkdir "$T/use" && cp -r "$T/photos" "$T/use/" && head -c 3000 /dev/urandom >"$T/use/tabby.jpg"
"$PY" -c "import numpy as np; np.save('$T/use/train_x.npy', np.arange(24, dtype='<f4').reshape(6, 4))" ||
	fail "train_x.npy"
out=$(cd "$T/use" && PATH="$(dirname "$ZR"):$PATH" sh -e "$T/example-use-it.sh" 2>&1) ||
	fail "the README's 'Use it' block failed: $out"
[ "$("$ZR" cat "$T/use/pets" label 0 | od -An -td8 | tr -d ' ')" = 1 ] || fail "label1.bin is not 1"
rm "$T/example-use-it.sh"
# "Mount it" and "Writing through the mount" go on in that directory, on
# the cats it made, with zrfs on the PATH, at a mount point of their own;
# the writing block's inputs as it names them
UM=$T/use-mnt
# (zrfs: the one under test, on its transport; python3: Debian's, numpy's)
mkdir "$T/bin" && ln -s "$PY" "$T/bin/python3" &&
	printf '#!/bin/sh\nexec "%s" "$@"\n' "$ZRFS" >"$T/bin/zrfs" && chmod +x "$T/bin/zrfs"
UPATH="$(dirname "$ZR"):$T/bin:$PATH"
for f in mount-it writing; do sed -i "s|/mnt/cats|$UM|g" "$T/example-$f.sh"; done
out=$(cd "$T/use" && PATH=$UPATH sh -e "$T/example-mount-it.sh" 2>&1) ||
	{ fusermount3 -u "$UM" 2>/dev/null; fail "the README's 'Mount it' block failed: $(echo "$out" | grep -v "no syslog")"; }
mountpoint -q "$UM" && { fusermount3 -u "$UM"; fail "the 'Mount it' block left $UM mounted"; }
cmp -s "$T/use/tabby.jpg" "$T/use/cat7.jpg" || fail "cat7.jpg is not record 7's image (tabby.jpg)"
head -c 700 /dev/urandom >"$T/use/fixed.jpg"
mkdir -p "$T/use/more/new" "$T/use/fixes"
head -c 50 /dev/urandom >"$T/use/more/new/a.jpg"
head -c 60 /dev/urandom >"$T/use/more/b.jpg"
head -c 80 /dev/urandom >"$T/use/fixes/7.jpg"
out=$(cd "$T/use" && PATH=$UPATH sh -e "$T/example-writing.sh" 2>&1) || {
	fusermount3 -u "$UM" 2>/dev/null
	fail "the README's writing block failed: $out"
}
# what its comments say: a second rsync -a of photos/ into tree/ sends
# nothing, and tree/ then holds photos/ (record 7's image, fixed by cp and
# rsync, is its photo again, by name) and what cp -r more/. added, records
# named by their paths; label 7 is 2
out=$(rsync -ai "$T/use/photos/" "$UM/tree/" 2>&1)
[ -z "$out" ] || { fusermount3 -u "$UM"; fail "a second rsync -a into tree/ sends: $out"; }
out=$(diff -r "$T/use/photos" "$UM/tree" 2>&1)
fusermount3 -u "$UM" || fail "unmount $UM"
[ "$(echo "$out" | sort)" = "$(printf 'Only in %s: b.jpg\nOnly in %s: new' "$UM/tree" "$UM/tree")" ] ||
	fail "tree/ after the writing block: $out"
[ "$("$ZR" cat "$T/use/cats" label 7 | od -An -td8 | tr -d ' ')" = 2 ] || fail "label 7 is not 2"
for n in new/a.jpg b.jpg; do
	"$ZR" find "$T/use/cats" "$n" >/dev/null || fail "no record named $n after cp -r more/."
done
rm "$T/example-mount-it.sh" "$T/example-writing.sh"
n=1
for f in "$T"/example-*; do
	sed -i "s|/mnt/cats|$MNT|g" "$f"
	case $f in
	*.sh) out=$(PATH=$UPATH sh -e "$f" 2>&1) ;;
	*.python) out=$(cd "$T" && PYTHONPATH="$HERE/../../tools/python" "$PY" "$f" 2>&1) ;;
	esac || fail "${f##*/} failed: $out"
	case $f in # the loader's state after two epochs of 4 steps, as the comment says
	*loader.python) echo "$out" | grep -qF "'epoch': 1, 'step': 4}" || fail "the loader example: $out" ;;
	esac
	n=$((n + 1))
done
[ $n -eq 8 ] || fail "ran $((n - 1)) examples, not 7"
# the resume example read the whole epoch in one run: it saved its end
[ "$(cat "$T/position.txt")" = 15 ] || fail "the resume example saved $(cat "$T/position.txt")"
# the original names, as the README says: the file of the record so named,
# and the same record's image through the mount
[ "$(grep -rlxF tabby/1.jpg "$MNT/name/")" = "$MNT/name/10.txt" ] ||
	fail "grep of the names: $(grep -rlxF tabby/1.jpg "$MNT/name/")"
[ "$("$ZR" find "$DS" tabby/1.jpg)" = 10 ] || fail "zr find"
same "$T/photos/tabby/1.jpg" "$MNT/image/10.jpg"
"$ZR" export dir "$DS" image "$T/back" >/dev/null || fail "export dir"
diff -r "$T/photos" "$T/back" >/dev/null || fail "export dir by name differs from photos/"
# zr(1)'s EXAMPLES run as written too, in a directory of their own with
# the photos, its mount point this test's (then unmounted)
ZR1=$(dirname "$README")/packaging/man/zr.1
mkdir "$T/man" && cp -r "$T/photos" "$T/man/"
sed -n '/^\.SH EXAMPLES/,/^\.SH/{/^\.fi/q;/^\.[A-Za-z]/d;p}' "$ZR1" | sed 's/\\-/-/g' |
	sed "s|/mnt/cats|$T/man-mnt|g" >"$T/man/examples.sh"
[ "$(grep -c '^z' "$T/man/examples.sh")" -eq 4 ] || fail "zr(1) EXAMPLES: $(cat "$T/man/examples.sh")"
mkdir "$T/man-mnt"
out=$(cd "$T/man" && PATH=$UPATH sh -e examples.sh 2>&1) || {
	fusermount3 -u "$T/man-mnt" 2>/dev/null
	fail "zr(1) EXAMPLES failed: $out"
}
mountpoint -q "$T/man-mnt" || fail "zr(1) EXAMPLES: zrfs did not mount"
cmp -s "$T/photos/tabby/1.jpg" "$T/man-mnt/tree/tabby/1.jpg" ||
	{ fusermount3 -u "$T/man-mnt"; fail "zr(1) EXAMPLES: tree/tabby/1.jpg differs"; }
fusermount3 -u "$T/man-mnt" || fail "unmount $T/man-mnt"
