#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap rollback of a disk whose checkpoint is not the newest
# point's: a disk restored (restore-from=, restore-checkpoint=tue) from
# an older point of the repository than its newest (wed), written,
# then rolled back to mon.  The bitmap tue is its tracking base: the
# chunks written are those written since tue and those whose
# checksums differ between mon and tue, no more; the disk equals mon.
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/repo-lib.sh"
source "$abs_top_srcdir/tests/restore-lib.sh"

size=$((8 * 1024 * 1024))
chunk=65536
start_disk a $size
points_of a mon tue wed

# Disk b: point tue restored into it while served, its checkpoint tue.
restore_from tue b $size
cmp a.tue b.img
write_some thu b
cp b.img b.now

want=$(python3 - $chunk a.mon a.tue b.now <<'PY'
import sys
chunk = int(sys.argv[1])
mon, tue, now = (open(f, "rb").read() for f in sys.argv[2:5])
print(sum(1 for i in range(0, len(mon), chunk)
          if mon[i:i + chunk] != tue[i:i + chunk]
          or now[i:i + chunk] != tue[i:i + chunk]))
PY
)
dirtybitmap rollback --output=json "$repo@mon" \
            --disk "control=$PWD/b.ctl,source=$(uri b),name=a" > rb.json
cat rb.json
cmp a.mon b.img
python3 - rb.json "$want" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
d = j["disks"][0]
assert j["newest"] == "wed", j
assert d["tracking"] == "bitmap" and d["tracking-base"] == "tue", d
assert d["chunks-written"] == int(sys.argv[2]), (d, sys.argv[2])
assert d["bytes-copied"] + d["bytes-zeroed"] == int(sys.argv[2]) * 65536, d
PY
