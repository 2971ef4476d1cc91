#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap bitmap --remove: the bitmap is gone, and removing it
# again fails.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

source "$abs_top_srcdir/tests/tool-bitmap-lib.sh"

dirtybitmap bitmap --add --size 1M $bm b0
dirtybitmap bitmap --add -g 4K $bm b1
dirtybitmap bitmap --add -g 512 --disable $bm b2

# remove.
dirtybitmap bitmap --remove $bm b1
names > names.out
expect names.out <<'EOF2'
b0 65536 enabled
b2 512 disabled
EOF2
bitmap_fails "dirtybitmap: action remove on bitmap b1 failed: bitmap b1 not found" \
             --remove $bm b1
