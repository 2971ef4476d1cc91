#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap backup --guest-agent, and SIGTERM twice during the cut
# (every server paused, b's begin held at the filter's "freeze" pause
# point): each server resumed, the guest thawed, no view, no new
# checkpoint; the disks are written again, and the next backup makes
# the targets equal the disks.
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/agent-lib.sh"
after_full
kill_nbdkit "$(cat b.pid)"
DIRTYBITMAP_TEST_PAUSE=freeze DIRTYBITMAP_TEST_PAUSE_DIR="$PWD" \
    start_disk b 8M
agent
before
timeout --foreground -k 5 60 dirtybitmap backup "${args[@]}" \
        --guest-agent "$PWD/qga.sock" \
        --cut-timeout 30 --incremental c1 --checkpoint c2 \
        > term.out 2> term.err &
job=$!
timeout 30 cat freeze.reached
state a | grep '^paused=true '
kill -TERM $job
kill -TERM $job
timeout 30 sh -c ': > freeze.release'
job_fails term.err qga.log term.out
thawed qga.log
# Each server paused once, and resumed.
counts > after.counts
diff <(awk '{print $1, $2 + 1, $3 + 1}' before.counts) after.counts
unchanged
write_some 3 $disks
caught_up
