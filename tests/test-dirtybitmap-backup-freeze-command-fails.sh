#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap backup --freeze-command, with a freeze command that
# fails: the thaw command runs, the backup fails, nothing was paused,
# nothing changed; the next backup makes the targets equal the disks.
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/agent-lib.sh"
after_full
before
backup_fails fcmd.err "${args[@]}" \
             --freeze-command "echo freeze >> $PWD/cmd.log; exit 3" \
             --thaw-command "echo thaw >> $PWD/cmd.log" \
             --incremental c1 --checkpoint c2
commands_ran
untouched
caught_up
