#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap bitmap applies all its actions or none: a failing action
# undoes the ones before it, and a file --size created goes again.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

source "$abs_top_srcdir/tests/tool-bitmap-lib.sh"

dirtybitmap bitmap --add --size 1M $bm b0
write 0 200000
dirtybitmap bitmap --add -g 4K $bm b1
dirtybitmap map $bm b0 > b0.map

# All or nothing: a failing action undoes the ones before it.
bitmap_fails "dirtybitmap: action merge:b9 on bitmap b2 failed: bitmap b9 not found" \
             --add --merge b9 $bm b2
bitmap_fails "dirtybitmap: action add on bitmap b0 failed: bitmap b0 already exists" \
             --clear --disable --remove --add --add $bm b0
# ... and a file --size created goes again.
bitmap_fails "dirtybitmap: action remove on bitmap b0 failed: bitmap b0 not found" \
             --remove --size 1M new.bitmaps b0
test ! -e new.bitmaps
bitmap_fails "dirtybitmap: nodir/new.bitmaps: cannot create: No such file or directory" \
             --add --size 1M nodir/new.bitmaps b0
dirtybitmap map $bm b0 > b0.map.after
cmp b0.map b0.map.after
