#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A leftover of a killed backup of several disks, made by hand: its
# new checkpoint on every disk.  The backup is refused, nothing
# changes, and the refusal names the exact commands to run; once they
# have run, the backup succeeds and each target equals its disk.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires python3 -c 'import nbd'
source "$abs_top_srcdir/tests/machine-lib.sh"

three_backed_up
new=c2
write_some 2 $disks
for n in $disks; do dirtybitmap bitmap --add --control $n.ctl $new; done
states $disks > before
r=0
backup "${argv[@]}" --incremental $base --checkpoint $new \
            --remove-incremental > left.out 2> left.err || r=$?
cat left.out left.err
test $r = 1
states $disks > after
diff -u before after
remedy left.err $new
backup "${argv[@]}" --incremental $base --checkpoint $new \
            --remove-incremental
same_disks $disks
bitmaps_are $new $disks
