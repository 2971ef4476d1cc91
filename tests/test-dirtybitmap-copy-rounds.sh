#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Full then incremental copies to a file over several rounds of seeded
# random writes, zeroes and trims through the filter, with a new
# checkpoint (action=clear) after each: the backup is byte-identical
# to the disk every time, and the summary adds up to the dirty bytes.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

size=$((8 * 1024 * 1024 + 3 * 512))
yes | head -c $size > disk.img
export size

# dirty_bytes: what "dirtybitmap info" says for b0.
dirty_bytes ()
{
    dirtybitmap info disk.img.bitmaps > info
    sed -n 's/^ *dirty bytes: \([0-9]*\)\( (.*)\)\{0,1\}$/\1/p' info
}

# The full copy creates backup.img; the bitmap starts recording.
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=add \
       --run 'dirtybitmap copy --full "$uri" backup.img' > full.out
cat full.out
grep -Ex "copied $size bytes, zeroed 0 bytes, 1 range, [0-9.]+ seconds" \
     full.out
cmp disk.img backup.img
test "$(dirty_bytes)" -eq 0

# Each round: a new checkpoint, seeded changes, an incremental copy
# with different request shapes.
options=("" "--requests 1" "--connections 2 --request-size 4K"
         "--requests 64 --request-size 32M" "-p")
for round in 1 2 3 4 5; do
    export round
    nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=clear \
           --run 'nbdsh -u "$uri" -c "
import os, random
random.seed(int(os.environ[\"round\"]))
size = int(os.environ[\"size\"])
for i in range(25):
    n = random.choice([1, 512, 4096, 65536, 65537, 200000])
    off = random.randrange(size - n)
    k = random.randrange(4)
    if k == 0:
        h.zero(n, off)
    elif k == 1:
        h.trim(n, off)
    else:
        h.pwrite(random.randbytes(n), off)
"'
    dirty=$(dirty_bytes)
    test "$dirty" -gt 0
    test "$dirty" -lt $size
    if cmp -s disk.img backup.img; then
        echo "$0: round $round changed nothing"
        exit 1
    fi

    nbdkit -U - -r --filter="$FILTER" file disk.img bitmap=b0 \
           --run "dirtybitmap copy ${options[round - 1]} \"\$uri\" backup.img" \
           > copy.out
    cat copy.out
    cmp disk.img backup.img

    # copied + zeroed = the dirty bytes; the ranges are what the map
    # shows as dirty.
    read copied zeroed ranges < <(sed -n \
        's/^copied \([0-9]*\) bytes, zeroed \([0-9]*\) bytes, \([0-9]*\) ranges\{0,1\}, [0-9.]* seconds$/\1 \2 \3/p' \
        copy.out)
    test "$((copied + zeroed))" -eq "$dirty"
    map_of -r --filter="$FILTER" file disk.img bitmap=b0 > map
    test "$ranges" -eq "$(awk '$3 != 1' map | wc -l)"
done
