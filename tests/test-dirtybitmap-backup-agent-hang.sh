#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap backup --guest-agent, with an agent whose freeze never
# answers: the agent gets the thaw, the backup fails within
# --freeze-timeout 1 (under 5 s), nothing was paused, nothing changed;
# the next backup makes the targets equal the disks.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires python3 -c 'import nbd'
source "$abs_top_srcdir/tests/machine-lib.sh"
source "$abs_top_srcdir/tests/agent-lib.sh"

after_full
agent --hang-freeze
before
r=0
python3 "$moracle" run hang.times \
        timeout --foreground -k 5 60 dirtybitmap backup "${args[@]}" \
        --guest-agent "$PWD/qga.sock" --freeze-timeout 1 \
        --incremental c1 --checkpoint c2 > hang.out 2> hang.err || r=$?
cat qga.log hang.out hang.err
test $r = 1
incomplete hang.err
failed_within hang.times
thawed qga.log
never_paused
unchanged
caught_up
