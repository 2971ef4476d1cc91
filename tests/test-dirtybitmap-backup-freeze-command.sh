#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap backup --freeze-command and --thaw-command: the commands
# run in the order that agent-lib.sh says (freeze, pause, begin,
# resume, thaw, copy), and the summary says the guest was frozen.
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/agent-lib.sh"
after_full
probe="python3 $qga probe $PWD/cmd.log"
before
backup "${args[@]}" \
            --freeze-command "$probe freeze ${probe_args[*]}" \
            --thaw-command "$probe thaw ${probe_args[*]}" \
            --incremental c1 --checkpoint c2 --remove-incremental \
            --output=json > cmd.json
cat cmd.log cmd.json
ordered cmd.log c2
python3 -c '
import json
d = json.load(open("cmd.json"))
assert d["result"] == "complete" and d["frozen-ms"] > 0, d'
same_disks $disks
bitmaps_are c2 $disks
