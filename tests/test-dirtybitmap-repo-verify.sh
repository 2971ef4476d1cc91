#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# verify DIR[@POINT] and healing, on a repository of one disk:
#   - a good repository: verify exits 0, and list shows each point ok
#     with the time (text and JSON);
#   - one byte flipped in a data cluster of the newest point's image:
#     verify of it exits 1 naming the range and the image that holds
#     it; list shows BAD (JSON: ok false, the range);
#   - the next backup, with nothing written since, copies that chunk
#     only (its JSON summary: 64K copied), says it healed it, and its
#     point restores to the disk and verifies ok;
#   - one byte flipped in the oldest point, in a cluster the later
#     points read through it: verify names those points, and the next
#     backup heals that chunk (and not the one healed already).
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/repo-lib.sh"

start_disk a 8M
write_some 1 a
rbackup c1 a
snapshot a c1
write_some 2 a
rbackup c2 a
snapshot a c2

# host IMAGE WHICH: "GUEST_OFFSET HOST_OFFSET" of a data cluster that
# IMAGE itself holds: WHICH is first, or "through": the first one that
# the later points (none of them write there) read through it.
host ()
{
    qemu-img map -f qcow2 --output=json "$1" | python3 -c '
import json, sys
e = [e for e in json.load(sys.stdin) if e["depth"] == 0 and e["data"]]
print(e[0]["start"], e[0]["offset"])'
}

# flip FILE OFFSET: one byte of FILE at OFFSET inverted.
flip ()
{
    python3 - "$1" "$2" <<'EOF2'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2]))
    b = f.read(1)
    f.seek(int(sys.argv[2]))
    f.write(bytes([b[0] ^ 0xff]))
EOF2
}

# verified_is JSON POINT OK [RANGES]: list's "verified" of POINT has ok
# OK, a time, and (not ok) the ranges RANGES (a Python list).
verified_is ()
{
    python3 - "$@" <<'EOF2'
import json, sys
l = json.load(open(sys.argv[1]))
p, = [p for p in l["points"] if p["name"] == sys.argv[2]]
v = p["verified"]
ok = sys.argv[3] == "true"
assert v["ok"] is ok, p
assert v["time"].endswith("Z") and len(v["time"]) == 27, p
if ok:
    assert sorted(v) == ["ok", "time"], p
else:
    assert v["differing"] == eval(sys.argv[4]), p
EOF2
}

# --- A good repository ------------------------------------------------
dirtybitmap list "$repo" > list0.txt
cat list0.txt
grep -E '^c2 .* -$' list0.txt
dirtybitmap verify "$repo" > v1.out
cat v1.out
grep -Fx "point c1, disk a: verified: all 128 chunks match its checksums" v1.out
grep -E "^point c2: verified ok at 20[0-9-]{8}T[0-9:.]{15}Z$" v1.out
dirtybitmap list "$repo" > list1.txt
cat list1.txt
grep -E '^c1 .* ok 20[0-9-]{8}T[0-9:.]{15}Z$' list1.txt
grep -E '^c2 .* ok 20[0-9-]{8}T[0-9:.]{15}Z$' list1.txt
dirtybitmap list --output=json "$repo" > list1.json
verified_is list1.json c1 true
verified_is list1.json c2 true
test ! -e R/verify.json

# --- One flipped byte in the newest point -----------------------------
read -r off h < <(host R/disks/a/c2.qcow2)
flip R/disks/a/c2.qcow2 $((h + 1000))
tool_fails "verify: point c2, disk a: 1 of 128 chunks read from $repo/disks/a/c2.qcow2 differ from its checksums $repo/sums/a.c2.sums:" \
    verify "$repo@c2"
grep -Fx "dirtybitmap: verify: point c2, disk a: differs: offset $off, 65536 bytes (held by the image of point c2)" fails.err
grep -F "point c2 is the newest: the next backup into $repo copies what is bad in it again" fails.err
dirtybitmap list "$repo" > list2.txt
cat list2.txt
grep -E '^c2 .* BAD 20[0-9-]{8}T[0-9:.]{15}Z$' list2.txt
grep -E '^c1 .* ok 20' list2.txt
dirtybitmap list --output=json "$repo" > list2.json
verified_is list2.json c2 false "[{'disk': 'a', 'offset': $off, 'length': 65536, 'in': 'c2'}]"
# JSON: the same, and exit 1.
r=0
dirtybitmap verify --output=json "$repo@c2" > v2.json || r=$?
test $r = 1
python3 - $off <<'EOF2'
import json, sys
v = json.load(open("v2.json"))
assert v["result"] == "bad", v
p, = v["points"]
assert p["name"] == "c2" and p["result"] == "bad" and p["ok"] is False, p
assert p["differing"] == [{"disk": "a", "offset": int(sys.argv[1]),
                           "length": 65536, "in": "c2",
                           "read-through-by": []}], p
EOF2

# --- The next backup heals it: that chunk only -----------------------
rbackup c3 a -- --output=json > b3.json 2> b3.err
cat b3.json b3.err
snapshot a c3
grep -Fx "dirtybitmap: backup: healed: chunk at offset $off of disk a, bad in point c2" b3.err
python3 -c '
import json
b = json.load(open("b3.json"))
assert b["mode"] == "incremental", b
assert b["bytes-copied"] == 65536 and b["bytes-zeroed"] == 0, b'
restored c3 a out.img
dirtybitmap verify "$repo@c3" > v3.out
grep -E "^point c3: verified ok at " v3.out
# c2 stays bad (its image is), and says so.
dirtybitmap list "$repo" > list3.txt
grep -E '^c2 .* BAD 20' list3.txt
grep -E '^c3 .* ok 20' list3.txt

# --- A flipped byte in the oldest point, read through by the others ---
read -r off1 h1 < <(qemu-img map -f qcow2 --output=json R/disks/a/c3.qcow2 |
    python3 -c '
import json, subprocess, sys
m = json.load(sys.stdin)
own = json.loads(subprocess.check_output(
    ["qemu-img", "map", "-f", "qcow2", "--output=json", "R/disks/a/c1.qcow2"]))
# A cluster that c3 reads from c1 (depth 2), and where it is in c1.
e = [e for e in m if e["depth"] == 2 and e["data"]][0]
o = [o for o in own if o["start"] <= e["start"] < o["start"] + o["length"]][0]
print(e["start"], o["offset"] + e["start"] - o["start"])')
flip R/disks/a/c1.qcow2 $((h1 + 5))
tool_fails "verify: point c1, disk a: 1 of 128 chunks" verify "$repo"
grep -Fx "dirtybitmap: verify: point c1, disk a: differs: offset $off1, 65536 bytes (held by the image of point c1; points c2, c3 read it through that image, and are bad there too)" fails.err
grep -Fx "dirtybitmap: verify: point c2, disk a: differs: offset $off1, 65536 bytes (held by the image of point c1; point c3 reads it through that image, and is bad there too)" fails.err
grep -Fx "dirtybitmap: verify: point c3, disk a: differs: offset $off1, 65536 bytes (held by the image of point c1)" fails.err
rbackup c4 a -- --output=json > b4.json 2> b4.err
cat b4.json b4.err
snapshot a c4
grep -Fx "dirtybitmap: backup: healed: chunk at offset $off1 of disk a, bad in point c1" b4.err
test "$(grep -c healed: b4.err)" = 1
python3 -c '
import json
b = json.load(open("b4.json"))
assert b["bytes-copied"] == 65536 and b["bytes-zeroed"] == 0, b'
restored c4 a out.img
dirtybitmap verify "$repo@c4"
