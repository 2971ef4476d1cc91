#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap backup --freeze-command, with a freeze command that
# hangs: it is killed past --freeze-timeout 1, the thaw command runs,
# the backup fails in time (under 5 s), nothing was paused, nothing
# changed; the next backup makes the targets equal the disks.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires python3 -c 'import nbd'
source "$abs_top_srcdir/tests/machine-lib.sh"
source "$abs_top_srcdir/tests/agent-lib.sh"

after_full
before
r=0
python3 "$moracle" run hcmd.times \
        timeout --foreground -k 5 60 dirtybitmap backup "${args[@]}" \
        --freeze-command "echo freeze >> $PWD/cmd.log; exec cat $PWD/hold.fifo" \
        --thaw-command "echo thaw >> $PWD/cmd.log" --freeze-timeout 1 \
        --incremental c1 --checkpoint c2 > hcmd.out 2> hcmd.err || r=$?
release_hold
cat cmd.log hcmd.out hcmd.err
test $r = 1
incomplete hcmd.err
failed_within hcmd.times
test "$(cat cmd.log)" = "$(printf 'freeze\nthaw')"
never_paused
unchanged
caught_up
