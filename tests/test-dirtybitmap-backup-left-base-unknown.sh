#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# An incremental backup of several disks from a base that no disk has
# and no checksums name (a wrong name): refused, naming it, and nothing
# changes; the backup from the right base then succeeds.
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/machine-lib.sh"
three_backed_up
states $disks > before
r=0
backup "${argv[@]}" --incremental nosuch --checkpoint c2 \
       > left.out 2> left.err || r=$?
cat left.out left.err
test $r = 1
grep -F nosuch left.err
states $disks > after
diff -u before after
backup "${argv[@]}" --incremental c1 --checkpoint c2 \
       --remove-incremental
same_disks $disks
bitmaps_are c2 $disks
