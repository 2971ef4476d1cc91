#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap bitmap --disable: the bitmap records no more and still
# answers; --enable: it records again.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

source "$abs_top_srcdir/tests/tool-bitmap-lib.sh"

# b0 (64K) dirty at 0 and 200000; b1 (4K) added after.
dirtybitmap bitmap --add --size 1M $bm b0
write 0 200000
dirtybitmap bitmap --add -g 4K $bm b1
dirtybitmap map $bm b0 > b0.map

# disable: no more recording, still answers; enable: records again.
dirtybitmap bitmap --disable $bm b0
write 300000
dirtybitmap map $bm b0 > b0.map.after
cmp b0.map.after b0.map
dirtybitmap bitmap --enable $bm b0
write 600000
dirtybitmap map $bm b0 > b0.map
expect b0.map <<'EOF2'
         0       65536    0  data
     65536      131072    1  hole
    196608       65536    0  data
    262144      327680    1  hole
    589824       65536    0  data
    655360      393216    1  hole
EOF2
dirtybitmap map $bm b1 > b1.map
expect b1.map <<'EOF2'
         0      299008    1  hole
    299008        4096    0  data
    303104      294912    1  hole
    598016        4096    0  data
    602112      446464    1  hole
EOF2
