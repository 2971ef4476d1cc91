#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap bitmap --size on an existing file must be the disk size
# it records, and is then a no-op.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

source "$abs_top_srcdir/tests/tool-bitmap-lib.sh"

dirtybitmap bitmap --add --size 1M $bm b0

# --size of an existing file must be its size, and then is a no-op.
dirtybitmap bitmap --add -g 4K --size 1048576 $bm b1
bitmap_fails "dirtybitmap: $bm: --size 2097152 does not match the disk size recorded in the file, 1048576 bytes" \
             --add --size 2M $bm b2
names > names.out
expect names.out <<'EOF2'
b0 65536 enabled
b1 4096 enabled
EOF2
