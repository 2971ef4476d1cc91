#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A read-only server (-r) with no actions never writes the bitmap file
# (it stays byte-identical), serves one it may only read, and shares it
# with other read-only servers (a shared lock); a writer is told it is
# in use.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

truncate -s 1M disk.img
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=add \
       --run 'nbdsh -u "$uri" -c "h.pwrite(b\"x\", 70000)"'
sum=$(md5sum < disk.img.bitmaps)
before=$(stat -c %Y.%y disk.img.bitmaps)
sleep 1

# Two read-only servers at once, both answering.
start_nbdkit -P "$PWD/pid1" -U "$PWD/sock1" -r --filter="$FILTER" \
             file disk.img bitmap=b0
start_nbdkit -P "$PWD/pid2" -U "$PWD/sock2" -r --filter="$FILTER" \
             file disk.img bitmap=b0
for s in sock1 sock2; do
    nbdinfo --map "nbd+unix:///?socket=$PWD/$s" > map
    expect map <<'EOF2'
         0       65536    1  hole
     65536        4096    2  zero
     69632        4096    0  data
     73728       57344    2  zero
    131072      917504    1  hole
EOF2
done
if nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 --run true \
          2> err; then
    echo "$0: a writer started beside read-only servers"; exit 1
fi
grep -F "dirtybitmap: $PWD/disk.img.bitmaps: in use by another process" err
kill_nbdkit "$(cat pid1)"
kill_nbdkit "$(cat pid2)"
test "$(md5sum < disk.img.bitmaps)" = "$sum"
test "$(stat -c %Y.%y disk.img.bitmaps)" = "$before"

# A file that may only be read (a read-only mount).
if unshare -m true 2>/dev/null; then
    mkdir ro
    cp -p disk.img disk.img.bitmaps ro/
    unshare -m sh -c '
        mount --bind ro ro && mount -o remount,bind,ro ro &&
        exec nbdkit -U - -r --filter="$FILTER" file ro/disk.img bitmap=b0 \
             --run "nbdinfo --map \"\$uri\""' > map
    expect map <<'EOF2'
         0       65536    1  hole
     65536        4096    2  zero
     69632        4096    0  data
     73728       57344    2  zero
    131072      917504    1  hole
EOF2
fi

# A file that has never seen its disk: nothing was recorded, so all of
# it is clean, and the file stays unsized.
nbdkit -U - --filter="$FILTER" memory 1M bitmap-file="$PWD/fresh.bitmaps" \
       bitmap=b0 action=add --run true
sum=$(md5sum < fresh.bitmaps)
nbdkit -U - -r --filter="$FILTER" file disk.img \
       bitmap-file="$PWD/fresh.bitmaps" bitmap=b0 \
       --run 'nbdinfo --map "$uri"' > map
expect map <<'EOF2'
         0     1048576    1  hole
EOF2
test "$(md5sum < fresh.bitmaps)" = "$sum"
dirtybitmap info fresh.bitmaps > info
grep -F "disk size: unknown" info

# -r with a missing file: it is not created.
if nbdkit -U - -r --filter="$FILTER" file disk.img \
          bitmap-file="$PWD/none.bitmaps" --run true 2> err; then
    echo "$0: a read-only server started without its file"; exit 1
fi
grep -F "dirtybitmap: a read-only server (-r) does not create the bitmap file" err
test ! -e none.bitmaps
