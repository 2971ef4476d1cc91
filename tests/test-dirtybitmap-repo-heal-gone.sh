#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A range recorded bad in a point, held by the image of a point that
# is gone since (a prune folds a removed point's data into another
# image, so where the newest point reads it from no longer tells):
# the next backup copies it again whatever the newest point reads
# (more, never less).  The record is written here as verify writes
# one, naming a point that is not in the repository.
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/repo-lib.sh"

start_disk a 8M
write_some 1 a
rbackup c1 a
write_some 2 a
rbackup c2 a
write_some 3 a
rbackup c3 a

# A chunk that c3 reads from c1's image.
off=$(qemu-img map -f qcow2 --output=json R/disks/a/c3.qcow2 |
      python3 -c '
import json, sys
print([e for e in json.load(sys.stdin) if e["depth"] == 2 and e["data"]][0]["start"])')
python3 - $off <<'EOF2'
import json, sys
r = json.load(open("R/points/c2.json"))
r["verified"] = {"time": "2026-12-06T05:00:00.123456Z", "ok": False,
                 "differing": [{"disk": "a", "offset": int(sys.argv[1]),
                                "length": 65536, "in": "c0"}]}
json.dump(r, open("R/points/c2.json", "w"))
EOF2
dirtybitmap list "$repo" | grep -E '^c2 .* BAD 2026-12-06T05:00:00.123456Z$'

rbackup c4 a -- --output=json > b4.json 2> b4.err
cat b4.json b4.err
grep -Fx "dirtybitmap: backup: healed: chunk at offset $off of disk a, bad in point c2" b4.err
python3 -c '
import json
b = json.load(open("b4.json"))
assert b["mode"] == "incremental", b
assert b["bytes-copied"] == 65536 and b["bytes-zeroed"] == 0, b'
snapshot a c4
restored c4 a out.img
