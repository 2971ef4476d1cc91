#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap resize --disk LINK, LINK a symlink to the disk: followed,
# as qemu-img resize and nbdkit's file plugin follow it.  The disk
# grows, the bitmaps with it, and the next start (of the disk by its
# own name) trusts them.  A dangling symlink is named, with the
# problem.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

truncate -s 1M disk.img
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=add \
       --run 'nbdsh -u "$uri" -c "h.pwrite(b\"a\" * 512, 0)"'
ln -s disk.img link
dirtybitmap resize --disk link disk.img.bitmaps +1M > out
grep -Fx "Image resized." out
test -L link
test "$(stat -c %s disk.img)" = 2097152
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 \
       --run 'nbdinfo --map "$uri"' > map 2> err
cat err
if grep -F "without the filter" err; then
    echo "$0: the resize through the symlink was taken for a write made without the filter"
    exit 1
fi
expect map <<'EOF2'
         0        4096    0  data
      4096       61440    2  zero
     65536      983040    1  hole
   1048576     1048576    2  zero
EOF2

ln -s nowhere.img dangling
tool_fails -k disk.img -k disk.img.bitmaps \
           "dirtybitmap: resize: dangling: No such file or directory" \
           resize --disk dangling disk.img.bitmaps +1M
