#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A bitmap file from before the coarse shadows (made by the tool and
# the filter of that time: old-format/before-shadows.bitmaps, three
# bitmaps over a 1M disk, "off" disabled) opens and keeps working in
# every durability mode; in coarse mode its shadows are made from its
# bits, so that a power loss right after finds the old bits' coarse
# granules too.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires test -r /proc/sys/kernel/random/boot_id

old="$abs_top_srcdir/tests/old-format/before-shadows.bitmaps"
dirtybitmap check "$old"


for mode in flush strict coarse; do
    cp "$old" $mode.bitmaps
    chmod u+w $mode.bitmaps
    nbdkit -U - --filter="$FILTER" null 1M bitmap-file=$mode.bitmaps \
           durability=$mode \
           --run 'nbdsh -u "$uri" -c "h.pwrite(b\"x\", 524288)"'
    dirtybitmap check $mode.bitmaps
    dirtybitmap info $mode.bitmaps > info
    cat info
    grep -F "state: closed cleanly" info
    test "$(grep -c 'consistent: true' info)" -eq 3
    dirtybitmap map $mode.bitmaps b0 > map
    expect map <<'EOF2'
         0        4096    1  hole
      4096        4096    0  data
      8192      188416    1  hole
    196608       12288    0  data
    208896      315392    1  hole
    524288        4096    0  data
    528384      520192    1  hole
EOF2
    dirtybitmap map $mode.bitmaps off > map
    expect map <<'EOF2'
         0        4096    1  hole
      4096        4096    0  data
      8192      188416    1  hole
    196608       12288    0  data
    208896      839680    1  hole
EOF2
done

# A coarse run on the old file, killed, then a start on another boot:
# the shadows made from the old bits are there, so the recovered b0
# has the coarse granules (64K) of the old bits and of the new write;
# the disabled bitmap keeps its exact bits.
cp "$old" kill.bitmaps
chmod u+w kill.bitmaps
start_nbdkit_child -P "$PWD/pid" -U "$PWD/sock" --filter="$FILTER" \
                   null 1M bitmap-file=kill.bitmaps durability=coarse \
                   coarse-granularity=64K
nbdsh -u "nbd+unix:///?socket=$PWD/sock" -c "h.pwrite(b'x', 786432)"
kill9 $nbdkit_pid
rebooted dirtybitmap info kill.bitmaps > info
cat info
grep -F "durability=coarse, machine restarted since" info
grep -F "dirty because the machine stopped: 176128 (172 KiB), from the coarse shadow" info
rebooted dirtybitmap map kill.bitmaps b0 > map
expect map <<'EOF2'
         0       65536    0  data
     65536      131072    1  hole
    196608       65536    0  data
    262144      524288    1  hole
    786432       65536    0  data
    851968      196608    1  hole
EOF2
rebooted dirtybitmap map kill.bitmaps off > map
expect map <<'EOF2'
         0        4096    1  hole
      4096        4096    0  data
      8192      188416    1  hole
    196608       12288    0  data
    208896      839680    1  hole
EOF2
