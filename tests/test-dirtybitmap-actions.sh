#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The actions: add, remove, clear, enable, disable, merge:SRC, applied
# in order, all or nothing, with qemu-img bitmap's rules.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

# Data everywhere: the file plugin reports no zero ranges, so every
# dirty range shows as data.
yes | head -c 1M > disk.img

# write args...: nbdkit with the filter; the client writes one byte at
# each offset given in $offsets.
write ()
{
    nbdkit -U - --filter="$FILTER" file disk.img "$@" \
           --run 'for o in $offsets; do
                      nbdsh -u "$uri" -c "h.pwrite(b\"x\", $o)" || exit 1
                  done'
}
map ()
{
    map_of -r --filter="$FILTER" file disk.img bitmap="$1" > "$1.map"
}
# refused MESSAGE args...: nbdkit with args fails saying MESSAGE, and
# the bitmap file is as it was.
refused ()
{
    fails -k disk.img.bitmaps "$1" \
          nbdkit -U - --filter="$FILTER" file disk.img "${@:2}" --run true
}

# add: empty and recording.
offsets="" write bitmap=b0 action=add
map b0
expect b0.map <<'EOF2'
         0     1048576    1  hole
EOF2
offsets="0 200000" write bitmap=b0
map b0
expect b0.map <<'EOF2'
         0       65536    0  data
     65536      131072    1  hole
    196608       65536    0  data
    262144      786432    1  hole
EOF2

# The rules of qemu-img bitmap, each naming the action and bitmap.
refused "dirtybitmap: action add on bitmap b0 failed: bitmap b0 already exists" \
        bitmap=b0 action=add
refused "dirtybitmap: action remove on bitmap b9 failed: bitmap b9 not found" \
        bitmap=b9 action=remove
refused "dirtybitmap: action clear on bitmap b9 failed: bitmap b9 not found" \
        bitmap=b9 action=clear
refused "dirtybitmap: action enable on bitmap b9 failed: bitmap b9 not found" \
        bitmap=b9 action=enable
refused "dirtybitmap: action disable on bitmap b9 failed: bitmap b9 not found" \
        bitmap=b9 action=disable
refused "dirtybitmap: action merge:b0 on bitmap b9 failed: bitmap b9 not found" \
        bitmap=b9 action=merge:b0
refused "dirtybitmap: action merge:b9 on bitmap b1 failed: bitmap b9 not found" \
        bitmap=b1 action=add action=merge:b9

# All or nothing: the add above did not happen, nor does this clear.
refused "dirtybitmap: action add on bitmap b0 failed: bitmap b0 already exists" \
        bitmap=b0 action=clear action=add
map b0
grep -F "196608       65536    0  data" b0.map
refused "bitmap b1 not found" bitmap=b1

# disable: records nothing more, still answers; enable: records again.
offsets="" write bitmap=b0 action=disable
offsets="500000" write bitmap=b0
map b0
expect b0.map <<'EOF2'
         0       65536    0  data
     65536      131072    1  hole
    196608       65536    0  data
    262144      786432    1  hole
EOF2
offsets="600000" write bitmap=b0 action=enable
map b0
expect b0.map <<'EOF2'
         0       65536    0  data
     65536      131072    1  hole
    196608       65536    0  data
    262144      327680    1  hole
    589824       65536    0  data
    655360      393216    1  hole
EOF2

# A second bitmap starts clean; merge:SRC ORs, across granularities.
# (b0 does not record this write.)
offsets="" write bitmap=b0 action=disable
offsets="1000000" write bitmap=b1 action=add granularity=4K
map b1
expect b1.map <<'EOF2'
         0      999424    1  hole
    999424        4096    0  data
   1003520       45056    1  hole
EOF2
offsets="" write bitmap=b1 action=merge:b0
map b1
expect b1.map <<'EOF2'
         0       65536    0  data
     65536      131072    1  hole
    196608       65536    0  data
    262144      327680    1  hole
    589824       65536    0  data
    655360      344064    1  hole
    999424        4096    0  data
   1003520       45056    1  hole
EOF2
# A 4K granule dirties the whole 64K granule around it.
map b0
if grep -F "983040" b0.map; then
    echo "$0: b0 is dirty at 983040 before the merge"
    exit 1
fi
offsets="" write bitmap=b0 action=merge:b1 action=enable
map b0
expect b0.map <<'EOF2'
         0       65536    0  data
     65536      131072    1  hole
    196608       65536    0  data
    262144      327680    1  hole
    589824       65536    0  data
    655360      327680    1  hole
    983040       65536    0  data
EOF2

# clear, then several actions in order: clear b1, merge b0 into it.
offsets="" write bitmap=b0 action=clear
map b0
expect b0.map <<'EOF2'
         0     1048576    1  hole
EOF2
offsets="40000" write bitmap=b0
offsets="" write bitmap=b1 action=clear action=merge:b0 action=disable
map b1
expect b1.map <<'EOF2'
         0       65536    0  data
     65536      983040    1  hole
EOF2

# remove: gone; without extents= the map passes through (a file with
# no holes is all data).
offsets="" write bitmap=b1 action=remove
refused "bitmap b1 not found" bitmap=b1
map_of -r --filter="$FILTER" file disk.img bitmap=b1 action=add \
       action=remove > removed.map
map_of -r file disk.img > plain.map
diff -u plain.map removed.map
refused "dirtybitmap: bitmap b1 not found in" \
        bitmap=b1 action=add action=remove extents=bitmap
