#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The base of an incremental backup of several disks missing on one
# disk (b): never an incremental from a base that is not there.  b is
# resynced (read whole, compared with the checksums of its last
# backup), a and c are incrementals, and each target equals its disk.
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/machine-lib.sh"
three_backed_up
dirtybitmap bitmap --remove --control b.ctl c1
backup "${argv[@]}" --incremental c1 --checkpoint c2 \
       --remove-incremental --output=json > left.out 2> left.err
cat left.out left.err
grep -F "dirtybitmap: backup: disk b: bitmap c1 is missing: a resync" left.err
if grep -E "disk (a|c):" left.err; then exit 1; fi
modes_are left.out "a=incremental b=resync c=incremental"
same_disks $disks
bitmaps_are c2 $disks
