#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Another backup's view open on one disk (c) of a backup of several
# disks: refused ("another backup is running"), and nothing changes;
# once that view has ended, the backup succeeds, and leaves no server
# paused or with a view.
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/machine-lib.sh"
three_backed_up
python3 "$abs_top_srcdir/tests/control.py" ok c.ctl \
        '{"execute": "backup-begin", "arguments": {"name": "other"}}'
states $disks > before
backup_fails left.err "${argv[@]}" --incremental c1 --checkpoint c2
grep -F "another backup is running" left.err
states $disks > after
diff -u before after
python3 "$abs_top_srcdir/tests/control.py" ok c.ctl \
        '{"execute": "backup-end", "arguments": {"name": "other"}}'
backup "${argv[@]}" --incremental c1 --checkpoint c2 \
            --remove-incremental
same_disks $disks
no_leftovers $disks
bitmaps_are c2 $disks
