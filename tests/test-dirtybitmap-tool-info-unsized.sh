#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap info of a file the filter made before any client
# connected: the disk size is unknown, as text and as JSON.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

bm=disk.img.bitmaps

# A file the filter created, no client yet: the disk size is unknown.
yes | head -c 1000000 > disk.img
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=add --run true
dirtybitmap info $bm > info.out
expect info.out <<'EOF2'
file: disk.img.bitmaps
format version: 1
disk size: unknown (no client has connected yet)
state: closed cleanly
bitmaps:
    [0]:
        name: b0
        granularity: 65536
        recording: true
        consistent: true
        dirty bytes: 0 (0 B)
EOF2
dirtybitmap info --output=json $bm > info.json
expect info.json <<'EOF2'
{
    "filename": "disk.img.bitmaps",
    "format-version": 1,
    "disk-size": null,
    "state": "closed",
    "bitmaps": [
        {
            "name": "b0",
            "granularity": 65536,
            "recording": true,
            "consistent": true,
            "dirty-bytes": 0
        }
    ]
}
EOF2
