#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A leftover of a killed backup of several disks, made by hand: its
# new checkpoint on one disk only.  It is removed, the disk says so,
# and the backup goes on; each target equals its disk.
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/machine-lib.sh"
three_backed_up
dirtybitmap bitmap --add --control a.ctl c2
backup "${argv[@]}" --incremental c1 --checkpoint c2 \
            --remove-incremental 2> left.err
cat left.err
grep -Fx "dirtybitmap: backup: disk a: removed checkpoint c2 left by an incomplete backup" left.err
if grep -E "disk [bc]: removed" left.err; then exit 1; fi
same_disks $disks
bitmaps_are c2 $disks
