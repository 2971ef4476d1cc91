#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap bitmap --merge -b SOURCE_FILE: another file, only read;
# FILE itself, as the earlier actions of the call left it; a source of
# another disk size is refused; a new file (--size) takes a source of
# its size.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

source "$abs_top_srcdir/tests/tool-bitmap-lib.sh"

# b0 (64K) dirty at 0, 200000 and 600000 (not 300000: it was
# disabled then); b1 (4K), added after the first writes, at 300000
# and 600000.
dirtybitmap bitmap --add --size 1M $bm b0
write 0 200000
dirtybitmap bitmap --add -g 4K $bm b1
dirtybitmap bitmap --disable $bm b0
write 300000
dirtybitmap bitmap --enable $bm b0
write 600000
# b2 (512, disabled) has the bits of both; then b0 has b1's, and b1
# none.
dirtybitmap bitmap --add -g 512 --merge b0 --disable $bm b2
dirtybitmap bitmap --merge b1 $bm b2
dirtybitmap bitmap --clear --merge b1 $bm b0
dirtybitmap bitmap --clear $bm b1
dirtybitmap map $bm b2 > b2.map

# -b: merge from another file, read-only; -b naming FILE itself reads
# FILE as the earlier actions left it.
cp $bm other.bitmaps
dirtybitmap bitmap --clear $bm b2
other=$(md5sum < other.bitmaps)
dirtybitmap bitmap --merge b2 -b other.bitmaps $bm b1
test "$(md5sum < other.bitmaps)" = "$other"
dirtybitmap map $bm b1 > b1.map
cmp b1.map b2.map
dirtybitmap bitmap --clear --merge b1 --source-file $bm $bm b1
dirtybitmap map $bm b1 > b1.map
expect b1.map <<'EOF2'
         0     1048576    1  hole
EOF2
bitmap_fails "dirtybitmap: action merge:b7 on bitmap b1 failed: bitmap b7 not found in other.bitmaps" \
             --merge b2 --merge b7 -b other.bitmaps $bm b1
dirtybitmap bitmap --add --size 2M big.bitmaps b0
bitmap_fails "dirtybitmap: action merge:b0 on bitmap b1 failed: bitmap b0 in big.bitmaps covers a disk of 2097152 bytes, but this disk is 1048576 bytes" \
             --merge b0 -b big.bitmaps $bm b1
# A new file (--size) takes a source of its size; other sizes fail.
dirtybitmap bitmap --add --merge b2 -b other.bitmaps --size 1M copy.bitmaps b0
dirtybitmap map copy.bitmaps b0 > copy.map
expect copy.map <<'EOF2'
         0       65536    0  data
     65536      131072    1  hole
    196608      131072    0  data
    327680      262144    1  hole
    589824       65536    0  data
    655360      393216    1  hole
EOF2
bitmap_fails "dirtybitmap: copy2.bitmaps: --size 2097152 does not match the disk size of other.bitmaps, 1048576 bytes" \
             --add --merge b2 -b other.bitmaps --size 2M copy2.bitmaps b0
test ! -e copy2.bitmaps
