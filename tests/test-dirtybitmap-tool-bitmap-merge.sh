#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap bitmap --merge across granularities, both ways, with
# several actions in one call applied in order; merging a bitmap into
# itself changes nothing.
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

# Several actions in order: a new bitmap b2 (512 byte granules) that
# takes b0's bits, then b1's; a 64K granule dirties all 128 of its
# 512 byte granules, and a 4K one 8 of them.  clear, then merge.
dirtybitmap bitmap --add -g 512 --merge b0 --disable $bm b2
dirtybitmap bitmap --merge b1 $bm b2
dirtybitmap map $bm b2 > b2.map
expect b2.map <<'EOF2'
         0       65536    0  data
     65536      131072    1  hole
    196608       65536    0  data
    262144       36864    1  hole
    299008        4096    0  data
    303104      286720    1  hole
    589824       65536    0  data
    655360      393216    1  hole
EOF2
# ... and the other way: a 4K granule dirties the whole 64K one.
dirtybitmap bitmap --clear --merge b1 $bm b0
dirtybitmap map $bm b0 > b0.map
expect b0.map <<'EOF2'
         0      262144    1  hole
    262144       65536    0  data
    327680      262144    1  hole
    589824       65536    0  data
    655360      393216    1  hole
EOF2
dirtybitmap bitmap --clear $bm b1
dirtybitmap map $bm b1 > b1.map
expect b1.map <<'EOF2'
         0     1048576    1  hole
EOF2
names > names.out
expect names.out <<'EOF2'
b0 65536 enabled
b1 4096 enabled
b2 512 disabled
EOF2

# Merging a bitmap into itself changes nothing.
dirtybitmap bitmap --merge b2 $bm b2
dirtybitmap map $bm b2 > b2.map.after
cmp b2.map.after b2.map
