#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The qcow2 chain of backups: each incremental copy goes to a new qcow2
# overlay served by qemu-nbd whose backing file is the previous backup.
# Each overlay then reads the same as the disk, allocates exactly the
# dirty ranges, and leaves the backups below it unchanged.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires qemu-img --version
requires qemu-nbd --version

size=$((8 * 1024 * 1024))
yes | head -c $size > disk.img

# The full backup, a raw file; the bitmap starts recording.
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=add \
       --run 'dirtybitmap copy --full "$uri" full.img'
cmp disk.img full.img
cp full.img full.orig

prev=full.img
prev_fmt=raw
for round in 1 2; do
    export round
    # Seeded changes; from round 2 on, after a new checkpoint.
    action=
    [ $round -eq 1 ] || action=action=clear
    nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 $action \
           --run 'nbdsh -u "$uri" -c "
import os, random
random.seed(int(os.environ[\"round\"]))
for i in range(12):
    n = random.choice([1, 4096, 100000])
    off = random.randrange((8 << 20) - n)
    if i % 4 == 0:
        h.zero(n, off)
    else:
        h.pwrite(random.randbytes(n), off)
"'
    map_of -r --filter="$FILTER" file disk.img bitmap=b0 > dirty.map

    # The overlay, served by qemu-nbd until the copy disconnects.
    inc=inc$round.qcow2
    qemu-img create -q -f qcow2 -b $prev -F $prev_fmt $inc
    sock="$tmpdir/qemu$round.sock"
    qemu-nbd -f qcow2 -k "$sock" --fork --pid-file="$tmpdir/qemu$round.pid" \
             $inc
    cleanup_fn kill_nbdkit "$(cat qemu$round.pid)"
    nbdkit -U - -r --filter="$FILTER" file disk.img bitmap=b0 \
           --run "dirtybitmap copy \"\$uri\" 'nbd+unix:///?socket=$sock'"
    wait_gone "$(cat qemu$round.pid)"

    qemu-img compare -f raw -F qcow2 disk.img $inc
    cp disk.img disk.$round
    # What the overlay allocates (depth 0) is what was dirty.
    qemu-img map --output=json -f qcow2 $inc > alloc.json
    python3 - dirty.map alloc.json <<'EOF2'
import json, sys
def merged(pairs):
    out = []
    for s, e in sorted(pairs):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out
dirty = []
for line in open(sys.argv[1]):
    off, length, typ = [int(x) for x in line.split()[:3]]
    if typ != 1:
        dirty.append((off, off + length))
alloc = [(m["start"], m["start"] + m["length"])
         for m in json.load(open(sys.argv[2])) if m["depth"] == 0]
assert len(dirty) > 3, dirty
assert merged(dirty) == merged(alloc), (merged(dirty), merged(alloc))
EOF2
    prev=$inc
    prev_fmt=qcow2
done
# The older backups still hold their point in time.
cmp full.img full.orig
qemu-img compare -f qcow2 -F raw inc1.qcow2 disk.1
qemu-img compare -f qcow2 -F raw inc2.qcow2 disk.2
if cmp -s disk.1 disk.2; then exit 1; fi
