#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Messages that must name the right thing: merge-file= naming the
# bitmap file itself merges within it (it is not "in use by another
# process": it is this one); an empty bitmap name is named as such;
# info prints a name that holds newlines or escape codes escaped, so
# that it cannot fake lines.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

truncate -s 1M disk.img
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=add \
       granularity=4K --run 'nbdsh -u "$uri" -c "h.pwrite(b\"x\", 8192)"'
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b1 action=add \
       action=merge:b0 merge-file="$PWD/disk.img.bitmaps" --run true 2> err
cat err
if grep -F "in use" err; then exit 1; fi
dirtybitmap map disk.img.bitmaps b1 > map
expect map <<'EOF2'
         0       65536    0  data
     65536      983040    1  hole
EOF2

tool_fails 'dirtybitmap: action add failed: the bitmap name "" must be 1 to 1023 bytes' \
           bitmap --add disk.img.bitmaps ""
if nbdkit -U - --filter="$FILTER" file disk.img bitmap= action=add \
          --run true 2> err; then
    exit 1
fi
grep -F "dirtybitmap: bitmap=: the name must be 1 to 1023 bytes" err

dirtybitmap bitmap --add disk.img.bitmaps "$(printf 'evil\nname: fake\033[2J\\')"
dirtybitmap info disk.img.bitmaps > info
cat info
grep -Fx '        name: evil\nname: fake\x1b[2J\\' info
if grep -x 'name: fake.*' info; then exit 1; fi
test "$(grep -c 'name: ' info)" = 3
