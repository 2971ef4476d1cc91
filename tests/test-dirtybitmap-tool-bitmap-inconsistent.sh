#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap bitmap on inconsistent bitmaps (the machine stopped
# under a durability=flush server): only --remove works on them, and a
# commit keeps the mark.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

source "$abs_top_srcdir/tests/tool-bitmap-lib.sh"

dirtybitmap bitmap --add --size 1M $bm b0
dirtybitmap bitmap --add -g 512 --disable $bm b2

# Inconsistent bitmaps (the machine stopped under a durability=flush
# server): only --remove works on them, and a commit keeps the mark.
python3 "$edit" $bm set flags 3
python3 "$edit" $bm set boot_id 00000000-0000-0000-0000-000000000000
why="bitmap b0 is inconsistent: it was recording when the machine stopped uncleanly, when its file could not be synced, or when the disk was written without the filter, so it may have missed changes; remove it and take a full backup"
for a in clear enable disable; do
    bitmap_fails "dirtybitmap: action $a on bitmap b0 failed: $why" --$a $bm b0
done
bitmap_fails "dirtybitmap: action merge:b2 on bitmap b0 failed: $why" \
             --merge b2 $bm b0
bitmap_fails "dirtybitmap: action merge:b0 on bitmap b2 failed: $why" \
             --merge b0 $bm b2
dirtybitmap bitmap --add $bm b3
dirtybitmap info $bm > info.out
grep -F "state: closed cleanly" info.out
dirtybitmap info --output=json $bm > info.json
python3 - info.json <<'EOF2'
import json, sys
d = json.load(open(sys.argv[1]))
assert [(b["name"], b["consistent"]) for b in d["bitmaps"]] == \
    [("b0", False), ("b2", True), ("b3", True)], d
EOF2
dirtybitmap bitmap --remove $bm b0
names > names.out
expect names.out <<'EOF2'
b2 512 disabled
b3 65536 enabled
EOF2
dirtybitmap check $bm
