#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# More bad ranges than a record keeps (1024): verify folds them into
# one range per disk, from the first to the end of the last, held by
# the point itself, so the record stays readable (list) and the next
# backup heals every one of them (and a little more: the chunks
# between them, which it says).
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/repo-lib.sh"

n=1100
start_disk a $(( 2 * n * 65536 ))
# A write in every other chunk.
python3 - "$(uri a)" $n <<'EOF2'
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
for i in range(int(sys.argv[2])):
    h.pwrite(b"x" * 4096, 2 * i * 65536)
h.shutdown()
EOF2
rbackup c1 a
snapshot a c1

# One byte flipped in each of those chunks, in c1's image (a full
# copy: it holds every chunk).
qemu-img map -f qcow2 --output=json R/disks/a/c1.qcow2 > map.json
python3 - <<'EOF2'
import json
m = json.load(open("map.json"))
n = 0
with open("R/disks/a/c1.qcow2", "r+b") as f:
    for e in m:
        if not e["data"]:
            continue
        for off in range(0, e["length"], 65536):
            if (e["start"] + off) // 65536 % 2:
                continue
            f.seek(e["offset"] + off + 10)
            b = f.read(1)
            f.seek(e["offset"] + off + 10)
            f.write(bytes([b[0] ^ 0xff]))
            n += 1
assert n == 1100, n
EOF2

tool_fails "verify: point c1, disk a: $n of $(( 2 * n )) chunks read from" \
    verify "$repo"
test "$(grep -c 'differs: offset' fails.err)" = $n
dirtybitmap list --output=json "$repo" > l.json
python3 - $n <<'EOF2'
import json, sys
n = int(sys.argv[1])
p, = json.load(open("l.json"))["points"]
assert p["verified"]["ok"] is False, p
assert p["verified"]["differing"] == [
    {"disk": "a", "offset": 0, "length": (2 * n - 1) * 65536, "in": "c1"}], p
EOF2

rbackup c2 a -- --output=json > b2.json 2> b2.err
cat b2.json b2.err
grep -Fx "dirtybitmap: backup: healed: $(( 2 * n - 1 )) chunks at offset 0 ($(( (2 * n - 1) * 65536 )) bytes) of disk a, bad in point c1" b2.err
snapshot a c2
restored c2 a out.img
dirtybitmap verify "$repo@c2"
