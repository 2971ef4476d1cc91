#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What a careless start would lose silently is said at normal
# verbosity: a bitmap file that was deleted (recreated empty, so every
# change since is lost to the bitmaps), a writable server with nothing
# recording, and actions that throw recorded changes away.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

truncate -s 1M disk.img
bm="$PWD/disk.img.bitmaps"

# The file was deleted: the start fails, saying so, and leaves none.
if nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 --run true \
          2> err; then
    echo "$0: served with a deleted bitmap file"; exit 1
fi
cat err
grep -F "dirtybitmap: bitmap b0 not found: $bm does not exist (deleted?): every change since it was last written is lost to the bitmaps: take a full backup, and start recording with action=add" err
test ! -e "$bm"

# Nothing recording on a writable server: a warning, not only with -v.
nbdkit -U - --filter="$FILTER" file disk.img --run true 2> err
cat err
grep -F "nbdkit: dirtybitmap: warning: $bm has no recording bitmap: writes to this disk are not tracked" err
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=add \
       action=disable --run true 2> err
grep -F "has no recording bitmap" err
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=enable \
       --run true 2> err
if grep -F "has no recording bitmap" err; then exit 1; fi
nbdkit -U - -r --filter="$FILTER" file disk.img --run true 2> err
if grep -F "has no recording bitmap" err; then exit 1; fi

# Actions that discard: said at every start that runs them.
for a in clear remove; do
    nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=$a \
           --run true 2> err
    cat err
    grep -F "nbdkit: dirtybitmap: action $a on bitmap b0: the changes it recorded are discarded" err
done
