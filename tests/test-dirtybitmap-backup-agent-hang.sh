#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap backup --guest-agent, with an agent whose freeze never
# answers: the agent gets the thaw, the backup fails within
# --freeze-timeout 1 (under 5 s), nothing was paused, nothing changed;
# the next backup makes the targets equal the disks.
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/agent-lib.sh"
after_full
agent --hang-freeze
before
fails_in_time hang "${args[@]}" --guest-agent "$PWD/qga.sock" \
              --incremental c1 --checkpoint c2
cat qga.log
thawed qga.log
untouched
caught_up
