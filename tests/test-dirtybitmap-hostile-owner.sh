#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A bitmap file owned by another user (say one planted in a shared
# directory) is refused for writing by the filter and the tool; it
# may still be read.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires test "$(id -u)" = 0
requires id nobody

truncate -s 1M disk.img
dirtybitmap bitmap --add --size 1M disk.img.bitmaps b0
chmod 0666 disk.img.bitmaps
chown nobody disk.img.bitmaps
uid=$(id -u nobody)
sum=$(md5sum < disk.img.bitmaps)
if nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 --run true \
          2> err; then
    echo "$0: a file owned by nobody was served"; exit 1
fi
cat err
grep -F "dirtybitmap: $PWD/disk.img.bitmaps: owned by uid $uid, neither this user (uid 0) nor root: refused (a file planted by another user?)" err
tool_fails "dirtybitmap: disk.img.bitmaps: owned by uid $uid, neither this user (uid 0) nor root: refused" \
           bitmap --add disk.img.bitmaps b1
test "$(md5sum < disk.img.bitmaps)" = "$sum"
dirtybitmap info disk.img.bitmaps > info
grep -F "name: b0" info
