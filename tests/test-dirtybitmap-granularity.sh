#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# At granularities 512, 4K, 64K and 1M, unaligned and
# boundary-spanning pwrite, zero and trim requests dirty exactly the
# granules they touch, including the short last granule of a disk
# whose size is not a multiple of the granularity.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

oracle="$abs_top_srcdir/tests/dirty-ranges.py"

for g in 512 4096 65536 1048576; do
    size=$((16 * g + 1000))
    rm -f disk.img disk.img.bitmaps
    yes | head -c $size > disk.img
    # OFFSET COUNT KIND: straddling a boundary, one byte at 0, a zero
    # over many granules, a trim in the short last granule, an aligned
    # granule, and a write ending exactly on a boundary.
    cat > requests <<EOF2
$((g - 1)) 2 pwrite
0 1 pwrite
$((5 * g + 100)) $((3 * g)) zero
$((size - 10)) 10 trim
$((10 * g)) $g pwrite
$((12 * g + 1)) $((g - 1)) pwrite
EOF2
    nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=add \
           granularity=$g \
           --run 'nbdsh -u "$uri" -c "
for line in open(\"requests\"):
    off, count, kind = line.split()
    off, count = int(off), int(count)
    if off + count > h.get_size():
        count = h.get_size() - off
    if kind == \"pwrite\":
        h.pwrite(b\"z\" * count, off)
    elif kind == \"zero\":
        h.zero(count, off)
    else:
        h.trim(count, off)
"'
    map_of -r --filter="$FILTER" file disk.img bitmap=b0 > map.$g
    cat map.$g
    "$oracle" map < map.$g > got.$g
    cut -d' ' -f1,2 requests | "$oracle" expect $size $g > want.$g
    diff -u want.$g got.$g
    # The tool sees the same dirty ranges.
    dirtybitmap map disk.img.bitmaps b0 > toolmap.$g
    "$oracle" map < toolmap.$g > tool.$g
    diff -u want.$g tool.$g
done
