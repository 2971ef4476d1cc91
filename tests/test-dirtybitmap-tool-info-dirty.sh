#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap info: granularity, recording, consistent and dirty bytes
# of each bitmap, as text and as JSON; the options' order.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

bm=disk.img.bitmaps

yes | head -c 1000000 > disk.img

# Dirty bytes count whole granules, the last one cut at the end of
# the disk: b0 (64K) granules 0, 1, 15 = 2 * 65536 + 16960; b1 (4K)
# granules 0, 17, 244 = 2 * 4096 + 576.  A disabled bitmap does not
# record, and still counts.
rm -f $bm
dirtybitmap bitmap --add --size 1000000 $bm b0
dirtybitmap bitmap --add -g 4K $bm b1
nbdkit -U - --filter="$FILTER" file disk.img \
       --run 'nbdsh -u "$uri" -c "h.pwrite(b\"x\", 0)" \
                              -c "h.pwrite(b\"x\" * 10, 70000)" \
                              -c "h.pwrite(b\"x\", 999999)"'
dirtybitmap bitmap --disable $bm b1
nbdkit -U - --filter="$FILTER" file disk.img \
       --run 'nbdsh -u "$uri" -c "h.pwrite(b\"x\", 500000)"'
dirtybitmap info $bm > info.out
expect info.out <<'EOF2'
file: disk.img.bitmaps
format version: 1
disk size: 1000000 (977 KiB)
state: closed cleanly
bitmaps:
    [0]:
        name: b0
        granularity: 65536
        recording: true
        consistent: true
        dirty bytes: 213568 (209 KiB)
    [1]:
        name: b1
        granularity: 4096
        recording: false
        consistent: true
        dirty bytes: 8768 (8.56 KiB)
EOF2
dirtybitmap info --output=json $bm > info.json
expect info.json <<'EOF2'
{
    "filename": "disk.img.bitmaps",
    "format-version": 1,
    "disk-size": 1000000,
    "state": "closed",
    "bitmaps": [
        {
            "name": "b0",
            "granularity": 65536,
            "recording": true,
            "consistent": true,
            "dirty-bytes": 213568
        },
        {
            "name": "b1",
            "granularity": 4096,
            "recording": false,
            "consistent": true,
            "dirty-bytes": 8768
        }
    ]
}
EOF2
# --output=human is the default; options may follow the file.
dirtybitmap info --output=human $bm > human.out
cmp human.out info.out
dirtybitmap info $bm --output=json > after.json
cmp after.json info.json
