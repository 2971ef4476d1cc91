#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap backup --freeze-command, with a freeze command that
# hangs: it is killed past --freeze-timeout 1, the thaw command runs,
# the backup fails in time (under 5 s), nothing was paused, nothing
# changed; the next backup makes the targets equal the disks.
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/agent-lib.sh"
after_full
cleanup_fn release_hold
before
fails_in_time hcmd "${args[@]}" \
    --freeze-command "echo freeze >> $PWD/cmd.log; exec cat $PWD/hold.fifo" \
    --thaw-command "echo thaw >> $PWD/cmd.log" \
    --incremental c1 --checkpoint c2
commands_ran
untouched
caught_up
