#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A run that wrote nothing through the filter still records the disk
# at its clean stop, so a write made without the filter after it is
# found: after a crash, and after a bitmap added live.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
source "$abs_top_srcdir/tests/identity-lib.sh"

# A crash in a run that wrote, then a run that only reads.
through 0 bitmap=b0 action=add
start_nbdkit_child -P pid -U "$PWD/sock" --filter="$FILTER" file disk.img \
                   bitmap=b0
nbdsh -u "nbd+unix:///?socket=$PWD/sock" -c 'h.pwrite(b"w" * 512, 65536)'
kill -9 $nbdkit_pid
wait $nbdkit_pid || :
rm -f sock
idle bitmap=b0
trusted b0
outside 100
found b0

# A bitmap added live in a run that only reads, the first of its file.
rm disk.img.bitmaps
start_nbdkit_child -P pid -U "$PWD/sock" --filter="$FILTER" file disk.img \
                   control="$PWD/ctl"
nbdsh -u "nbd+unix:///?socket=$PWD/sock" -c 'h.pread(512, 0)'
dirtybitmap bitmap --add --control "$PWD/ctl" l1
kill_nbdkit $nbdkit_pid
outside 7
found l1
