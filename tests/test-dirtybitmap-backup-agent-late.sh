#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap backup --guest-agent, and an agent whose freeze ends
# only after the backup has given up and exited.  The agent (as
# qemu-guest-agent is) is single-threaded: while it freezes it reads
# nothing, and runs what it was sent afterwards, in order.  The backup
# must fail (nothing changed on the servers), say THE GUEST MAY STILL
# BE FROZEN, and have sent the thaw so that the agent runs it once the
# freeze is done: then the guest is thawed, with nobody left to ask.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires python3 -c 'import nbd'
source "$abs_top_srcdir/tests/machine-lib.sh"

disks="a b"
mkfifo hold.fifo
start_disk a 8M
start_disk b 8M
write_some 1 $disks
states $disks > before.states

agent --hold-freeze "$PWD/hold.fifo"
backup_fails late.err --guest-agent "$PWD/qga.sock" --freeze-timeout 1 \
             --disk "$(disk a "$PWD/a.bak")" --disk "$(disk b "$PWD/b.bak")" \
             --checkpoint c1
grep -Fx "dirtybitmap: backup incomplete: nothing was changed" late.err
no_leftovers $disks
states $disks > after.states
diff -u before.states after.states
test ! -e a.bak
test ! -e b.bak

# The backup is gone; the freeze ends now.  The agent then runs what
# it was sent, and is asked last what the guest is.
exec 3<> hold.fifo; exec 3>&-
test "$(python3 "$qga" status "$PWD/qga.sock")" = thawed
cat qga.log
python3 - qga.log <<'EOF'
import json, sys
ev = [json.loads(l)["event"] for l in open(sys.argv[1])]
ev = [e for e in ev if e in ("freeze", "thaw")]
assert ev == ["freeze", "thaw"], ev
EOF

# And the backup said so, and why the guest will be thawed.
grep -F "dirtybitmap: backup: THE GUEST MAY STILL BE FROZEN: --guest-agent $PWD/qga.sock: guest-fsfreeze-thaw: no answer in time (it was sent after the freeze: the agent runs it as soon as it is done freezing" late.err
