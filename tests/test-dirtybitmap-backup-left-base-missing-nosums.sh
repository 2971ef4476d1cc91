#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The base of an incremental backup of several disks missing on one
# disk (b), and the checksums of b's last backup missing too: b is
# copied in full, a and c are incrementals, and each target equals its
# disk.
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/machine-lib.sh"
three_backed_up
rm b.c1.sums
dirtybitmap bitmap --remove --control b.ctl c1
backup "${argv[@]}" --incremental c1 --checkpoint c2 \
       --remove-incremental --output=json > left.out 2> left.err
cat left.out left.err
grep -F "disk b:" left.err
modes_are left.out "a=incremental b=full c=incremental"
same_disks $disks
bitmaps_are c2 $disks
