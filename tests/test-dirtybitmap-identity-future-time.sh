#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A disk whose modification time is in the future (touch -d, a clock
# set back) cannot be recorded: a write made once the clock reaches
# that time could keep it.  A start, and the tool, say so, record
# nothing (without waiting for the clock), and the next start does not
# trust the bitmaps.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
source "$abs_top_srcdir/tests/identity-lib.sh"

msg="disk.img: its modification time, $(date -u -d '+1 hour' +%Y-%m-%d)"
through 0 bitmap=b0 action=add
touch -d '+1 hour' disk.img

# A start that adds b1 (it finds b0's disk changed, too).
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b1 action=add --run true \
       2> start.err
cat start.err
grep -F "dirtybitmap: $PWD/$msg" start.err
grep -F "UTC, is in the future (the clock says " start.err
grep -F "a later write could keep it, so the disk is not recorded, and the next start will find every enabled bitmap inconsistent" start.err
if nbdkit -U - --filter="$FILTER" file disk.img bitmap=b1 --run true \
          2> next.err; then
    cat next.err
    echo "$0: b1 served, though its disk was not recorded"
    exit 1
fi
cat next.err
grep -F "whether $PWD/disk.img was written without the filter cannot be told: its bitmap file $PWD/disk.img.bitmaps has no record of the disk (made by an older version, or by a run that could not record it)" next.err
dirtybitmap info disk.img.bitmaps > info
grep -A4 'name: b1$' info | grep -F "consistent: false"

# The tool, adding b2 to a file that records nothing yet.
rm disk.img.bitmaps
dirtybitmap bitmap --add --size 8M disk.img.bitmaps b2 2> add.err
cat add.err
grep -F "dirtybitmap: warning: $msg" add.err
dirtybitmap info disk.img.bitmaps > info 2> info.err
cat info info.err
grep -A4 'name: b2$' info | grep -F "consistent: false"
grep -F "cannot be told" info.err
