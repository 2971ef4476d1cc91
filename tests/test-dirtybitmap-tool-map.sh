#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap map: the dirty ranges of a bitmap, exactly as nbdinfo
# --map (and --map --json) prints the filter's extents on a disk with
# no zero ranges; where a dirty range reads as zeroes the filter says
# "zero" and the tool, which cannot see the disk, says "data".
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

oracle="$abs_top_srcdir/tests/dirty-ranges.py"
edit="$abs_top_srcdir/tests/bmfile-edit.py"
bm=disk.img.bitmaps

# Not a multiple of the granularity: the last range ends at the end
# of the disk.
size=$((1024 * 1024 + 1000))
yes | head -c $size > disk.img
dirtybitmap bitmap --add -g 4K --size $size $bm b0
nbdkit -U - --filter="$FILTER" file disk.img \
       --run 'nbdsh -u "$uri" -c "h.pwrite(b\"x\" * 5000, 0)" \
                              -c "h.pwrite(b\"x\", 500000)" \
                              -c "h.pwrite(b\"x\", h.get_size() - 1)"'
dirtybitmap map $bm b0 > tool.map
expect tool.map <<'EOF2'
         0        8192    0  data
      8192      491520    1  hole
    499712        4096    0  data
    503808      544768    1  hole
   1048576        1000    0  data
EOF2
dirtybitmap map --output=json $bm b0 > tool.json
expect tool.json <<'EOF2'
[
{ "offset": 0, "length": 8192, "type": 0, "description": "data"},
{ "offset": 8192, "length": 491520, "type": 1, "description": "hole"},
{ "offset": 499712, "length": 4096, "type": 0, "description": "data"},
{ "offset": 503808, "length": 544768, "type": 1, "description": "hole"},
{ "offset": 1048576, "length": 1000, "type": 0, "description": "data"}
]
EOF2
dirtybitmap map --output=human $bm b0 > human.map
cmp human.map tool.map
dirtybitmap map $bm b0 --output json > after.json
cmp after.json tool.json

# The filter's map of the same bitmap, text and JSON: identical.
map_of -r --filter="$FILTER" file disk.img bitmap=b0 > filter.map
cmp tool.map filter.map
nbdkit -U - -r --filter="$FILTER" file disk.img bitmap=b0 \
       --run 'nbdinfo --map --json "$uri"' > filter.json
cmp tool.json filter.json

# More bitmaps, more writes, the 64K default granularity: still equal,
# for every bitmap, disabled ones too.
dirtybitmap bitmap --add $bm b1
dirtybitmap bitmap --add -g 512 $bm b2
nbdkit -U - --filter="$FILTER" file disk.img \
       --run 'nbdsh -u "$uri" -c "
import random
random.seed(1)
for i in range(12):
    h.pwrite(b\"y\" * random.randrange(1, 3000),
             random.randrange(h.get_size() - 3000))
"'
dirtybitmap bitmap --disable $bm b1
for b in b0 b1 b2; do
    dirtybitmap map $bm $b > tool.$b
    map_of -r --filter="$FILTER" file disk.img bitmap=$b > filter.$b
    cmp tool.$b filter.$b
    test "$(grep -c data tool.$b)" -ge 3
done

# Where they differ: the filter reports dirty ranges that read as
# zeroes as "zero"; the file alone cannot tell, so the tool says
# "data".  The dirty ranges are the same.
dirtybitmap bitmap --clear $bm b0
nbdkit -U - --filter="$FILTER" file disk.img \
       --run 'nbdsh -u "$uri" -c "h.zero(8192, 16384)" \
                              -c "h.pwrite(b\"z\", 40000)"'
dirtybitmap map $bm b0 > tool.zero
expect tool.zero <<'EOF2'
         0       16384    1  hole
     16384        8192    0  data
     24576       12288    1  hole
     36864        4096    0  data
     40960     1008616    1  hole
EOF2
map_of -r --filter="$FILTER" file disk.img bitmap=b0 > filter.zero
expect filter.zero <<'EOF2'
         0       16384    1  hole
     16384        8192    2  zero
     24576       12288    1  hole
     36864        4096    0  data
     40960     1008616    1  hole
EOF2
"$oracle" map < tool.zero > tool.ranges
"$oracle" map < filter.zero > filter.ranges
cmp tool.ranges filter.ranges

# A disk of 0 bytes, or of a size still unknown: no ranges at all, as
# nbdinfo --map prints for an empty disk.
dirtybitmap bitmap --add --size 0 zero.bitmaps b0
dirtybitmap map zero.bitmaps b0 > zero.map
test ! -s zero.map
dirtybitmap map --output=json zero.bitmaps b0 > zero.json
printf '[\n\n]\n' | cmp - zero.json
nbdkit -U - --filter="$FILTER" file disk.img bitmap-file=unsized.bitmaps \
       bitmap=b0 action=add --run true
dirtybitmap map unsized.bitmaps b0 > unsized.map
test ! -s unsized.map

# Errors.
tool_fails "dirtybitmap: bitmap b9 not found in $bm" map $bm b9
tool_fails "dirtybitmap: nosuch.bitmaps: No such file or directory" map \
      nosuch.bitmaps b0
tool_fails "dirtybitmap: disk.img: not a dirtybitmap file (bad magic)" map \
      disk.img b0
cp $bm crash.bitmaps
python3 "$edit" crash.bitmaps set flags 3
python3 "$edit" crash.bitmaps set boot_id 00000000-0000-0000-0000-000000000000
sum=$(md5sum < crash.bitmaps)
tool_fails "dirtybitmap: bitmap b0 is inconsistent: it was recording when the machine stopped uncleanly, when its file could not be synced, or when the disk was written without the filter, so it may have missed changes; remove it and take a full backup" map \
      crash.bitmaps b0
# A disabled bitmap did not record then: still consistent, and map
# only reads.
dirtybitmap map crash.bitmaps b1 > crash.b1
cmp crash.b1 tool.b1
test "$(md5sum < crash.bitmaps)" = "$sum"
