#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The base of an incremental backup of several disks missing on one
# disk (b): never an incremental from a base that is not there.  b is
# resynced (read whole, compared with the checksums of its last
# backup), a and c are incrementals, and each target equals its disk.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires python3 -c 'import nbd'
source "$abs_top_srcdir/tests/machine-lib.sh"

three_backed_up
new=c2
write_some 2 $disks
dirtybitmap bitmap --remove --control b.ctl $base
backup "${argv[@]}" --incremental $base --checkpoint $new \
       --remove-incremental --output=json > left.out 2> left.err
cat left.out left.err
grep -F "dirtybitmap: backup: disk b: bitmap $base is missing: a resync" left.err
if grep -E "disk (a|c):" left.err; then exit 1; fi
python3 - <<'EOF2'
import json
d = json.load(open("left.out"))
assert d["result"] == "complete", d
mode = {x["name"]: x["mode"] for x in d["disks"]}
assert mode == {"a": "incremental", "b": "resync", "c": "incremental"}, mode
EOF2
same_disks $disks
bitmaps_are $new $disks
