#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# backup --repo --incremental P with P an older point than the newest:
# a disk restored from tue (restore-from=, restore-checkpoint=tue)
# while the repository's newest point is wed.  The new point builds on
# wed's images; it copies what was written since tue and the chunks
# that differ between tue and wed, no more, and restores to the disk.
# An --incremental that is no point of the repository is refused.
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
write_some thu b
cp b.img b.thu
bdisk="control=$PWD/b.ctl,source=$(uri b),name=a"

tool_fails -k b.img "--incremental sun: $repo has no point sun" \
           backup --repo "$repo" --checkpoint thu --incremental sun \
           --disk "$bdisk"

want=$(python3 - $chunk a.tue a.wed b.thu <<'PY'
import sys
chunk = int(sys.argv[1])
tue, wed, thu = (open(f, "rb").read() for f in sys.argv[2:5])
print(sum(1 for i in range(0, len(tue), chunk)
          if tue[i:i + chunk] != wed[i:i + chunk]
          or thu[i:i + chunk] != tue[i:i + chunk]))
PY
)
backup --repo "$repo" --checkpoint thu --incremental tue --output=json \
       --disk "$bdisk" > thu.json 2> thu.err
cat thu.json thu.err
grep -F "backup: disk a: from checkpoint tue, older than the newest point wed: the " thu.err
python3 - thu.json "$want" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
d = j["disks"][0]
assert d["mode"] == "incremental", d
assert j["bytes-total"] == int(sys.argv[2]) * 65536, (j, sys.argv[2])
PY
dirtybitmap list --output=json "$repo" | python3 -c '
import json, sys
p = json.load(sys.stdin)["points"][-1]
assert p["name"] == "thu" and p["base"] == "wed", p'
restored thu a thu.img b
# tue's checkpoint went once the point existed; thu's stays.
bitmaps_are "thu" b
