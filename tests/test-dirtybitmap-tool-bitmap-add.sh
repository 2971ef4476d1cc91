#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap bitmap --add: no file without --size; --size creates it;
# the new bitmap is empty and recording, and the filter records in it.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

source "$abs_top_srcdir/tests/tool-bitmap-lib.sh"

# No file without --size.
bitmap_fails "dirtybitmap: $bm: No such file or directory" --add $bm b0
grep -F "dirtybitmap: use --size SIZE to create it" fails.err
test ! -e $bm

# --size creates the file: add, empty and recording.
dirtybitmap bitmap --add --size 1M $bm b0
names > names.out
expect names.out <<'EOF2'
b0 65536 enabled
EOF2
dirtybitmap map $bm b0 > b0.map
expect b0.map <<'EOF2'
         0     1048576    1  hole
EOF2
# A bitmap the tool added is used by the filter.
write 0 200000
dirtybitmap map $bm b0 > b0.map
expect b0.map <<'EOF2'
         0       65536    0  data
     65536      131072    1  hole
    196608       65536    0  data
    262144      786432    1  hole
EOF2
