#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The base of an incremental backup of several disks missing on one
# disk (b), and the checksums of b's last backup missing too: b is
# copied in full, a and c are incrementals, and each target equals its
# disk.
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
rm b.$base.sums
backup "${argv[@]}" --incremental $base --checkpoint $new \
       --remove-incremental --output=json > left.out 2> left.err
cat left.out left.err
grep -F "disk b:" left.err
python3 - <<'EOF2'
import json
d = json.load(open("left.out"))
assert d["result"] == "complete", d
mode = {x["name"]: x["mode"] for x in d["disks"]}
assert mode == {"a": "incremental", "b": "full", "c": "incremental"}, mode
EOF2
same_disks $disks
bitmaps_are $new $disks
