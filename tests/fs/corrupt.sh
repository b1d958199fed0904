#!/bin/sh
# A dataset with damaged records mounts; reading a damaged record fails with
# EIO and logs field and id; every other record reads correctly. So with an
# offset table cut short while mounted: its lost entries are EIO.
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
# a reader that reads a damaged record over and over: a line for each read
# would let any user fill the log; at most ZRFS_LOG_BURST (10) a second are
# written, and a line says how many were left out
start=$(date +%s)
for i in $(seq 300); do cat "$MNT/img/10.jpg" 2>/dev/null; done
secs=$(($(date +%s) - start + 1))
diff -r "$REF/img" "$MNT/img" 2>/dev/null | grep -v '10.jpg' | grep -q . &&
	fail "records other than img/10 differ"
for f in txt vec lab; do
	for x in "$REF/$f"/*; do same "$x" "$MNT/$f/${x##*/}"; done
done
fusermount3 -u "$MNT"
wait $pid || fail "zrfs exited $?"
grep -q "field 'img' record 10" "$T/log" || fail "no log line for img 10: $(cat "$T/log")"
n=$(grep -c "field 'img' record 10" "$T/log")
[ "$n" -le $((10 * (secs + 1))) ] || fail "$n log lines for 301 reads of img/10 in $secs s"
grep -q "left out" "$T/log" || fail "no line says how many were left out: $(tail -3 "$T/log")"
grep -q "field 'txt' record 20" "$T/log" || fail "no log line for txt 20"

# a byte of a raw value changed in place (bit rot, a stray write): zr verify
# names the record by its checksum; a mount serves raw values as stored
# unless -o check, which makes the record file, FIELD.npy and a batch's file
# that hold it EIO, logged with where it lies; the other records read
: "${ZR:?ZR must name the zr binary}"
CK=$T/ck
head -c 4000 /dev/urandom >"$T/flat"
"$ZR" import flat "$T/flat" "$CK" --record-size 40 >/dev/null || fail "zr import flat"
off=$("$ZR" stat "$CK" data 7 | sed -n 's/^stored *40 bytes in chunk\/\([0-9]*\)\.zr at offset \([0-9]*\)$/\1 \2/p')
set -- $off
[ $# -eq 2 ] || fail "zr stat of record 7: $("$ZR" stat "$CK" data 7)"
/usr/bin/python3 -c '
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2]) + 13); b = f.read(1); f.seek(-1, 1); f.write(bytes([b[0] ^ 4]))
' "$CK/chunk/$1.zr" "$2" || fail "flip"
"$ZR" verify "$CK" >"$T/out"
[ $? -eq 1 ] || fail "zr verify of a changed value: $(cat "$T/out")"
grep -q "field data, record 7: the 40 bytes in chunk $1 at $2 do not match their checksum" "$T/out" ||
	fail "zr verify said: $(cat "$T/out")"
grep -q "1 problem" "$T/out" || fail "zr verify found more: $(cat "$T/out")"
"$ZRFS" "$CK" "$MNT" || fail "mount"
cmp -s "$MNT/data/7" "$T/flat" -i 0:280 -n 40 && fail "unchecked: record 7 reads as before"
[ "$(wc -c <"$MNT/data/7")" -eq 40 ] || fail "unchecked: record 7 is not served as stored"
fusermount3 -u "$MNT" || fail "unmount"
"$ZRFS" "$CK" "$MNT" -o check -f 2>"$T/log" &
pid=$!
timeout 20 sh -c "until mountpoint -q '$MNT'; do :; done" || fail "not mounted with -o check"
for f in data/7 data.npy ".batches/seq,batch=10/epoch-0/0/data"; do
	out=$(cat "$MNT/$f" 2>&1 >/dev/null) && fail "-o check: reading $f succeeded"
	case $out in *"Input/output error"*) ;; *) fail "-o check: $f: $out" ;; esac
done
cmp "$MNT/data/8" "$T/flat" -i 0:320 -n 40 || fail "-o check: data/8 does not read its bytes"
cmp "$MNT/.batches/seq,batch=10/epoch-0/1/data" "$T/flat" -i 0:400 -n 400 ||
	fail "-o check: the second batch does not read its bytes"
fusermount3 -u "$MNT"
wait $pid || fail "zrfs exited $?"
grep -q "record 7: the 40 bytes at $2 do not match their checksum" "$T/log" ||
	fail "-o check: no log line for record 7: $(cat "$T/log")"

# a FIFO where a dataset file should be: zrfs refuses to mount, naming it,
# instead of blocking forever (an fstab mount would hang the boot); a chunk
# file is opened on first use, so its records are EIO, logged, and the
# others read
for f in meta.json img.offset; do
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
mv "$DS/chunk/0.zr" "$T/saved"
mkfifo "$DS/chunk/0.zr"
"$ZRFS" "$DS" "$MNT" -f 2>"$T/log" &
pid=$!
timeout 20 sh -c "until mountpoint -q '$MNT'; do :; done" || fail "not mounted with a FIFO at chunk/0.zr"
out=$(timeout 20 cat "$MNT/txt/0.txt" 2>&1 >/dev/null)
rc=$?
[ $rc -ne 124 ] || fail "reading a record of a FIFO chunk hung"
case $out in *"Input/output error"*) ;; *) fail "txt/0.txt with a FIFO chunk: $rc $out" ;; esac
same "$REF/txt/100.txt" "$MNT/txt/100.txt" # chunk 1 (64 records a chunk)
fusermount3 -u "$MNT"
wait $pid || fail "zrfs exited $?"
grep -q "chunk/0.zr: not a regular file" "$T/log" || fail "no log line for chunk/0.zr: $(cat "$T/log")"
rm "$DS/chunk/0.zr"
mv "$T/saved" "$DS/chunk/0.zr"

# a fixed-shape record whose entry says another length (an i64 label of 24
# bytes) is damage in every reader: zr cat fails, the record file, the
# field's .npy and a batch's .npy are EIO with a log line naming field and
# record; the records around it read correctly
: "${ZR:?ZR must name the zr binary}"
FX=$T/fixed
"$ZR" create "$FX" --field lab:i64:shape= --field txt:bytes >/dev/null || fail "zr create"
for i in 0 1 2 3; do
	printf "\\00$i\\0\\0\\0\\0\\0\\0\\0" >"$T/l"
	printf "t$i" >"$T/t"
	"$ZR" put "$FX" --lab="$T/l" --txt="$T/t" >/dev/null || fail "zr put"
done
# entry 2 of lab.offset: chunk u32, offset u64, length u32 at byte 12
printf '\030\000\000\000' | dd of="$FX/lab.offset" bs=1 seek=$((16 * 2 + 12)) conv=notrunc 2>/dev/null
"$ZR" cat "$FX" lab 2 >/dev/null 2>"$T/err" && fail "zr cat served a 24-byte i64"
grep -q "field 'lab' record 2: 24 bytes, but records of this shape are 8" "$T/err" ||
	fail "zr cat said: $(cat "$T/err")"
"$ZRFS" "$FX" "$MNT" -f 2>"$T/log" &
pid=$!
timeout 20 sh -c "until mountpoint -q '$MNT'; do :; done" || fail "not mounted"
for f in lab/2 lab.npy ".batches/seq,batch=4/epoch-0/0/lab.npy"; do
	out=$(cat "$MNT/$f" 2>&1 >/dev/null) && fail "reading $f succeeded"
	case $out in *"Input/output error"*) ;; *) fail "$f: $out" ;; esac
done
[ "$(od -An -tu8 "$MNT/lab/3")" -eq 3 ] || fail "lab/3 does not read 3"
[ "$(cat "$MNT/txt/2")" = t2 ] || fail "txt/2 does not read t2"
fusermount3 -u "$MNT"
wait $pid || fail "zrfs exited $?"
n=$(grep -c "field 'lab' record 2: .*24 bytes, but records of this shape are 8" "$T/log")
[ "$n" -ge 3 ] || fail "$n log lines for lab 2, not one per read: $(cat "$T/log")"

# an offset table cut short in place while mounted (cp of a backup over it,
# rsync --inplace, a partial restore): the entries it lost are EIO, logged,
# the rest are served, and the daemon lives (the mapping's SIGBUS killed
# it: every reader then got ENOTCONN)
CUT=$T/cut
head -c 8000 /dev/urandom >"$T/flat"
"$ZR" import flat "$T/flat" "$CUT" --record-size 4 >/dev/null || fail "zr import flat"
"$ZRFS" "$CUT" "$MNT" -f 2>"$T/log" &
pid=$!
timeout 20 sh -c "until mountpoint -q '$MNT'; do :; done" || fail "not mounted"
[ "$(cat "$MNT/data/7" | od -An -tx1)" = "$(dd if="$T/flat" bs=4 skip=7 count=1 2>/dev/null | od -An -tx1)" ] ||
	fail "data/7 before the cut"
truncate -s 4096 "$CUT/data.offset" # entries 0..255 stay
for f in data/1999 data/300 ".batches/seq,batch=500/epoch-0/3/data"; do
	out=$(cat "$MNT/$f" 2>&1 >/dev/null) && fail "reading $f succeeded after its entry was cut"
	case $out in *"Input/output error"*) ;; *) fail "$f after the cut: $out" ;; esac
done
mountpoint -q "$MNT" || fail "the mount went with the cut table"
[ "$(cat "$MNT/data/100" | od -An -tx1)" = "$(dd if="$T/flat" bs=4 skip=100 count=1 2>/dev/null | od -An -tx1)" ] ||
	fail "data/100, an entry the cut left, does not read its bytes"
fusermount3 -u "$MNT"
wait $pid || fail "zrfs exited $? (SIGBUS is 135)"
grep -q "data.offset: entry [0-9]* is gone: the file was cut short while in use" "$T/log" ||
	fail "no log line names the cut table: $(tail -3 "$T/log")"
