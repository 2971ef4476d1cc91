#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Writes that bypass the filter.  Where the plugin serves a regular
# file, a clean stop records what identifies the disk's state (its size
# and modification time); a start that finds it changed marks every
# enabled bitmap inconsistent and says why: the next incremental would
# miss those writes.  Stops and starts without such writes raise
# nothing.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

truncate -s 1M disk.img
w () {
    nbdkit -U - --filter="$FILTER" file disk.img "$@" \
           --run 'nbdsh -u "$uri" -c "h.pwrite(b\"w\", 4096)"'
}
w bitmap=b0 action=add
dirtybitmap bitmap --add -g 4K disk.img.bitmaps frozen
dirtybitmap bitmap --disable disk.img.bitmaps frozen

# No false alarm: idle starts, read-only starts, writes through the
# filter, a copy that keeps the time.
sleep 1
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 --run true
nbdkit -U - -r --filter="$FILTER" file disk.img bitmap=b0 \
       --run 'nbdinfo --map "$uri"'
w bitmap=b0
w bitmap=b0 action=disable
w bitmap=b0 action=enable
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 --run true 2> err
cat err
if grep -F "written without the filter" err; then exit 1; fi
dirtybitmap info disk.img.bitmaps > info
test "$(grep -c 'consistent: true' info)" = 2

# A write that bypasses it.
sleep 1
printf x | dd of=disk.img bs=1 seek=500000 conv=notrunc status=none
if nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 --run true \
          2> err; then
    echo "$0: served after a write made without the filter"; exit 1
fi
cat err
grep -F "dirtybitmap: $PWD/disk.img was written without the filter since its bitmaps last recorded it (its size or modification time changed): every enabled bitmap is now inconsistent: take a full backup" err
grep -F "dirtybitmap: bitmap b0 is inconsistent" err
dirtybitmap info disk.img.bitmaps > info
grep -A4 'name: b0' info | grep -F "consistent: false"
grep -A4 'name: frozen' info | grep -F "consistent: true"

# Start again from a full backup: a new bitmap records, and the next
# start does not condemn it.
w bitmap=b1 action=add granularity=4K
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b1 \
       --run 'nbdinfo --map "$uri"' > map
expect map <<'EOF2'
         0        4096    1  hole
      4096        4096    0  data
      8192     1040384    1  hole
EOF2

# Growing the file outside is a write too.
sleep 1
truncate -s 2M disk.img
if nbdkit -U - --filter="$FILTER" file disk.img bitmap=b1 --run true \
          2> err; then
    echo "$0: served after the file grew outside the filter"; exit 1
fi
grep -F "was written without the filter" err
