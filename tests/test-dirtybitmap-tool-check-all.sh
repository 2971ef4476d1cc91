#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap check lists every problem it finds, and only reads.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

source "$abs_top_srcdir/tests/tool-check-lib.sh"

# check lists every problem it finds.
cp good.bitmaps c.bitmaps
poke word 0 0 0x10000
poke entry-raw 1 flags 0x11
poke entry-raw 1 gbits 40
sum=$(md5sum < c.bitmaps)
r=0; dirtybitmap check c.bitmaps > out 2> err || r=$?
test $r = 1
test ! -s out
expect err <<'EOF2'
dirtybitmap: c.bitmaps: directory checksum mismatch
dirtybitmap: c.bitmaps: bitmap b1: granularity 2^40 is out of range (512 to 2G)
dirtybitmap: c.bitmaps: bitmap b1: unknown flags 0x10
dirtybitmap: c.bitmaps: bitmap b0: bits set past the end of the disk
dirtybitmap: c.bitmaps: 4 problems found
EOF2
test "$(md5sum < c.bitmaps)" = "$sum"
