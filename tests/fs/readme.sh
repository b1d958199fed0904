#!/bin/sh
# The README's examples run as written against a mount of a dataset made as
# the README says (/mnt/cats replaced by this test's mount point).
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
assert len(blocks) == 7, [b[1] for b in blocks]
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
n=1
for f in "$T"/example-*; do
	sed -i "s|/mnt/cats|$MNT|g" "$f"
	case $f in
	*.sh) out=$(sh -e "$f" 2>&1) ;;
	*.python) out=$(cd "$T" && PYTHONPATH="$HERE/../../tools/python" "$PY" "$f" 2>&1) ;;
	esac || fail "${f##*/} failed: $out"
	case $f in # the loader's state after two epochs of 4 steps, as the comment says
	*loader.python) echo "$out" | grep -qF "'epoch': 1, 'step': 4}" || fail "the loader example: $out" ;;
	esac
	n=$((n + 1))
done
[ $n -eq 7 ] || fail "ran $n examples, not 7"
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
