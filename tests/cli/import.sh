#!/bin/sh
# zr import: directory trees (classes, unicode names, empty and 17 MB
# files), .npy arrays (several files, checked against numpy), flat files;
# bad inputs are refused naming the input and leave DEST as it was (kills
# during an import: faults.sh).
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3

mkdir -p src/cat src/dog "src/zz/ünï cödé"
for i in 1 2 3; do gen "src/cat/$i.jpg" $((i * 1000)); gen "src/dog/$i.jpg" $((i * 777)); done
: >src/dog/empty.jpg
gen "src/zz/ünï cödé/big.jpg" 17000000
chmod 750 src/cat/2.jpg
touch -a -d @1900000000.5 src/dog/1.jpg
# owners too, where this user may give files away (root)
owned=0
[ "$(id -u)" != 0 ] ||
	{ chown 1234:5678 src/dog/2.jpg && chown -R 3000000:7 "src/zz/ünï cödé" && owned=1; }
before=$(date +%s%N)
zr import dir src ds --label-from-parent label --writers 3
expect_rc 0
expect_out 'ds: 8 records, 17.0 MB'
zr info --json ds
cp "$T/.out" info.json
run "$PY" - <<'PY'
import json
d = json.load(open("info.json"))
assert d["length"] == 8
assert [(f["name"], f["dtype"], f["ext"]) for f in d["fields"]] == [("data", "bytes", "jpg"), ("label", "i64", None), ("name", "bytes", "txt"), ("mtime", "i64", None), ("mode", "u32", None), ("atime", "i64", None), ("ctime", "i64", None), ("uid", "u32", None), ("gid", "u32", None)]
PY
expect_rc 0
# and its owner and group, as zr export gives back (for root)
zr cat ds uid 4
cp "$T/.out" uid4
zr cat ds gid 4
cp "$T/.out" gid4
run "$PY" -c 'import os, struct
got = [struct.unpack("<I", open(f, "rb").read())[0] for f in ("uid4", "gid4")]
st = os.stat("src/dog/2.jpg")
assert got == [st.st_uid, st.st_gid], got'
expect_rc 0
# beside each name, the file's modification time (ns), so the tree shows it
zr cat ds mtime 7
cp "$T/.out" mtime7
run "$PY" -c 'import os, struct
got = struct.unpack("<q", open("mtime7", "rb").read())[0]
assert got == os.stat("src/zz/ünï cödé/big.jpg").st_mtime_ns, got'
expect_rc 0
# and its mode (st_mode): permission bits, as zr export gives back
zr cat ds mode 7
cp "$T/.out" mode7
run "$PY" -c 'import os, struct
got = struct.unpack("<I", open("mode7", "rb").read())[0]
assert got == os.stat("src/zz/ünï cödé/big.jpg").st_mode, oct(got)'
expect_rc 0
# its access time; and the import's time as every copy's change time
zr cat ds atime 3
cp "$T/.out" atime3
zr cat ds ctime 0
cp "$T/.out" ctime0
zr cat ds ctime 7
cp "$T/.out" ctime7
run "$PY" -c 'import os, struct, sys
a = struct.unpack("<q", open("atime3", "rb").read())[0]
assert a == 1900000000500000000, a
c = struct.unpack("<q", open("ctime0", "rb").read())[0]
assert int(sys.argv[1]) <= c == struct.unpack("<q", open("ctime7", "rb").read())[0], c' "$before"
expect_rc 0
zr export tar ds modes.tar
expect_rc 0
run sh -c "tar tvf modes.tar | grep -c '^-rwxr-x---'"
expect_out 1
run sh -c "tar tvf modes.tar | grep -c '^-rw-r--r--'"
expect_out 15
expect_rc 0
if [ $owned = 1 ]; then
	# the files' members (a label's has none kept: root's); an id of
	# more than 7 octal digits in base-256, as GNU tar writes it
	run sh -c "tar tvf modes.tar --numeric-owner | awk '\$2 != \"0/0\" {print \$2}'"
	expect_out "$(printf '1234/5678\n3000000/7')"
	mkdir modes_x && tar xf modes.tar -C modes_x || fail "tar x of the export"
	[ "$(stat -c %u:%g modes_x/000000007.data)" = 3000000:7 ] || fail "tar x: a member's owner"
	zr export dir ds modes_dir
	expect_rc 0
	[ "$(stat -c %u:%g modes_dir/dog/2.jpg)" = 1234:5678 ] || fail "export dir: a file's owner"
	[ "$(stat -c %u:%g "modes_dir/zz/ünï cödé")" = 3000000:7 ] || fail "export dir: a directory's owner"
	[ "$(stat -c %u:%g modes_dir/cat/1.jpg)" = 0:0 ] || fail "export dir: root's file"
fi
grep -q '"ünï cödé"' ds/meta.json || fail "class names not kept in meta.json"
# records in byte-wise path order, labels by sorted class
i=0
for f in cat/1.jpg cat/2.jpg cat/3.jpg dog/1.jpg dog/2.jpg dog/3.jpg dog/empty.jpg "zz/ünï cödé/big.jpg"; do
	run sh -c "\"$ZR\" cat ds data $i > out.bin"
	expect_rc 0
	cmp -s out.bin "src/$f" || fail "record $i is not src/$f"
	i=$((i + 1))
done
zr cat ds label 6
[ "$(od -An -td8 "$T/.out" | tr -d ' ')" = 1 ] || fail "dog/empty.jpg is not class 1"
zr cat ds label 7
[ "$(od -An -td8 "$T/.out" | tr -d ' ')" = 2 ] || fail "zz/ünï cödé/big.jpg is not class 2"
zr verify --quiet ds
expect_rc 0
# original names: each record's path under SRC, in the field 'name'; zr
# find gives ids by name; export dir writes the tree back under those names
zr cat ds name 7
expect_out "zz/ünï cödé/big.jpg"
zr find ds "dog/2.jpg" "zz/ünï cödé/big.jpg"
expect_out "4
7"
zr find ds cat/9.jpg
expect_rc 1
expect_err_has "*cat/9.jpg: no record has this name*"
zr export dir ds data back
expect_rc 0
diff -r src back >/dev/null || fail "export dir by name differs from the source: $(diff -r src back | head -3)"
[ "$(stat -c %X back/dog/1.jpg)" = 1900000000 ] || fail "export dir did not give back an access time"
[ "$(stat -c %Y back/dog/1.jpg)" = "$(stat -c %Y src/dog/1.jpg)" ] || fail "export dir did not give back a modification time"
zr export dir ds data byid --by-id
[ -f byid/7.jpg ] || fail "--by-id does not name files by id"
# without a field: the dataset's tree, the same files (the label is no file);
# the label field's records have no file of the tree: by id
zr export dir ds tree
expect_rc 0
expect_out "tree: 8 files"
diff -r src tree >/dev/null || fail "export dir of the tree differs from the source: $(diff -r src tree | head -3)"
zr export dir ds label byid-label
[ -f byid-label/7 ] || fail "a field the names make no file of is not exported by id: $(ls byid-label | head -3)"
# a sparse file's holes stay holes in the dataset and in what export writes
# (a piece at a time: a value need not fit in memory)
mkdir -p sparse/d
truncate -s 64M sparse/d/img && printf mid | dd of=sparse/d/img bs=1 seek=33554432 conv=notrunc 2>/dev/null
zr import dir sparse sparseds
expect_rc 0
zr export dir sparseds sparseout
expect_rc 0
cmp -s sparse/d/img sparseout/d/img || fail "export of a sparse file differs from it"
[ "$(du -sk sparseds | cut -f1)" -lt 1024 ] || fail "import of a sparse file took $(du -sk sparseds | cut -f1) KiB"
[ "$(stat -c %b sparseout/d/img)" -lt 2048 ] || fail "export wrote a sparse file's holes: $(stat -c %b sparseout/d/img) blocks"
# a time past what the names keep (1677 to 2262: ns in 64 bits) is kept as
# the last they keep, not wrapped around to another century (ext4 keeps
# one up to 2446; a filesystem that keeps less clamps it first)
mkdir -p far/d && : >far/d/late && touch -d @17179869184 far/d/late
want=$(stat -c %Y far/d/late)
[ "$want" -le 9223372035 ] || want=9223372035
zr import dir far fards
expect_rc 0
zr export dir fards farout
expect_rc 0
[ "$(stat -c %Y farout/d/late)" = "$want" ] || fail "a time past 2262: $(stat -c %Y farout/d/late)"
zr import dir src ds2 --no-names
zr info --json ds2
grep -q '"name": "name"' "$T/.out" && fail "--no-names kept a field of names"
zr find ds2 cat/1.jpg
expect_rc 1
expect_err_has "*keeps no original names*"
zr import dir src ds3 --names path
expect_rc 0
zr find ds3 cat/1.jpg
expect_out 0
zr import dir src ds4 --field name
expect_rc 1
expect_err_has "*a field 'name' holds the records already: --names FIELD*--no-names*"
[ -e ds4 ] && fail "a refused import left ds4"
# mixed extensions: the most common one, the others named in a warning
# (a stray .DS_Store must not cost every image its extension); --ext
mkdir -p mixed/cat
for i in 1 2 3; do printf p$i >mixed/cat/$i.png; done
printf j >mixed/cat/4.jpg && printf d >mixed/cat/.DS_Store
# dot names are files like the others (rsync -a copies them); --no-hidden
# skips them, and with a label option the warning names it
zr import dir mixed mixedds --label-from-parent label --no-hidden
expect_rc 0
[ "$(cat "$T/.err")" = "zr: import: the files' extensions differ: the field takes .png (3 of 4 files); the others keep theirs by id: .jpg (1) (--ext EXT chooses the field's, --ext '' none)" ] ||
	fail "--no-hidden: $(cat "$T/.err")"
zr import dir mixed mixedhidden --label-from-parent label
expect_rc 0
expect_out 'mixedhidden: 5 records, 0.0 MB'
expect_err_has "zr: import: 1 file under a name starting with a dot takes a class (--no-hidden skips such names); the first: mixed/cat/.DS_Store"
expect_err_has "zr: import: the files' extensions differ: the field takes .png (3 of 5 files); the others keep theirs by id: no extension (1), .jpg (1) (--ext EXT chooses the field's, --ext '' none)"
zr import dir mixed mixedplain --hidden
expect_rc 0
expect_out 'mixedplain: 5 records, 0.0 MB'
[ "$(grep -c 'dot' "$T/.err")" = 0 ] || fail "a warning about dot names without a label: $(cat "$T/.err")"
zr find mixedplain cat/.DS_Store
expect_out 0
zr info mixedds
expect_out_has '             data *bytes *raw *variable *png'
# the .jpg keeps its kind by id: zr ls and export --by-id name it 3.jpg
zr ls mixedds data
expect_out "$(printf '0.png\n1.png\n2.png\n3.jpg')"
zr export dir mixedds data mixedbyid --by-id
expect_rc 0
[ "$(ls mixedbyid | tr '\n' ' ')" = "0.png 1.png 2.png 3.jpg " ] || fail "export --by-id: $(ls mixedbyid | tr '\n' ' ')"
cmp -s mixedbyid/3.jpg mixed/cat/4.jpg || fail "export --by-id: 3.jpg is not cat/4.jpg"
zr import dir mixed mixedjpg --ext jpg --no-hidden
expect_rc 0
[ ! -s "$T/.err" ] || fail "--ext said something: $(cat "$T/.err")"
zr info mixedjpg
expect_out_has '             data *bytes *raw *variable *jpg'
zr import dir mixed mixednone --ext ''
expect_rc 0
zr info mixednone
expect_out_has '             data *bytes *raw *variable *-'
# files without an extension are a kind of their own: most of them (zone
# files beside a few .tab) make a field without one
mkdir -p zones/Europe
for z in Paris Oslo Rome; do printf TZif >zones/Europe/$z; done
printf t >zones/zone.tab && printf t >zones/iso.tab
zr import dir zones zonesds
expect_rc 0
expect_err_has "zr: import: the files' extensions differ: most have none (3 of 5 files), so the field takes none; the others keep theirs by id: .tab (2) (--ext EXT chooses the field's)"
zr info zonesds
expect_out_has '             data *bytes *raw *variable *-'
# many kinds: the warning names whole items and counts the rest
mkdir many
for i in $(seq 1 40); do printf x >"many/f$i.kind$i-of-many"; done
printf x >many/a.png && printf x >many/b.png
zr import dir many manyds
expect_rc 0
expect_err_has "zr: import: the files' extensions differ: the field takes .png (2 of 42 files)*.kind1-of-many (1), *, and * more (--ext EXT chooses the field's, --ext '' none)"
zr import dir mixed mixedbad --ext a/b
expect_rc 2
expect_err_has "zr: import: --ext a/b: not an extension*"
# the class is the immediate parent (SRC/train/cat/x and SRC/val/cat/y are
# both cat); --label-from-top takes the first directory under SRC
mkdir -p split/train/cat split/train/dog split/val/cat
printf a >split/train/cat/a && printf b >split/train/dog/b && printf c >split/val/cat/c
zr import dir split parent --label-from-parent label
expect_rc 0
classes() { "$PY" -c 'import json, sys; print(" ".join(json.load(open(sys.argv[1]))["attrs"]["classes"]["label"]))' "$1/meta.json"; }
[ "$(classes parent)" = "cat dog" ] || fail "classes by parent: $(classes parent)"
for i in 0 1 2; do
	zr cat parent label $i
	echo "$(od -An -td8 "$T/.out" | tr -d ' ')"
done >labels
[ "$(cat labels | tr '\n' ' ')" = "0 1 0 " ] || fail "labels by parent: $(cat labels | tr '\n' ' ')"
# a label outside the classes is refused (its record would be in no class);
# one of them is taken
printf '\007\0\0\0\0\0\0\0' >seven.bin && printf '\001\0\0\0\0\0\0\0' >one.bin
zr set parent 0 --label=seven.bin
expect_rc 1
expect_err_has "zr: set: label: 7 is not one of the dataset's 2 classes (0..1, named in meta.json attrs.classes.label): refused, the record would be in none"
zr put parent --label=seven.bin
expect_rc 1
zr set parent 0 --label=one.bin
expect_rc 0
zr cat parent label 0
[ "$(od -An -td8 "$T/.out" | tr -d ' ')" = 1 ] || fail "a label in the classes was not set"
zr import dir split top --label-from-top label
expect_rc 0
[ "$(classes top)" = "train val" ] || fail "classes by top: $(classes top)"

# .npy: rows of several arrays, dtype and shape kept
run "$PY" -c 'import numpy as np
np.save("a.npy", np.arange(60, dtype="<f4").reshape(5, 3, 4))
np.save("b.npy", -np.arange(24, dtype="<f4").reshape(2, 3, 4))
np.save("c.npy", np.arange(10, dtype="<i8"))
np.save("f.npy", np.asfortranarray(np.ones((3, 2))))'
expect_rc 0
zr import npy a.npy b.npy arr --field x --compress flate
expect_rc 0
expect_out 'arr: 7 records, 0.0 MB'
zr info arr
expect_out_has '             x *f32 *flate *(3,4) *-'
zr cat arr x 6
cp "$T/.out" row6
run "$PY" -c 'import numpy as np, sys
assert np.frombuffer(open("row6", "rb").read(), "<f4").tolist() == (-np.arange(24, dtype="<f4").reshape(2, 3, 4))[1].ravel().tolist()'
expect_rc 0

# bad inputs: a message naming the input, DEST left as it was (absent)
zr import npy a.npy c.npy bad1 --field x
expect_rc 1
expect_err_has '*c.npy: dtype or row shape differs from a.npy*'
head -c 100 a.npy >trunc.npy
zr import npy trunc.npy bad2
expect_rc 1
expect_err_has '*trunc.npy: truncated*'
zr import npy f.npy bad3
expect_rc 1
expect_err_has '*f.npy: Fortran-ordered arrays are not supported: save the array C-ordered (np.save(path, np.ascontiguousarray(a)))'
# a one-byte dtype with a byte order ('<u1', '>i1'), which numpy loads
# like '|u1'; a header whose rows times their size overflow 64 bits
run "$PY" -c 'import numpy as np
def with_header(src, dst, old, new):
    h = open(src, "rb").read()
    n = h[8] | h[9] << 8
    d = h[10:10 + n].decode().replace(old, new).rstrip(" \n")
    d = d + " " * (n - 1 - len(d)) + "\n"
    open(dst, "wb").write(h[:10] + d.encode() + h[10 + n:])
np.save("u1.npy", np.arange(10, dtype="u1"))
np.save("i1.npy", -np.arange(10, dtype="i1"))
with_header("u1.npy", "lu1.npy", "|u1", "<u1")
with_header("i1.npy", "bi1.npy", "|i1", ">i1")
with_header("u1.npy", "huge.npy", "(10,)", "(4611686018427387904, 8)")
assert np.load("lu1.npy").tolist() == list(range(10))'
expect_rc 0
zr import npy lu1.npy u1ds
expect_rc 0
zr cat u1ds data 9
[ "$(od -An -tu1 "$T/.out")" -eq 9 ] || fail "<u1 row 9 is not 9"
zr import npy bi1.npy i1ds
expect_rc 0
zr info i1ds
expect_out_has '             data *i8 *raw *() *-'
zr import npy huge.npy bad15
expect_rc 1
expect_err_has '*huge.npy: truncated: 4611686018427387904 rows of 8 bytes need more than 2^64 bytes of data, it holds 10'
zr import flat a.npy bad4 --record-size 7
expect_rc 1
expect_err_has '*a.npy: * is not a multiple of the record size 7*'
zr import dir nonexistent bad5
expect_rc 1
expect_err_has '*nonexistent: No such file or directory'
mkdir flatsrc && touch flatsrc/top.jpg
zr import dir flatsrc bad6 --label-from-parent label
expect_rc 1
expect_err_has 'zr: import: no file is in a class directory (--label-from-parent wants SRC/.../CLASS/FILE)'
# a file at the top of SRC is in no class: skipped with a warning (as
# ImageFolder skips it), the others imported
mkdir flatsrc/cat && printf c >flatsrc/cat/1.jpg && printf r >flatsrc/README.jpg
zr import dir flatsrc topskip --label-from-parent label
expect_rc 0
expect_out 'topskip: 1 records, 0.0 MB'
expect_err_has 'zr: import: flatsrc/README.jpg is in no class directory (--label-from-parent wants SRC/.../CLASS/FILE): skipped'
expect_err_has 'zr: import: skipped 2 files in no class directory in all'
# a dangling symbolic link is kept as a link, --follow-links or not (more
# in cli.hostile); a file without read permission fails the import (as
# root: the import runs as nobody, the test's files stay root's)
mkdir -p unread/x && printf a >unread/x/1 && ln -s missing unread/x/2
zr import dir unread skip12 --follow-links
expect_rc 0
expect_err_empty
zr export dir skip12 skip12out
expect_rc 0
[ "$(readlink skip12out/x/2)" = missing ] || fail "the dangling link was not kept as a link"
zr import dir unread skip12n --follow-links --no-names
expect_rc 0
expect_err_has 'zr: import: skipped 1 dangling or looping symbolic link; the first: unread/x/2'
if [ "$(id -u)" = 0 ]; then
	rm unread/x/2 && printf b >unread/x/3 && chmod 000 unread/x/3
	chmod 755 "$T" && mkdir nb && chown 65534:65534 nb
	run setpriv --reuid=65534 --regid=65534 --clear-groups "$ZR" import dir unread nb/bad13
	expect_rc 1
	expect_err_has 'zr: import: unread/x/3: Permission denied'
	[ ! -e nb/bad13 ] || fail "nb/bad13 was left behind"
fi
# name clashes: the label field named like the data field; a DEST in use
zr import dir unread bad14 --field label --label-from-parent label
expect_rc 2
expect_err_has 'zr: import: the label field needs a name of its own'
mkdir busy && printf keep >busy/mine
zr import dir unread busy
expect_rc 1
expect_err_has 'zr: import: busy: exists and is not empty'
[ "$(ls busy)" = mine ] && [ "$(cat busy/mine)" = keep ] || fail "busy/ was touched"
# a DEST another import is filling (its import.lock locked) is refused; one
# an import left unfinished is started over, unless it holds a file no
# import makes: then the message says what to do, and nothing goes
mkdir running && : >running/import.lock && printf x >running/meta.json
run flock running/import.lock "$ZR" import dir unread running
expect_rc 1
expect_err_has 'zr: import: running: another import into it is running'
[ "$(cat running/meta.json)" = x ] || fail "running/ was touched"
printf mine >running/mine.txt
zr import dir unread running
expect_rc 1
expect_err_has 'zr: import: running: it also holds mine.txt, which no import makes: remove it (rm -r running) and import again'
[ "$(cat running/mine.txt)" = mine ] || fail "running/mine.txt was touched"
rm running/mine.txt
zr import dir unread running
expect_rc 0
expect_err_has 'zr: import: running: an import into it did not finish (killed?): starting over'
[ "$(ls running)" = "atime.offset
chunk
ctime.offset
data.offset
gid.offset
meta.json
mode.offset
mtime.offset
name.offset
readers
tree.1
uid.offset
writer" ] || fail "running/ holds $(ls running)"
for d in bad1 bad2 bad3 bad4 bad5 bad6 bad11 bad14 bad15 bad16; do [ ! -e "$d" ] || fail "$d was left behind"; done
zr import dir src ds
expect_rc 1
expect_err_has '*ds: exists and is not empty'
zr verify --quiet ds
expect_rc 0
zr import flat a.npy fl --record-size 8 --writers 9
expect_rc 2

# flat files
head -c 4096 /dev/urandom >tokens.bin
zr import flat tokens.bin toks --record-size 512 --writers 1
expect_rc 0
zr cat toks data 7
tail -c 512 tokens.bin | cmp -s - "$T/.out" || fail "flat record 7"

# export npy: the array numpy.save would write, byte for byte
zr export npy arr x back.npy
expect_rc 0
expect_out 'back.npy: 7 rows'
run "$PY" -c 'import numpy as np
np.save("want.npy", np.concatenate([np.load("a.npy"), np.load("b.npy")]))'
cmp -s back.npy want.npy || fail "exported .npy differs from numpy.save's"
zr export npy ds data x.npy
expect_rc 1
expect_err_has '*no fixed shape*'
[ ! -e x.npy ] || fail "a failed export left x.npy"
# a bool array stays bool (README: dtypes are kept), through export too
run "$PY" -c 'import numpy as np
np.save("flags.npy", np.array([[True, False], [False, False], [True, True]]))'
expect_rc 0
zr import npy flags.npy flags
expect_rc 0
zr info flags
expect_out_has '             data *bool *raw *(2,) *-'
zr export npy flags data flags-back.npy
expect_rc 0
cmp -s flags.npy flags-back.npy || fail "the exported bool array differs from numpy.save's"
zr create made --field ok:bool:shape=
expect_rc 0

# tar: WebDataset shards (GNU and pax long names), missing members; export
# tar gives the same samples back
mkdir -p wds/a-directory-with-a-rather-long-name-to-push-paths-past-one-hundred-characters
L=wds/a-directory-with-a-rather-long-name-to-push-paths-past-one-hundred-characters
for i in 0 1 2 3; do gen "$L/sample-number-$i.jpg" $((i * 300 + 1)); echo $i >"$L/sample-number-$i.cls"; done
echo '{"x": 1}' >"$L/sample-number-2.json"
(cd wds && tar cf ../s0.tar --format=gnu "${L#wds/}/sample-number-0.jpg" "${L#wds/}/sample-number-0.cls" \
	"${L#wds/}/sample-number-1.jpg" "${L#wds/}/sample-number-1.cls")
(cd wds && tar cf ../s1.tar --format=pax "${L#wds/}/sample-number-2.jpg" "${L#wds/}/sample-number-2.cls" \
	"${L#wds/}/sample-number-2.json" "${L#wds/}/sample-number-3.cls")
zr import tar s0.tar s1.tar web --compress flate
expect_rc 0
expect_out 'web: 4 records, 0.0 MB'
zr info web
expect_out_has '             jpg *bytes *flate *variable *jpg'
expect_out_has '             json *bytes *flate *variable *json'
# .cls members (decimal text) make an i64 field: cls.npy and batch .npy work
expect_out_has '             cls *i64 *raw *() *-'
zr cat web cls 2
[ "$(od -An -td8 "$T/.out" | tr -d ' ')" = 2 ] || fail "sample 2's class is not 2"
run sh -c "\"$ZR\" cat web jpg 2 > got"
cmp -s got "$L/sample-number-2.jpg" || fail "tar sample 2 jpg"
zr cat web jpg 3
expect_rc 1
expect_err_has "*record 3 has no 'jpg' (missing)"
zr export tar web back.tar
expect_rc 0
expect_out 'back.tar: 4 records, 8 members'
# to standard output: -, /dev/stdout, a pipe; the same bytes, the summary
# on stderr
run sh -c "\"$ZR\" export tar web - >stream.tar"
expect_rc 0
expect_err_has '-: 4 records, 8 members'
cmp -s stream.tar back.tar || fail "export tar to - differs from export tar to a file"
run sh -c "\"$ZR\" export tar web /dev/stdout >devout.tar"
expect_rc 0
cmp -s devout.tar back.tar || fail "export tar to /dev/stdout differs"
run sh -c "\"$ZR\" export tar web - | tar tf - | wc -l"
expect_out 8
zr export tar web back.tar
expect_rc 1
expect_err_has 'zr: export: back.tar: File exists'
mkdir x && tar xf back.tar -C x || fail "tar cannot read the export"
# members are named by the samples' keys, prefixes kept: the same members
# as the shards had, byte for byte (a class as decimal text)
cmp -s "x/${L#wds/}/sample-number-2.json" "$L/sample-number-2.json" || fail "exported json"
[ "$(cat "x/${L#wds/}/sample-number-3.cls")" = 3 ] || fail "exported class: $(cat "x/${L#wds/}/sample-number-3.cls")"
cmp -s "x/${L#wds/}/sample-number-1.jpg" "$L/sample-number-1.jpg" || fail "exported jpg"
[ ! -e "x/${L#wds/}/sample-number-3.jpg" ] || fail "a missing member was exported"
run "$PY" - s0.tar s1.tar back.tar <<'PY'
import sys, tarfile
def members(*paths):
    out = {}
    for p in paths:
        with tarfile.open(p) as t:
            for m in t.getmembers():
                data = t.extractfile(m).read()
                out[m.name] = int(data) if m.name.endswith(".cls") else data
    return out
a, b = members(*sys.argv[1:3]), members(sys.argv[3])
assert a.keys() == b.keys(), (sorted(a), sorted(b))
assert a == b, [k for k in a if a[k] != b[k]]
PY
expect_rc 0
zr export tar web byid.tar --by-id
mkdir y && tar xf byid.tar -C y || fail "tar cannot read the --by-id export"
cmp -s y/000000002.json "$L/sample-number-2.json" || fail "--by-id json"
# export dir of a tar's field: KEY.EXT files under the key's directories
zr export dir web jpg webdir
expect_rc 0
cmp -s "webdir/${L#wds/}/sample-number-1.jpg" "$L/sample-number-1.jpg" || fail "export dir of a tar field"
# and of the whole tar's tree: every member a file, a class as decimal text
zr export dir web webtree
expect_rc 0
expect_out "webtree: 8 files"
for f in 0.jpg 1.jpg 2.jpg 2.json; do
	cmp -s "webtree/${L#wds/}/sample-number-$f" "$L/sample-number-$f" || fail "tree of a tar: $f"
done
for i in 0 1 2 3; do
	[ "$(cat "webtree/${L#wds/}/sample-number-$i.cls")" = $i ] || fail "tree of a tar: class $i"
done
[ "$(find webtree -type f | wc -l)" = 8 ] || fail "tree of a tar: $(find webtree -type f)"
# a key that would leave OUT_DIR (../, /) makes no file of the tree: the
# export writes the others, names the first left out, and fails; one
# field's records are written by id
"$PY" - evil.tar <<'PY'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    for name in ("ok.jpg", "../escaped.jpg", "/etc/abs.jpg"):
        i = tarfile.TarInfo(name); i.size = 1; t.addfile(i, io.BytesIO(b"x"))
PY
zr import tar evil.tar evil
expect_rc 0
expect_err_has "zr: import: 2 keys are not a relative path below a directory (the first: '../escaped'): kept as names, but tree/ and zr export dir and tar leave their records out"
zr export dir evil eviltree
expect_rc 1
expect_out 'eviltree: 1 file'
expect_err_has "zr: export: 2 records have a name that makes no file (*), so they were left out; the first: record 1, '../escaped' (*)"
[ "$(cd eviltree && find . -type f | sort | tr '\n' ' ')" = "./ok.jpg " ] ||
	fail "export dir of bad keys: $(find eviltree)"
zr export tar evil evil2.tar
expect_rc 1
expect_out 'evil2.tar: 1 records, 1 members'
expect_err_has "*the first: record 1, '../escaped' (--by-id names every member by id)"
[ "$(tar tf evil2.tar)" = ok.jpg ] || fail "export tar of bad keys: $(tar tf evil2.tar)"
zr export dir evil jpg evilout
expect_rc 0
[ -f evilout/1.jpg ] && [ -f evilout/2.jpg ] && [ -f evilout/ok.jpg ] || fail "export of a field: $(find evilout)"
[ ! -e escaped.jpg ] && [ ! -e evilout/../escaped.jpg ] && [ ! -e eviltree/../escaped.jpg ] ||
	fail "an export wrote outside OUT_DIR"
zr import tar back.tar web2
expect_rc 0
# members that are not KEY.EXT (a README, a directory's dot-less file) are
# skipped with one warning, as WebDataset skips them, not an abort
printf 'about these shards' >wds/README
(cd wds && tar cf ../extra.tar README "${L#wds/}/sample-number-0.jpg" "${L#wds/}/sample-number-0.cls")
zr import tar extra.tar web3
expect_rc 0
expect_out 'web3: 1 records, 0.0 MB'
expect_err_has 'zr: import: skipped 1 member not named KEY.EXT (not part of a sample); the first: extra.tar: README'
# a tar made the usual way (tar -C DIR .: members ./k1.jpg) names its keys
# without ./, so both exports write it back; symbolic links and FIFOs are
# kept, hard links skipped, said once; a key whose members another key's
# split is said
mkdir dot && printf 'y' >dot/k1.jpg && printf '5' >dot/k1.cls && ln -s k1.jpg dot/k2.jpg &&
	ln dot/k1.cls dot/k3.cls && mkfifo -m 600 dot/k4.jpg || fail "making dot/"
tar cf dot.tar --sort=name -C dot . || fail "tar -C dot ."
zr import tar dot.tar dotted
expect_rc 0
expect_err_has \
	'zr: import: skipped 1 hard link (not a file); the first: dot.tar: ./k*.cls'
zr find dotted k1
expect_out 0
zr export dir dotted dotout
expect_rc 0
[ "$(readlink dotout/k2.jpg)" = k1.jpg ] || fail "export dir of a ./ tar: the link k2.jpg is not kept"
[ "$(stat -c '%F %a' dotout/k4.jpg)" = "fifo 600" ] ||
	fail "export dir of a ./ tar: the FIFO k4.jpg is $(stat -c '%F %a' dotout/k4.jpg)"
rm dot/k3.cls dotout/k3.cls 2>/dev/null
diff -r -x k4.jpg dot dotout >/dev/null ||
	fail "export dir of a ./ tar: $(diff -r -x k4.jpg dot dotout | head -3)"
zr export tar dotted dotback.tar
expect_rc 0
(cd dot && printf z >k9.jpg && tar cf ../split.tar k1.cls k9.jpg k1.jpg) || fail "split.tar"
zr import tar split.tar splitkeys
expect_rc 0
expect_out "splitkeys: 3 records, 0.0 MB"
expect_err_has 'zr: import: the members of 1 key are not together (the first: k1): each run of them is a record of its own, named by the key*'
# a .cls member that is not a decimal class: the field keeps bytes, said once
printf 'tabby' >wds/k0.cls && printf 'x' >wds/k0.jpg
(cd wds && tar cf ../named.tar k0.jpg k0.cls)
zr import tar named.tar named
expect_rc 0
expect_err_has 'zr: import: sample 0 has a .cls member that is not a decimal class: the field cls keeps bytes'
zr cat named cls 0
expect_out tabby
# compressed shards (.tar.gz, .tgz) and standard input (-), compressed or
# not, give the same records as the plain shards
gzip -c s0.tar >s0.tar.gz && gzip -c s1.tar >s1.tgz
zr import tar s0.tar.gz s1.tgz gz
expect_rc 0
expect_out 'gz: 4 records, 0.0 MB'
run sh -c "gzip -c s1.tar | \"$ZR\" import tar - stdin1"
expect_rc 0
run sh -c "\"$ZR\" import tar - stdin0 <s0.tar"
expect_rc 0
for i in 0 1 2 3; do
	for f in jpg cls; do
		run sh -c "\"$ZR\" cat web $f $i > want 2>/dev/null; \"$ZR\" cat gz $f $i > got 2>/dev/null"
		cmp -s want got || fail "gz: record $i field $f differs"
	done
done
run sh -c "\"$ZR\" cat stdin1 jpg 0"
cmp -s "$T/.out" "$L/sample-number-2.jpg" || fail "stdin: record 0 is not sample 2"
head -c 200 s0.tar.gz >cut.tar.gz
zr import tar cut.tar.gz bad16
expect_rc 1
expect_err_has '*cut.tar.gz: *'
head -c 1500 s0.tar >cut.tar
zr import tar cut.tar bad7
expect_rc 1
expect_err_has '*cut.tar: truncated tar*'
(cd wds && tar cf ../dup.tar "${L#wds/}/sample-number-0.jpg" &&
	tar rf ../dup.tar "${L#wds/}/sample-number-0.jpg") # a second copy, not a hard link
zr import tar dup.tar bad8
expect_rc 1
expect_err_has '*appears twice in one sample*'
printf 'not a tar archive at all, just some text that is long enough to fill a block' >junk.tar
head -c 1024 /dev/zero >>junk.tar
zr import tar junk.tar bad9
expect_rc 1
expect_err_has '*junk.tar: not a tar archive, or damaged*'
# hostile sizes in a valid header (base-256): one past 64 bits, one that
# fits but lies about the archive; a long-name block once overflowed here
/usr/bin/python3 - <<'PY'
for name, size in (("huge.tar", b"\x80" + b"\xff" * 11), ("lying.tar", b"\x80" + bytes(3) + b"\x40" + bytes(7))):
    h = bytearray(512)
    h[0:5], h[100:108], h[124:136], h[156] = b"x.jpg", b"0000644\0", size, ord("L")
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\0 " % sum(h)
    open(name, "wb").write(bytes(h) + bytes(1024))
PY
zr import tar huge.tar bad10
expect_rc 1
expect_err_has '*huge.tar: not a tar archive, or damaged (bad header at byte 0)*'
zr import tar lying.tar bad11
expect_rc 1
expect_err_has '*lying.tar: truncated tar (member at byte 0 needs 4611686018427387904 bytes)*'
# GNU tar's sparse files (tar --sparse): old GNU 'S' members (one map
# block more past 4 segments) and pax formats 0.0, 0.1 and 1.0 give the
# file back, their holes left holes
mkdir sparse_src
truncate -s 3M sparse_src/s1.img
for i in 1 2 3 4 5 6 7; do
	printf "$i" | dd of=sparse_src/s1.img bs=1 seek=$((i * 300000)) conv=notrunc 2>/dev/null
done
truncate -s 1M sparse_src/s2.img # holes only
printf x >sparse_src/s1.txt && printf y >sparse_src/s2.txt
for fmt in gnu oldgnu posix:0.0 posix:0.1 posix:1.0; do
	n=$(echo $fmt | tr -d :.)
	opts="--format=${fmt%%:*}"
	[ "$fmt" = "${fmt#*:}" ] || opts="$opts --sparse-version=${fmt#*:}"
	(cd sparse_src && tar --sparse $opts -cf ../sp_$n.tar s1.img s1.txt s2.img s2.txt) ||
		fail "tar --sparse $opts"
	zr import tar sp_$n.tar sp_$n
	expect_rc 0
	zr export dir sp_$n sp_${n}_out
	expect_rc 0
	for f in s1.img s1.txt s2.img s2.txt; do
		cmp -s sparse_src/$f sp_${n}_out/$f || fail "tar --sparse $opts: $f differs after import"
	done
	[ "$(du -sk sp_$n | cut -f1)" -lt 512 ] ||
		fail "tar --sparse $opts: the holes were stored ($(du -sk sp_$n | cut -f1) KiB)"
done
# zr export tar writes a value with holes as GNU tar's sparse format 1.0:
# its data alone, which GNU tar, Python's tarfile and zr import read back
zr export tar sp_gnu sp_out.tar
expect_rc 0
[ "$(stat -c %s sp_out.tar)" -lt 524288 ] || fail "export tar wrote the holes: $(stat -c %s sp_out.tar) bytes"
mkdir sp_gnutar && tar --sparse -xf sp_out.tar -C sp_gnutar || fail "GNU tar cannot read export tar's sparse members"
/usr/bin/python3 -c 'import tarfile; tarfile.open("sp_out.tar").extractall("sp_pytar")' ||
	fail "Python's tarfile cannot read export tar's sparse members"
zr import tar sp_out.tar sp_again
expect_rc 0
zr export dir sp_again sp_again_out
for f in s1.img s1.txt s2.img s2.txt; do
	for d in sp_gnutar sp_pytar sp_again_out; do
		cmp -s sparse_src/$f $d/$f || fail "export tar of a sparse file: $d/$f differs"
	done
done
# a damaged map (format 1.0: it heads the member's data) is refused
for map in '99999999' '1\n5000000\n3'; do
	/usr/bin/python3 - "$map" <<'PY'
import sys
t = bytearray(open('sp_posix10.tar', 'rb').read())
at = t.index(b'./GNUSparseFile.') + 512  # the member's data: its map first
t[at:at + 512] = (sys.argv[1].replace('\\n', '\n') + '\n').encode().ljust(512, b'\0')
open('sp_bad.tar', 'wb').write(t)
PY
	zr import tar sp_bad.tar sp_bad
	expect_rc 1
	expect_err_has "*sp_bad.tar: member 's1.img': a damaged sparse map*"
	[ ! -e sp_bad ] || fail "a refused import left sp_bad"
done
# ... and so are pax keys that do not parse, or name a format not known
/usr/bin/python3 - <<'PY'
t = bytearray(open('sp_posix10.tar', 'rb').read())
at = t.index(b'GNU.sparse.major=1')
t[at + 17] = ord('7')
open('sp_bad.tar', 'wb').write(t)
PY
zr import tar sp_bad.tar sp_bad
expect_rc 1
expect_err_has "*sp_bad.tar: member 's1.img': a damaged sparse map (its GNU.sparse pax keys), or one of a format not known*"
[ ! -e sp_bad ] || fail "a refused import left sp_bad"
for d in bad7 bad8 bad9 bad10 bad11; do [ ! -e "$d" ] || fail "$d was left behind"; done

# a small filesystem: 18 MB of records fit in a 24 MiB tmpfs (offset tables
# start small); 30 MB do not, and that import fails naming the file it could
# not write and leaves nothing behind (root only: it mounts the tmpfs)
if [ "$(id -u)" = 0 ]; then
	mkdir small
	trap 'umount "$T/small" 2>/dev/null; rm -rf "$T"' EXIT
	mount -t tmpfs -o size=24m tmpfs small || fail "cannot mount a tmpfs"
	mkdir -p big/x
	i=0
	while [ $i -lt 6 ]; do gen big/x/$i.bin 3000000; i=$((i + 1)); done
	zr import dir big small/ds --writers 2
	expect_rc 0
	zr verify small/ds
	expect_rc 0
	rm -rf small/ds
	while [ $i -lt 10 ]; do gen big/x/$i.bin 3000000; i=$((i + 1)); done
	zr import dir big small/ds --writers 2
	expect_rc 1
	expect_err_has '*small/ds/chunk/*.zr: write of * bytes at * failed: No space left on device'
	[ -z "$(ls small)" ] || fail "the failed import left $(ls small) behind"
	umount small
fi
