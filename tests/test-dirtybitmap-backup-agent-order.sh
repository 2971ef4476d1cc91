#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap backup --guest-agent: a full backup, then an incremental,
# each frozen by the agent in the order that agent-lib.sh says:
# freeze, pause, begin, resume, thaw, copy.  The summary and the
# manifest say the guest was frozen.
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/agent-lib.sh"
two_disks

# A full backup.
agent
before
backup "${args[@]}" --guest-agent "$PWD/qga.sock" \
            --checkpoint c1 --output=json --manifest m1.json > out1.json
cat qga.log out1.json m1.json
ordered qga.log c1
python3 -c '
import json
d = json.load(open("out1.json")); m = json.load(open("m1.json"))
assert d["result"] == "complete" and d["frozen-ms"] > 0, d
assert m["result"] == "complete" and m["cut"]["frozen"] is True, m'
same_disks $disks

# An incremental.
write_some 2 $disks
agent
before
backup "${args[@]}" --guest-agent "$PWD/qga.sock" \
            --incremental c1 --checkpoint c2 --remove-incremental > out2
cat qga.log out2
ordered qga.log c2
grep -E '^cut: [0-9.]+ ms \(first pause to last resume\), guest frozen [0-9.]+ ms$' out2
same_disks $disks
bitmaps_are c2 $disks
