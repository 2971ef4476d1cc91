#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Healing when the chunks cannot be made dirty in the base bitmap on
# the server (heal_mark made to fail by gdb): the backup says so and
# makes the disk a resync, which still writes only the bad chunk (the
# disk is unchanged since), and the new point restores to the disk.
# And without verify's record, nothing is healed: an incremental of
# nothing.
source ./functions.sh
set -e
set -x
requires gdb --version
source "$abs_top_srcdir/tests/repo-lib.sh"

tool=$(command -v dirtybitmap)
start_disk a 8M
write_some 1 a
rbackup c1 a
write_some 2 a
rbackup c2 a
snapshot a c2

# A flipped byte in a data cluster of c2's own image.
read -r off h < <(qemu-img map -f qcow2 --output=json R/disks/a/c2.qcow2 |
    python3 -c '
import json, sys
e = [e for e in json.load(sys.stdin) if e["depth"] == 0 and e["data"]][0]
print(e["start"], e["offset"])')
printf '\x00\x01\x02' | dd of=R/disks/a/c2.qcow2 bs=1 seek=$((h + 7)) conv=notrunc status=none

# Not verified: the next backup cannot know, and copies nothing.
rbackup c3 a -- --output=json > b3.json 2> b3.err
cat b3.json b3.err
if grep -F healed b3.err; then exit 1; fi
python3 -c '
import json
b = json.load(open("b3.json"))
assert b["mode"] == "incremental" and b["bytes-copied"] == 0, b'

# Verified: c3 reads the bad cluster through c2.
tool_fails "verify: point c3, disk a: 1 of 128 chunks" verify "$repo@c3"
grep -Fx "dirtybitmap: verify: point c3, disk a: differs: offset $off, 65536 bytes (held by the image of point c2)" fails.err

# The backup, heal_mark failing.
gdb -q -batch -ex "set confirm off" -ex "break heal_mark" -ex run \
    -ex "return -1" -ex continue \
    --args "$tool" backup --repo "$repo" --checkpoint c4 --output=json \
    --disk "control=$PWD/a.ctl,source=$(uri a),name=a" \
    > gdb.log 2>&1 || :
cat gdb.log
grep -E "Breakpoint 1(\.[0-9]+)?, heal_mark " gdb.log
grep -F "exited normally" gdb.log
grep -F "dirtybitmap: backup: disk a: the chunks to heal could not be marked in bitmap c3 on its server (out of memory): a resync instead (the whole disk read, only what differs and those chunks written)" gdb.log
grep -Fx "dirtybitmap: backup: healed: chunk at offset $off of disk a, bad in point c3" gdb.log
grep -F '"mode": "resync"' gdb.log
grep -F '"bytes-copied": 65536,' gdb.log
snapshot a c4
restored c4 a out.img
dirtybitmap verify "$repo@c4"
