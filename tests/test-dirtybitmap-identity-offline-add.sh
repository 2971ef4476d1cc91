#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A bitmap added offline, between a run that only read and a write
# made without the filter, does not trust the disk it did not see.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
source "$abs_top_srcdir/tests/identity-lib.sh"

idle bitmap-file=disk.img.bitmaps
dirtybitmap bitmap --add disk.img.bitmaps o1
outside 3
found o1

# The tool, offline, judges the disk as a start would: info reports
# the bitmap inconsistent (and says why), map refuses it.
rm disk.img.bitmaps
idle bitmap-file=disk.img.bitmaps
dirtybitmap bitmap --add disk.img.bitmaps o2
outside 5
dirtybitmap info disk.img.bitmaps > info 2> info.err
cat info info.err
grep -A4 "name: o2\$" info | grep -F "consistent: false"
grep -F "dirtybitmap: disk.img was written without the filter since its bitmaps last recorded it" info.err
if dirtybitmap map disk.img.bitmaps o2 2> map.err; then
    echo "$0: map listed a bitmap whose disk was written without it"
    exit 1
fi
grep -F "bitmap o2 is inconsistent" map.err
# With the disk named by --disk the same; with a disk unchanged, none.
cp -p disk.img.bitmaps other.bitmaps
dirtybitmap info --disk disk.img other.bitmaps 2> info.err
grep -F "was written without the filter" info.err
