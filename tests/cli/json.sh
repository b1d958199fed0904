#!/bin/sh
# --json, where scripts read output: zr info, verify, ls and sample print
# valid JSON holding what their text says (compared with it), and what a
# failure leaves printed still parses.
. "$(dirname "$0")/lib.sh"

zr create ds --field a:u16:shape=4 --field b:bytes:flate:ext=txt
printf '12345678' >a
for i in 1 2 3; do zr put ds --a=a; done
zr info --json ds
expect_rc 0
cp "$T/.out" info.json
run /usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["length"] == 3, d
assert [f["name"] for f in d["fields"]] == ["a", "b"]
assert d["fields"][0]["shape"] == [4] and d["fields"][0]["dtype"] == "u16"
assert d["fields"][1]["compress"] == "flate" and d["fields"][1]["ext"] == "txt"
assert d["missing"] == 3 and d["live_bytes"] == 24
assert 0 < d["utilisation"] <= 1
assert d["attrs"] == {}, d["attrs"]
' info.json
expect_rc 0
# attrs as meta.json keeps them: the class names and names of an import
mkdir -p src/cat src/dog && printf c >src/cat/1.jpg && printf d >src/dog/2.jpg
zr import dir src labelled --label-from-parent label
zr info --json labelled
expect_rc 0
cp "$T/.out" labelled.json
run /usr/bin/python3 -c '
import json, sys
a = json.load(open(sys.argv[1]))["attrs"]
assert a["classes"] == {"label": ["cat", "dog"]}, a
assert a["names"]["field"] == "name" and a["names"]["kind"] == "path", a
' labelled.json
expect_rc 0
zr info --json /nonexistent
expect_rc 1

# zr ls --json: what zr ls and ls --long say, by id; an empty value is
# stored nowhere (chunk null); a file whose name is no UTF-8 is listed by
# id as the others are
rm -rf src && mkdir -p src/d && printf 'hello' >src/d/a.txt && : >src/d/e.txt &&
	printf 'x' >"src/d/$(printf 'b\377')".txt && printf 'j' >src/d/j.jpg
zr import dir src named
zr ls named data --json
expect_rc 0
cp "$T/.out" ls.json
zr ls named data
cp "$T/.out" ls.txt
zr ls named data --long
cp "$T/.out" ls.long
run /usr/bin/python3 -c '
import json, sys
rows = json.load(open(sys.argv[1]))
names = open(sys.argv[2]).read().split()
assert [r["name"] for r in rows] == names, (rows, names)
assert [r["id"] for r in rows] == list(range(len(rows))), rows
for r, line in zip(rows, open(sys.argv[3])):
    w = line.split()
    assert [r["name"], r["size"], r["stored"]] == [w[0], int(w[1]), int(w[2])], (r, w)
    if r["stored"]:
        assert (r["chunk"], r["offset"]) == (int(w[4]), int(w[6])), (r, w)
    else:
        assert r["chunk"] is None and r["offset"] is None and w[3] == "empty", (r, w)
assert sorted(r["size"] for r in rows) == [0, 1, 1, 5], rows
assert any(r["name"].endswith(".jpg") for r in rows), rows
' ls.json ls.txt ls.long
expect_rc 0

# zr verify --json: the problems zr verify names, each by field and id;
# --repair lists what it removed and which record took each id
zr create v --field a:bytes --chunk-size 2
printf 'abcdef' >r
for i in 1 2 3 4 5; do zr put v --a=r; done
zr verify v --json
expect_rc 0
expect_out '{"dataset":"v","records":5,"problems":[],"removed":[]}'
truncate -s 10 v/chunk/1.zr
zr verify v --json
expect_rc 1
cp "$T/.out" verify.json
run /usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["records"] == 5 and d["removed"] == [], d
assert d["problems"] == [{"field": "a", "id": 3,
                          "reason": "bytes 6..12 lie outside chunk/1.zr (10 bytes)"}], d
' verify.json
expect_rc 0
zr verify v --json --repair
expect_rc 0
expect_out '{"dataset":"v","records":4,"problems":[{"field":"a","id":3,"reason":"bytes 6..12 lie outside chunk/1.zr (10 bytes)"}],"removed":[{"id":3,"moved":4}]}'
zr verify v --json
expect_rc 0
expect_out '{"dataset":"v","records":4,"problems":[],"removed":[]}'

# zr sample --json: the batches zr sample prints, with what its first line
# on stderr says
zr sample shuffle,seed=7,batch=4,world=2,rank=1 --n 30 --epoch 2 --steps 1:3
expect_rc 0
cp "$T/.out" sample.txt
cp "$T/.err" sample.err
zr sample shuffle,seed=7,batch=4,world=2,rank=1 --n 30 --epoch 2 --steps 1:3 --json
expect_rc 0
[ ! -s "$T/.err" ] || fail "--json printed on stderr"
cp "$T/.out" sample.json
run /usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
want = [[int(x) for x in line.split()] for line in open(sys.argv[2])]
assert d["batches"] == want, (d, want)
spec, steps = open(sys.argv[3]).read().split(": ")
assert d["spec"] == spec and d["steps"] == int(steps.split()[0]), (d, spec, steps)
assert (d["records"], d["epoch"], d["first"]) == (30, 2, 1), d
' sample.json sample.txt sample.err
expect_rc 0
zr sample seq,batch=4 --n 30 --steps 2:2 --json
expect_rc 0
expect_out '{"spec":"seq,batch=4","records":30,"epoch":0,"steps":7,"first":2,"batches":[]}'
zr sample seq,batch=64 --n 30 --json
expect_rc 2
expect_out ''
echo "ok: --json of info, verify, ls and sample"
