#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The filter stacks over the memory, file and nbd plugins, and under
# other filters, with the same result.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

workload='nbdsh -u "$uri" -c "
h.pwrite(b\"x\" * 5000, 70000)
h.zero(65536, 262144)
h.trim(1, 1048575)
"'
cat > want <<'EOF2'
65536 131072
262144 327680
983040 1048576
EOF2
oracle="$abs_top_srcdir/tests/dirty-ranges.py"

# memory: the bitmaps need bitmap-file=.
nbdkit -U - --filter="$FILTER" memory 1M bitmap-file="$PWD/mem.bitmaps" \
       bitmap=b0 action=add --run "$workload"
dirtybitmap map mem.bitmaps b0 > map.memory
"$oracle" map < map.memory > got.memory
diff -u want got.memory

# file, with the default bitmap file next to it.
truncate -s 1M disk.img
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=add \
       --run "$workload"
dirtybitmap map disk.img.bitmaps b0 > map.file
"$oracle" map < map.file > got.file
diff -u want got.file
map_of -r --filter="$FILTER" file disk.img bitmap=b0 > map.file-map
"$oracle" map < map.file-map > got.file-map
diff -u want got.file-map

# nbd: a second nbdkit serves the disk; the filter sits in front.
truncate -s 1M back.img
start_nbdkit -P "$PWD/back.pid" -U "$PWD/back.sock" file back.img
nbdkit -U - --filter="$FILTER" nbd socket="$PWD/back.sock" \
       bitmap-file="$PWD/nbd.bitmaps" bitmap=b0 action=add \
       --run "$workload"
dirtybitmap map nbd.bitmaps b0 > map.nbd
"$oracle" map < map.nbd > got.nbd
diff -u want got.nbd
cmp disk.img back.img

# Under and over other filters: blocksize above splits requests,
# delay below slows writes.
nbdkit -U - --filter=blocksize --filter="$FILTER" --filter=delay memory 1M \
       bitmap-file="$PWD/stack.bitmaps" bitmap=b0 action=add \
       maxdata=4096 delay-write=1ms --run "$workload"
dirtybitmap map stack.bitmaps b0 > map.stack
"$oracle" map < map.stack > got.stack
diff -u want got.stack
