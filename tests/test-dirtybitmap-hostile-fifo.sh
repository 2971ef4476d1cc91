#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Anything but a regular file is refused at once, without blocking: a
# FIFO in place of a bitmap file (or of a merge source) would hang a
# reader forever, and nbdkit with it while holding the lock.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires mkfifo --version

truncate -s 1M disk.img
dirtybitmap bitmap --add --size 1M real.bitmaps b0
mkfifo fifo.bitmaps

# Each must end within seconds (timeout exits 124), with the message.
t () { timeout 10 "$@"; }
for args in "info fifo.bitmaps" "info -U fifo.bitmaps" \
            "map fifo.bitmaps b0" "map -U fifo.bitmaps b0" \
            "bitmap --merge b0 -b fifo.bitmaps real.bitmaps b0" \
            "bitmap --add fifo.bitmaps b1"; do
    r=0
    t dirtybitmap $args 2> err || r=$?
    cat err
    test $r = 1
    grep -F "dirtybitmap: fifo.bitmaps: not a regular file" err
done
r=0
t dirtybitmap check fifo.bitmaps 2> err || r=$?
cat err
test $r = 1
grep -F "dirtybitmap: fifo.bitmaps: not a regular file" err

r=0
t nbdkit -U - --filter="$FILTER" file disk.img bitmap-file=real.bitmaps \
  bitmap=b0 action=merge:b0 merge-file=fifo.bitmaps --run true 2> err ||
    r=$?
cat err
test $r = 1
grep -F "dirtybitmap: $PWD/fifo.bitmaps: not a regular file" err

r=0
t nbdkit -U - --filter="$FILTER" file disk.img bitmap-file=fifo.bitmaps \
  bitmap=b0 --run true 2> err || r=$?
cat err
test $r = 1
grep -F "dirtybitmap: $PWD/fifo.bitmaps: not a regular file" err
