#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap check reports bits set past the end of the disk, in the
# last word and in the padding after it (which the loader ignores);
# the last granule's own bit is no problem.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

source "$abs_top_srcdir/tests/tool-check-lib.sh"

# Bits past the last granule: the loader ignores them, check reports.
cp good.bitmaps c.bitmaps
poke word 0 0 0x10000
r=0; dirtybitmap check c.bitmaps > out 2> err || r=$?
test $r = 1
expect err <<'EOF2'
dirtybitmap: c.bitmaps: bitmap b0: bits set past the end of the disk
dirtybitmap: c.bitmaps: 1 problem found
EOF2
# ... also in the zero padding after the last word (b1: 245 granules
# in 4 words, then 508 words of padding up to 4096 bytes).
cp good.bitmaps c.bitmaps
poke word 1 4 1
r=0; dirtybitmap check c.bitmaps > out 2> err || r=$?
test $r = 1
expect err <<'EOF2'
dirtybitmap: c.bitmaps: bitmap b1: bits set past the end of the disk
dirtybitmap: c.bitmaps: 1 problem found
EOF2
cp good.bitmaps c.bitmaps
poke word 1 511 0x8000000000000000
r=0; dirtybitmap check c.bitmaps > out 2> err || r=$?
test $r = 1
grep -F "dirtybitmap: c.bitmaps: bitmap b1: bits set past the end of the disk" err
# The last granule's own bit is no problem.
cp good.bitmaps c.bitmaps
poke word 1 3 0x10000000000000
dirtybitmap check c.bitmaps
