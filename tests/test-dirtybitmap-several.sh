#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# With several enabled bitmaps, a write dirties its granules in every
# one of them, whatever the others already hold (granules dirty in
# two bitmaps and clean in a third, granularities 4K and 64K), with
# durability=flush and strict.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

for mode in flush strict; do
    rm -f disk.img disk.img.bitmaps
    yes | head -c 1M > disk.img

    # a (64K) is dirty at granules 0 and 2, so is b (4K, merged from
    # a); c (64K) is added clean.
    nbdkit -U - --filter="$FILTER" file disk.img bitmap=a action=add \
           durability=$mode \
           --run 'nbdsh -u "$uri" -c "h.pwrite(b\"x\", 0); h.pwrite(b\"x\", 131072)"'
    dirtybitmap bitmap --add -g 4K --merge a disk.img.bitmaps b
    dirtybitmap bitmap --add disk.img.bitmaps c

    # Writes into granules dirty in a and b must still reach c.
    nbdkit -U - --filter="$FILTER" file disk.img bitmap=a durability=$mode \
           --run 'nbdsh -u "$uri" -c "
h.pwrite(b\"y\", 100)
h.pwrite(b\"y\" * 4096, 135168)
h.zero(512, 524288)
"'

    dirtybitmap map disk.img.bitmaps a > map.a
    dirtybitmap map disk.img.bitmaps b > map.b
    dirtybitmap map disk.img.bitmaps c > map.c
    cat map.a map.b map.c
    expect map.a <<'EOF2'
         0       65536    0  data
     65536       65536    1  hole
    131072       65536    0  data
    196608      327680    1  hole
    524288       65536    0  data
    589824      458752    1  hole
EOF2
    expect map.b <<'EOF2'
         0       65536    0  data
     65536       65536    1  hole
    131072       65536    0  data
    196608      327680    1  hole
    524288        4096    0  data
    528384      520192    1  hole
EOF2
    diff -u map.a map.c
done
