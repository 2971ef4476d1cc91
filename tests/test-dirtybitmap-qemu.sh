#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# qemu as the oracle: the same seeded random sequence of writes,
# write-zeroes and discards, given by qemu-io to a qcow2 holding a
# qemu-img bitmap and through the filter to a raw file, leaves the
# same dirty ranges in both bitmaps, at several granularities.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires qemu-img --version
requires qemu-io --version
requires qemu-nbd --version

oracle="$abs_top_srcdir/tests/dirty-ranges.py"

for g in 512 4096 65536; do
    # Not a multiple of the granule; big enough to keep clean gaps.
    size=$((512 * g + 3 * 512))
    if [ $size -lt $((8 * 1024 * 1024)) ]; then
        size=$((8 * 1024 * 1024 + 3 * 512))
    fi
    rm -f disk.qcow2 disk.img disk.img.bitmaps
    # KIND OFFSET COUNT, byte-exact, unaligned, some across granules.
    python3 - $size $g > ops <<'EOF2'
import random, sys
size, g = int(sys.argv[1]), int(sys.argv[2])
random.seed(g)
for i in range(150):
    kind = random.choice(["write", "zero", "discard"])
    count = random.choice([1, 511, 512, g - 1, g, g + 1, 3 * g + 7,
                           random.randrange(1, 300000)])
    off = random.randrange(size - count)
    if i % 10 == 0:
        off = off // g * g            # some aligned ones
    print(kind, off, count)
print("write", size - 1, 1)
EOF2

    # qemu: a qcow2 with a bitmap of granularity g, changed by qemu-io.
    qemu-img create -q -f qcow2 disk.qcow2 $size
    qemu-img bitmap --add -g $g disk.qcow2 b0
    awk '{ if ($1 == "write") print "write -P 0x55 " $2 " " $3;
           else if ($1 == "zero") print "write -z " $2 " " $3;
           else print "discard " $2 " " $3 }' ops > qemu-io.cmds
    qemu-io -f qcow2 disk.qcow2 < qemu-io.cmds > /dev/null
    nbdinfo --map=qemu:dirty-bitmap:b0 -- \
            [ qemu-nbd -r -f qcow2 -B b0 disk.qcow2 ] > qemu.map
    "$oracle" qemu < qemu.map > want.$g

    # The filter: the same requests, byte for byte, from nbdsh.
    truncate -s $size disk.img
    nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=add \
           granularity=$g --run 'nbdsh -u "$uri" -c "
for line in open(\"ops\"):
    kind, off, count = line.split()
    off, count = int(off), int(count)
    if kind == \"write\":
        h.pwrite(b\"\\x55\" * count, off)
    elif kind == \"zero\":
        h.zero(count, off)
    else:
        h.trim(count, off)
"'
    map_of -r --filter="$FILTER" file disk.img bitmap=b0 > filter.map
    "$oracle" map < filter.map > got.$g
    diff -u want.$g got.$g
    test "$(wc -l < want.$g)" -gt 20
done
