#!/bin/sh
# A dataset with damaged records mounts; reading a damaged record fails with
# EIO and logs field and id; every other record reads correctly.
. "$(dirname "$0")/lib.sh"
make_ds --corrupt
[ "$(cat "$T/mkds.out")" = "img 10
txt 20" ] || fail "mkds did not damage what the test expects"
# foreground, to see the log; wait for the mount to appear (bounded)
"$ZRFS" "$DS" "$MNT" -f 2>"$T/log" &
pid=$!
timeout 20 sh -c "until mountpoint -q '$MNT'; do :; done" || fail "not mounted"
for bad in img/10.jpg txt/20.txt; do
	out=$(cat "$MNT/$bad" 2>&1 >/dev/null) && fail "reading $bad succeeded"
	case $out in *"Input/output error"*) ;; *) fail "$bad: $out" ;; esac
done
diff -r "$REF/img" "$MNT/img" 2>/dev/null | grep -v '10.jpg' | grep -q . &&
	fail "records other than img/10 differ"
for f in txt vec lab; do
	for x in "$REF/$f"/*; do same "$x" "$MNT/$f/${x##*/}"; done
done
fusermount3 -u "$MNT"
wait $pid || fail "zrfs exited $?"
grep -q "field 'img' record 10" "$T/log" || fail "no log line for img 10: $(cat "$T/log")"
grep -q "field 'txt' record 20" "$T/log" || fail "no log line for txt 20"

# a FIFO where a dataset file should be: zrfs refuses to mount, naming it,
# instead of blocking forever (an fstab mount would hang the boot)
for f in meta.json img.offset chunk/0.zr; do
	mv "$DS/$f" "$T/saved"
	mkfifo "$DS/$f"
	timeout 20 "$ZRFS" "$DS" "$MNT" 2>"$T/err"
	rc=$?
	mountpoint -q "$MNT" && fail "mounted with a FIFO at $f"
	[ $rc -ne 124 ] || fail "zrfs hung on a FIFO at $f"
	[ $rc -ne 0 ] || fail "zrfs exited 0 with a FIFO at $f"
	grep -q "$f: not a regular file" "$T/err" || fail "FIFO at $f: $(cat "$T/err")"
	rm "$DS/$f"
	mv "$T/saved" "$DS/$f"
done
