#!/bin/sh
# Damage under a live mount: one byte of a flate record flipped and a chunk
# file cut short while the dataset is mounted. Reading a damaged record
# fails with EIO and a log line naming field and id; every record outside
# the damage still reads correctly; the daemon keeps serving, zr verify
# names the damaged file, and the unmount is clean.
. "$(dirname "$0")/lib.sh"
make_ds --records 400
"$ZRFS" "$DS" "$MNT" -f 2>"$T/log" &
pid=$!
timeout 20 sh -c "until mountpoint -q '$MNT'; do :; done" || fail "not mounted"

# where each record is stored, before any damage: NAME SIZE STORED chunk C @ OFF
for f in img txt vec lab; do "$ZR" ls "$DS" $f --long >"$T/ls.$f" || fail "zr ls $f"; done
# the first record of FIELD at or after ID stored with at least 1000 bytes:
# "ID CHUNK OFFSET STORED"
pick() {
	awk -v from="$2" '{ id = $1; sub(/\..*/, "", id) }
		id + 0 >= from && $3 >= 1000 { print id, $5, $7, $3; exit }' "$T/ls.$1"
}

# flip a byte in the middle of a flate record's stored bytes
set -- $(pick txt 100)
[ $# -eq 4 ] || fail "no txt record to damage"
flate_id=$1 flate_chunk=$2
pos=$(($3 + $4 / 2))
b=$(od -An -tu1 -j "$pos" -N1 "$DS/chunk/$2.zr" | tr -d ' ')
printf "$(printf '\\%03o' $((b ^ 255)))" |
	dd of="$DS/chunk/$2.zr" bs=1 seek="$pos" conv=notrunc 2>/dev/null || fail "flip"

# cut the chunk of a raw record short, halfway through that record
set -- $(pick img 200)
[ $# -eq 4 ] || fail "no img record to damage"
raw_id=$1 raw_chunk=$2
[ "$raw_chunk" != "$flate_chunk" ] || fail "the test wants two different chunks"
truncate -s $(($3 + $4 / 2)) "$DS/chunk/$2.zr" || fail "truncate"

for bad in "txt/$flate_id.txt" "img/$raw_id.jpg"; do
	out=$(cat "$MNT/$bad" 2>&1 >/dev/null) && fail "reading damaged $bad succeeded"
	case $out in *"Input/output error"*) ;; *) fail "$bad: $out" ;; esac
done
# a batch file holding the cut record fails the same way (its bytes are sent
# from the chunk mapping: the kernel's copy faults, not the daemon); one of
# an undamaged chunk reads right
S="$MNT/.batches/seq,batch=8/epoch-0"
out=$(cat "$S/$((raw_id / 8))/img" 2>&1 >/dev/null) && fail "the batch of img $raw_id read"
case $out in *"Input/output error"*) ;; *) fail "batch of img $raw_id: $out" ;; esac
good=$(awk -v a="$flate_chunk" -v b="$raw_chunk" '{ id = $1; sub(/\..*/, "", id) }
	$5 != a && $5 != b { n[int(id / 8)]++ } END { for (k in n) if (n[k] == 8) { print k; exit } }' "$T/ls.img")
[ -n "$good" ] || fail "no batch of 8 stored img records outside the damage"
for i in $(seq $((good * 8)) $((good * 8 + 7))); do cat "$REF/img/$i.jpg"; done >"$T/want"
cat "$S/$good/img" >"$T/got" || fail "batch $good of img"
same "$T/want" "$T/got"

# every record outside the two damaged chunks (which all fields share)
# reads as before, empty ones included
for f in img txt vec lab; do
	n=0
	for x in $(awk -v a="$flate_chunk" -v b="$raw_chunk" '$5 != a && $5 != b { print $1 }' "$T/ls.$f"); do
		same "$REF/$f/$x" "$MNT/$f/$x"
		n=$((n + 1))
	done
	[ $n -gt 100 ] || fail "only $n $f records outside the damage"
done
"$ZR" verify "$DS" >"$T/verify" 2>&1 && fail "zr verify found nothing"
grep -q "chunk/$raw_chunk.zr" "$T/verify" || fail "verify does not name the cut chunk: $(cat "$T/verify")"
fusermount3 -u "$MNT"
wait $pid || fail "zrfs exited $?"
grep -q "field 'txt' record $flate_id" "$T/log" || fail "no log line for txt $flate_id: $(cat "$T/log")"
grep -q "chunk file ends early\|field 'img' record $raw_id" "$T/log" ||
	fail "no log line for the cut chunk: $(cat "$T/log")"
