#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The default durability survives a power loss: a server started with
# no durability flag at all (the worked example of README.md: control=
# and nothing else) takes a full backup that adds checkpoint c1, is
# written to, and the machine loses power: nbdkit is killed, every bit
# set since c1 was synced is thrown away (only the page cache held
# them), and the next start is on another boot.  c1 is still
# consistent, rebuilt from its coarse shadow; the next
# `dirtybitmap backup --incremental c1` uses it (mode "incremental", not
# a resync or a full copy), copies the coarse granules written and no
# more, and leaves a target equal to the disk.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires python3 -c 'import nbd'
requires_boot_id_mount

edit="$abs_top_srcdir/tests/bmfile-edit.py"
control="$abs_top_srcdir/tests/control.py"
head -c 64M /dev/urandom > disk.img
uri="nbd+unix:///?socket=$PWD/sock"

# The first boot: no durability=, no bitmap=, no action=.
start_nbdkit_child -P "$PWD/pid1" -U "$PWD/sock" --filter="$FILTER" \
                   file disk.img control="$PWD/ctl"
python3 "$control" query "$PWD/ctl" > query
cat query
grep -Fx 'durability "coarse"' query
dirtybitmap backup --control "$PWD/ctl" --checkpoint c1 --output=json \
            "$uri" backup.img > full.json
python3 - full.json <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["result"] == "complete", j
assert j["disks"][0]["mode"] == "full", j
EOF
cmp disk.img backup.img
# c1 was added by a commit that synced it, empty: what a power loss
# keeps of its bits at least.
cp disk.img.bitmaps synced.bitmaps

# Writes in two coarse granules (16M): [0, 16M) and [32M, 48M).
nbdsh -u "$uri" -c '
import os
h.pwrite(os.urandom(4096), 1 << 20)
h.pwrite(os.urandom(65536), (40 << 20) + 4096)
'
kill9 $nbdkit_pid
dirtybitmap info disk.img.bitmaps > info
cat info
grep -F "state: not closed cleanly (pid $nbdkit_pid, durability=coarse, same boot)" info

# The power loss: the bits only the page cache held are lost.
python3 "$edit" disk.img.bitmaps data-from synced.bitmaps
dirtybitmap map -U disk.img.bitmaps c1 > map
expect map <<'EOF2'
         0    67108864    1  hole
EOF2

# The next boot: the same command line.
rm -f sock ctl
rebooted nbdkit -f -P "$PWD/pid2" -U "$PWD/sock" --filter="$FILTER" \
         file disk.img control="$PWD/ctl" 2> start.err &
pid2=$!
cleanup_fn kill_nbdkit $pid2
wait_until 10 [ -S ctl ]
cat start.err
grep -F "the machine stopped while durability=coarse was recording: bitmap c1: 33554432 bytes are dirty because of it (from its coarse shadow)" start.err

dirtybitmap backup --control "$PWD/ctl" --incremental c1 --checkpoint c2 \
            --output=json "$uri" backup.img > incr.json
cat incr.json
python3 - incr.json <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["result"] == "complete", j
assert j["disks"][0]["mode"] == "incremental", j
# The two coarse granules written, not the 64M disk.
assert j["bytes-copied"] + j["bytes-zeroed"] == 32 << 20, j
EOF
cmp disk.img backup.img
python3 "$control" query "$PWD/ctl" > query
grep -F '"name": "c2"' query
