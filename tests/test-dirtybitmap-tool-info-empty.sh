#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap info of a file without bitmaps, as text and as JSON.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

# No bitmaps at all.
dirtybitmap bitmap --add --size 1M empty.bitmaps b0
dirtybitmap bitmap --remove empty.bitmaps b0
dirtybitmap info empty.bitmaps > empty.out
expect empty.out <<'EOF2'
file: empty.bitmaps
format version: 1
disk size: 1048576 (1 MiB)
state: closed cleanly
bitmaps: none
EOF2
dirtybitmap info --output json empty.bitmaps > empty.json
expect empty.json <<'EOF2'
{
    "filename": "empty.bitmaps",
    "format-version": 1,
    "disk-size": 1048576,
    "state": "closed",
    "bitmaps": []
}
EOF2
