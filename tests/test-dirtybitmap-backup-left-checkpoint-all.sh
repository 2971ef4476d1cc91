#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A leftover of a killed backup of several disks, made by hand: its
# new checkpoint on every disk.  The backup is refused, nothing
# changes, and the refusal names the exact commands to run; once they
# have run, the backup succeeds and each target equals its disk.
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/machine-lib.sh"
three_backed_up
for n in $disks; do dirtybitmap bitmap --add --control $n.ctl c2; done
states $disks > before
backup_fails left.err "${argv[@]}" --incremental c1 --checkpoint c2 \
             --remove-incremental
states $disks > after
diff -u before after
remedy left.err c2
backup "${argv[@]}" --incremental c1 --checkpoint c2 \
            --remove-incremental
same_disks $disks
bitmaps_are c2 $disks
