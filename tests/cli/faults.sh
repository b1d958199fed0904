#!/bin/sh
# Faults around the command-line writers:
#   - `zr import` killed with SIGKILL at random instants (ZR_TRIALS, default
#     100): every outcome is no dataset, the empty dataset zr_create commits
#     first, or the whole import, and any dataset left verifies clean; a
#     DEST left unfinished holds import.lock, and the same import run again
#     starts over and is whole;
#   - a dataset on a read-only filesystem: readers work, every writer fails
#     naming the file and the cause, nothing changes.
# (The core tests kill appends, modifies, deletes and rebalances; the import
# test fills a small disk.)
. "$(dirname "$0")/lib.sh"
trials=${ZR_TRIALS:-100}

mkdir -p src/a src/b
awk 'BEGIN { for (i = 0; i < 3000; i++) {
	f = sprintf("src/%s/%05d", i % 2 ? "b" : "a", i)
	printf "record %05d %" (i % 700) "s", i, "" > f
	close(f) } }'

# the whole import, uninterrupted: the reference, and how long it takes
start=$(date +%s%N)
zr import dir src full --compress flate --writers 2
expect_rc 0
span=$((($(date +%s%N) - start) / 1000)) # microseconds

# record ID of an import of src: files in byte-wise path order, a/ then b/
src_of() { [ "$1" -lt 1500 ] && printf 'src/a/%05d' $(($1 * 2)) || printf 'src/b/%05d' $((($1 - 1500) * 2 + 1)); }
# same_records DS: a sample of its records, first and last included, equal the files
same_records() {
	for id in 0 1 2 777 1499 1500 1501 2222 2998 2999; do
		zr cat "$1" data $id
		cmp -s "$T/.out" "$(src_of $id)" || fail "$1: record $id is not $(src_of $id)"
	done
}
same_records full

absent=0 empty=0 whole=0 again=0 t=0
while [ $t -lt $trials ]; do
	# a random instant in [0, 1.2 x the import's duration)
	us=$(awk -v s="$span" -v r="$(od -An -N4 -tu4 /dev/urandom)" 'BEGIN { printf "%d", r % (s * 1.2 + 1) }')
	timeout -s KILL "$(awk -v u="$us" 'BEGIN { printf "%.6f", u / 1e6 }')" \
		"$ZR" import dir src k$t --compress flate --writers 2 >/dev/null 2>&1
	if [ ! -e k$t/meta.json ]; then
		absent=$((absent + 1)) # killed before the dataset was created
	else
		zr verify --quiet k$t
		[ "$RC" -eq 0 ] || fail "trial $t (killed after $us us) does not verify"
		zr info --json k$t
		case $(grep '"length"' "$T/.out") in
		*' 0,') empty=$((empty + 1)) ;;
		*' 3000,')
			same_records k$t
			whole=$((whole + 1))
			;;
		*) fail "trial $t (killed after $us us): neither empty nor complete" ;;
		esac
	fi
	# whatever the kill left, DEST is missing, empty, whole, or an import
	# that did not finish (import.lock): the same import again is whole
	if [ -e k$t ] && [ -n "$(ls -A k$t)" ] && [ ! -e k$t/import.lock ]; then
		zr info --json k$t
		grep -q '"length": 3000,' "$T/.out" ||
			fail "trial $t (killed after $us us): left $(ls k$t) without import.lock"
	elif [ -e k$t/import.lock ]; then
		left=$(ls -A k$t)
		zr import dir src k$t --compress flate --writers 2
		expect_rc 0
		# (killed before it wrote anything, there is nothing to say)
		[ "$left" = import.lock ] ||
			expect_err_has "zr: import: k$t: an import into it did not finish (killed?): starting over"
		[ -e k$t/import.lock ] && fail "trial $t: import.lock left after the import"
		same_records k$t
		zr info --json k$t
		grep -q '"length": 3000,' "$T/.out" || fail "trial $t: the import again is not whole"
		again=$((again + 1))
	fi
	rm -rf k$t
	t=$((t + 1))
done
echo "import killed $trials times: $absent before creating, $empty empty, $whole complete;" \
	"$again left unfinished, then imported again whole"

# a read-only filesystem (root: a read-only bind mount of a copy)
if [ "$(id -u)" = 0 ]; then
	mkdir ro
	cp -a full rw
	trap 'umount "$T/ro" 2>/dev/null; rm -rf "$T"' EXIT
	mount --bind rw ro && mount -o remount,bind,ro ro || fail "cannot make a read-only bind mount"
	before=$(find rw -type f -exec sha256sum {} + | sort)
	zr verify ro
	expect_rc 0
	zr cat ro data 17
	expect_rc 0
	same_records ro
	printf 'new' >new.txt
	for w in "put ro --data=new.txt" "set ro 3 --data=new.txt" "rm ro 5" "rebalance ro"; do
		zr $w
		expect_rc 1
		expect_err_has "zr: ${w%% *}: ro/*: Read-only file system"
	done
	zr import dir src ro/sub
	expect_rc 1
	expect_err_has '*ro/sub*Read-only file system*'
	[ "$(find rw -type f -exec sha256sum {} + | sort)" = "$before" ] || fail "the dataset changed"
	umount ro
fi
true
