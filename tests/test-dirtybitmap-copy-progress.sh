#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# -p draws a progress bar on a terminal (percent of the dirty bytes and
# the rate) and changes nothing else: without a terminal the copy and
# its summary line on stdout are the same as without -p.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires script --version

size=$((4 * 1024 * 1024))
yes | head -c $size > disk.img
cp disk.img backup.img
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=add \
       --run 'nbdsh -u "$uri" -c "
h.pwrite(b\"a\" * 300000, 100000)
h.zero(65536, 1 << 20)
"'
summary="copied 393216 bytes, zeroed 65536 bytes, 2 ranges, [0-9.]+ seconds"

# Not a terminal: the summary on stdout, nothing on stderr (without
# libnbd's debug messages, which make check turns on).
nbdkit -U - -r --filter="$FILTER" file disk.img bitmap=b0 \
       --run 'env -u LIBNBD_DEBUG dirtybitmap copy -p "$uri" backup.img' \
       > out 2> err
cat out err
grep -Ex "$summary" out
test "$(wc -l < out)" -eq 1
test ! -s err
cmp disk.img backup.img

# A terminal (script(1) gives the copy one): the bar ends at 100%.
nbdkit -U - -r --filter="$FILTER" file disk.img bitmap=b0 \
       --run 'env -u LIBNBD_DEBUG \
              script -qec "dirtybitmap copy -p \"$uri\" backup.img" \
              /dev/null' > tty.out
tr '\r' '\n' < tty.out | cat -v
tr '\r' '\n' < tty.out |
    grep -E '^100% \[\*{40}\] [0-9.]+ [KMGT]?i?B/s$'
tr '\r' '\n' < tty.out | grep -Ex "$summary"
cmp disk.img backup.img
