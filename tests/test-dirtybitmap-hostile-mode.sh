#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A bitmap file is created with the disk's permission bits (0600 when
# there is no disk file), whatever the umask, and never
# world-writable: the map of what changed is as private as the disk.
# A symbolic link is never written through.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

mode () { stat -c %a "$1"; }

umask 000
truncate -s 1M private.img shared.img
chmod 0600 private.img
chmod 0666 shared.img
nbdkit -U - --filter="$FILTER" file private.img bitmap=b0 action=add --run true
test "$(mode private.img.bitmaps)" = 600
nbdkit -U - --filter="$FILTER" file shared.img bitmap=b0 action=add --run true
test "$(mode shared.img.bitmaps)" = 664
dirtybitmap bitmap --add --size 1M tool.bitmaps b0
test "$(mode tool.bitmaps)" = 600
nbdkit -U - --filter="$FILTER" memory 1M bitmap-file="$PWD/mem.bitmaps" \
       bitmap=b0 action=add --run true
test "$(mode mem.bitmaps)" = 600

# Symbolic links: refused for writing, by the filter and the tool.
ln -s private.img.bitmaps link.bitmaps
sum=$(md5sum < private.img.bitmaps)
if nbdkit -U - --filter="$FILTER" file private.img \
          bitmap-file="$PWD/link.bitmaps" bitmap=b0 --run true 2> err; then
    echo "$0: a symbolic link was served"; exit 1
fi
cat err
grep -F "dirtybitmap: $PWD/link.bitmaps: is a symbolic link: refused (give the path of the file itself)" err
tool_fails "dirtybitmap: link.bitmaps: is a symbolic link: refused" \
           bitmap --add link.bitmaps b1
test "$(md5sum < private.img.bitmaps)" = "$sum"
# Reading through one is harmless.
dirtybitmap info link.bitmaps > info
grep -F "name: b0" info
