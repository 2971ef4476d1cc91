#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap backup --freeze-command, with a freeze command that
# fails: the thaw command runs, the backup fails, nothing was paused,
# nothing changed; the next backup makes the targets equal the disks.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires python3 -c 'import nbd'
source "$abs_top_srcdir/tests/machine-lib.sh"
source "$abs_top_srcdir/tests/agent-lib.sh"

after_full
before
backup_fails fcmd.err "${args[@]}" \
             --freeze-command "echo freeze >> $PWD/cmd.log; exit 3" \
             --thaw-command "echo thaw >> $PWD/cmd.log" \
             --incremental c1 --checkpoint c2
cat cmd.log
test "$(cat cmd.log)" = "$(printf 'freeze\nthaw')"
never_paused
unchanged
caught_up
