#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The disk changed size between runs: grown, every bitmap (recording
# or not) covers the new size and the new area is dirty, including the
# granule the old end cut; shrunk, the bitmaps are cut; both logged.
# The size changes below the filter (the truncate filter), as a block
# device or a remote disk would: a file resized outside the filter is
# a write the filter did not see (test-dirtybitmap-outside-writes.sh).
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

# A disk that does not end on a granule.
yes | head -c $((1048576 + 1000)) > disk.img
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=add \
       --run 'nbdsh -u "$uri" -c "h.pwrite(b\"x\", 100000)"'
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b1 action=add \
       granularity=4K --run true
dirtybitmap bitmap --disable disk.img.bitmaps b1

# connect SIZE MESSAGE: one connection to the disk seen as SIZE bytes,
# with the log of the resize.
connect ()
{
    nbdkit -U - -v --filter="$FILTER" --filter=truncate file disk.img \
           truncate=$1 --run 'nbdinfo --size "$uri"' > size 2> log
    grep -F "dirtybitmap: " log | grep -F "$2"
}

# Grown by 69000 bytes: from granule 16 (which held the old end) on.
connect 1118576 "the disk grew from 1049576 to 1118576 bytes: the new area is dirty in every bitmap"
expect size <<'EOF2'
1118576
EOF2
dirtybitmap map disk.img.bitmaps b0 > map
expect map <<'EOF2'
         0       65536    1  hole
     65536       65536    0  data
    131072      917504    1  hole
   1048576       70000    0  data
EOF2
dirtybitmap map disk.img.bitmaps b1 > map
expect map <<'EOF2'
         0     1048576    1  hole
   1048576       70000    0  data
EOF2
dirtybitmap info disk.img.bitmaps > info
grep -F "disk size: 1118576" info
grep -A3 'name: b1' info | grep -F "recording: false"

# Shrunk: cut.
connect 600000 "the disk shrank from 1118576 to 600000 bytes: bitmaps are cut to the new size"
dirtybitmap map disk.img.bitmaps b0 > map
expect map <<'EOF2'
         0       65536    1  hole
     65536       65536    0  data
    131072      468928    1  hole
EOF2
dirtybitmap map disk.img.bitmaps b1 > map
expect map <<'EOF2'
         0      600000    1  hole
EOF2
dirtybitmap check disk.img.bitmaps

# Grown again: what comes back is new, so it is dirty.
connect 1048576 "the disk grew from 600000 to 1048576 bytes"
dirtybitmap map disk.img.bitmaps b0 > map
expect map <<'EOF2'
         0       65536    1  hole
     65536       65536    0  data
    131072      458752    1  hole
    589824      458752    0  data
EOF2
dirtybitmap map disk.img.bitmaps b1 > map
expect map <<'EOF2'
         0      598016    1  hole
    598016      450560    0  data
EOF2
