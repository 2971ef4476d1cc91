#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap check of a file that is missing or not a regular file:
# exit 1 and a message naming it.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

# Files that cannot be read.
r=0; dirtybitmap check nosuch.bitmaps 2> err || r=$?
test $r = 1
grep -F "dirtybitmap: nosuch.bitmaps: No such file or directory" err
r=0; dirtybitmap check . 2> err || r=$?
test $r = 1
grep -F "dirtybitmap: .: not a regular file" err
