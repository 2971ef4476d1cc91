#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap check of a file whose disk size is unknown: sound, and
# a data offset without data is a problem check and info report.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

source "$abs_top_srcdir/tests/tool-check-lib.sh"

# A bitmap of a disk whose size is unknown has no data, so no data
# offset either.
nbdkit -U - --filter="$FILTER" file disk.img bitmap-file=unsized.bitmaps \
       bitmap=b0 action=add --run true
dirtybitmap check unsized.bitmaps
python3 "$edit" unsized.bitmaps entry 0 data_offset 8192
r=0; dirtybitmap check unsized.bitmaps > out 2> err || r=$?
test $r = 1
expect err <<'EOF2'
dirtybitmap: unsized.bitmaps: bitmap b0: data offset 8192 without data
dirtybitmap: unsized.bitmaps: 1 problem found
EOF2
r=0; dirtybitmap info unsized.bitmaps > out 2> err || r=$?
test $r = 1
grep -F "dirtybitmap: unsized.bitmaps: bitmap b0: data offset 8192 without data" err
