#!/bin/sh
# zr info --json is valid JSON with the figures a script needs.
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
