#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap bitmap on a file whose disk size is unknown yet: its
# bitmaps have no bits until --size or a merged source of known size
# says; --size must agree.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

source "$abs_top_srcdir/tests/tool-bitmap-lib.sh"

# copy.bitmaps: 64K granules 0, 3, 4 and 9 dirty.
dirtybitmap bitmap --add --size 1M copy.bitmaps b0
nbdkit -U - --filter="$FILTER" file disk.img bitmap-file=copy.bitmaps \
       --run 'nbdsh -u "$uri" -c "h.pwrite(b\"x\", 0)" \
                              -c "h.pwrite(b\"x\", 200000)" \
                              -c "h.pwrite(b\"x\", 300000)" \
                              -c "h.pwrite(b\"x\", 600000)"'
dirtybitmap map copy.bitmaps b0 > copy.map

# A file whose disk size is unknown yet (the filter made it, no client
# connected): bitmaps have no bits until --size or a client says.
nbdkit -U - --filter="$FILTER" file disk.img bitmap-file=unsized.bitmaps \
       bitmap=b0 action=add --run true
dirtybitmap bitmap --add -g 1K unsized.bitmaps b1
dirtybitmap info unsized.bitmaps > info.out
grep -F "disk size: unknown" info.out
# Merging a source of known size gives it that size, all clean but
# for the source's bits; --size must agree.
bitmap_fails "dirtybitmap: unsized.bitmaps: --size 2097152 does not match the disk size of copy.bitmaps, 1048576 bytes" \
             --merge b0 -b copy.bitmaps --size 2M unsized.bitmaps b0
dirtybitmap info unsized.bitmaps > info.out
grep -F "disk size: unknown" info.out
dirtybitmap bitmap --merge b0 -b copy.bitmaps --size 1M unsized.bitmaps b0
dirtybitmap info unsized.bitmaps > info.out
grep -F "disk size: 1048576 (1 MiB)" info.out
dirtybitmap map unsized.bitmaps b0 > unsized.map
cmp unsized.map copy.map
dirtybitmap map unsized.bitmaps b1 > unsized.map
expect unsized.map <<'EOF2'
         0     1048576    1  hole
EOF2
