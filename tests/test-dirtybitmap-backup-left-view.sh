#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Another backup's view open on one disk (c) of a backup of several
# disks: refused ("another backup is running"), and nothing changes;
# once that view has ended, the backup succeeds, and leaves no server
# paused or with a view.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires python3 -c 'import nbd'
source "$abs_top_srcdir/tests/machine-lib.sh"

three_backed_up
new=c2
write_some 2 $disks
python3 "$abs_top_srcdir/tests/control.py" ok c.ctl \
        '{"execute": "backup-begin", "arguments": {"name": "other"}}'
states $disks > before
r=0
backup "${argv[@]}" --incremental $base --checkpoint $new \
            > left.out 2> left.err || r=$?
cat left.out left.err
test $r = 1
grep -F "another backup is running" left.err
states $disks > after
diff -u before after
python3 "$abs_top_srcdir/tests/control.py" ok c.ctl \
        '{"execute": "backup-end", "arguments": {"name": "other"}}'
backup "${argv[@]}" --incremental $base --checkpoint $new \
            --remove-incremental
same_disks $disks
no_leftovers $disks
bitmaps_are $new $disks
