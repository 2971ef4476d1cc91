#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap backup --guest-agent, and SIGTERM while the agent holds
# its answer to the freeze: the freeze is given up, and the thaw sent
# at once behind it, on its connection (the agent, busy freezing, runs
# it after the freeze); then a second SIGTERM, while the thaw awaits
# its answer, which must not end the backup (from the freeze to the
# thaw, dirtybitmap(1) says, a second signal, what timeout(1) or a
# double Ctrl-C sends, is caught like the first); then the agent is
# let go, and must run the thaw.  Nothing was paused, nothing changed;
# the next backup makes the targets equal the disks.
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/agent-lib.sh"
after_full
agent --hold-freeze "$PWD/hold.fifo"
before
timeout --foreground -k 5 60 dirtybitmap backup "${args[@]}" \
        --guest-agent "$PWD/qga.sock" --freeze-timeout 10 \
        --incremental c1 --checkpoint c2 > term.out 2> term.err &
job=$!
wait_for_log qga.log '"execute": "guest-fsfreeze-freeze"'
kill -TERM $job
wait_for_log qga.log '"execute": "guest-fsfreeze-thaw"'
kill -TERM $job
release_hold
job_fails term.err qga.log term.out
thawed qga.log
test "$(python3 "$qga" status "$PWD/qga.sock")" = thawed
untouched
caught_up
