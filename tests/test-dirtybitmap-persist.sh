#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Bits survive a clean stop (SIGTERM) and a kill -9 of nbdkit; a kill
# -9 (same boot) marks nothing inconsistent.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

yes | head -c 4M > disk.img
sock="$PWD/sock1"
uri="nbd+unix:///?socket=$sock"

start_nbdkit -P "$PWD/pid1" -U "$sock" --filter="$FILTER" \
             file disk.img bitmap=b0 action=add granularity=4K
nbdsh -u "$uri" -c 'h.pwrite(b"a" * 100, 8192)'
kill_nbdkit "$(cat pid1)"
dirtybitmap info disk.img.bitmaps > info1
grep -F "state: closed cleanly" info1
dirtybitmap map disk.img.bitmaps b0 > map1
expect map1 <<'EOF2'
         0        8192    1  hole
      8192        4096    0  data
     12288     4182016    1  hole
EOF2

# kill -9 right after the write completes: the bit is in the kernel.
sock="$PWD/sock2"
uri="nbd+unix:///?socket=$sock"
start_nbdkit -P "$PWD/pid2" -U "$sock" --filter="$FILTER" \
             file disk.img bitmap=b0
nbdsh -u "$uri" -c 'h.pwrite(b"b", 1048576)' -c 'h.zero(4096, 2097152)'
kill -9 "$(cat pid2)"
wait_gone "$(cat pid2)"
dirtybitmap info disk.img.bitmaps > info2
cat info2
grep -F "state: not closed cleanly" info2
grep -F "same boot" info2
grep -F "consistent: true" info2
grep -F "dirty bytes: 12288" info2

# The next run opens it without complaint and answers from it; a
# read-only one leaves the file as it is.
sum=$(md5sum < disk.img.bitmaps)
map_of -r --filter="$FILTER" file disk.img bitmap=b0 > map2
expect map2 <<'EOF2'
         0        8192    1  hole
      8192        4096    0  data
     12288     1036288    1  hole
   1048576        4096    0  data
   1052672     1044480    1  hole
   2097152        4096    2  zero
   2101248     2093056    1  hole
EOF2
test "$(md5sum < disk.img.bitmaps)" = "$sum"
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 --run true
dirtybitmap info disk.img.bitmaps > info3
grep -F "state: closed cleanly" info3
grep -F "consistent: true" info3
