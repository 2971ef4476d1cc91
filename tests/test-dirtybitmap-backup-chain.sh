#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap backup, the whole job, while a writer runs: a full backup
# with a checkpoint, then incrementals into a chain of qcow2 overlays
# (each served by qemu-nbd, backed by the one before), each removing
# the bitmap it started from.  Each backup, read through its overlay,
# holds the disk at a point between the command's start and its end
# (and the writer must have changed the disk while each backup ran);
# once the writer stops, one more incremental makes the chain equal to
# the disk.  A restore is the top of the chain converted to raw.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires qemu-img --version
requires qemu-nbd --version
requires python3 -c 'import nbd'

oracle="$abs_top_srcdir/tests/backup-oracle.py"
blocks=4096                                     # 16 MiB
truncate -s $((blocks * 4096)) disk.img
start_nbdkit -P "$PWD/pid" -U "$PWD/sock" --filter="$FILTER" \
             file disk.img control="$PWD/ctl"
uri="nbd+unix:///?socket=$PWD/sock"
python3 "$oracle" write "$uri" 0 $blocks w.log stop &
writer=$!
sleep 0.3

now () { python3 -c 'import time; print(time.monotonic_ns())'; }

# The full backup starts the chain: c1 records from its cut.
t0=$(now)
dirtybitmap backup --control ctl --checkpoint c1 "$uri" base.img > out
t1=$(now)
cat out
echo "cut $t0 $t1" > cut0
prev=base.img
prev_fmt=raw
for k in 1 2 3; do
    sleep 0.3
    inc=inc$k.qcow2
    qemu-img create -q -f qcow2 -b $prev -F $prev_fmt $inc
    sock="$PWD/q$k.sock"
    qemu-nbd -f qcow2 -k "$sock" --fork --pid-file="$PWD/q$k.pid" $inc
    cleanup_fn kill_nbdkit "$(cat q$k.pid)"
    t0=$(now)
    dirtybitmap backup --control ctl --incremental c$k \
                --checkpoint c$((k + 1)) --remove-incremental \
                --output=json "$uri" "nbd+unix:///?socket=$sock" > out.json
    t1=$(now)
    echo "cut $t0 $t1" > cut$k
    python3 -c '
import json
d = json.load(open("out.json"))
assert d["result"] == "complete", d'
    wait_gone "$(cat q$k.pid)"
    prev=$inc
    prev_fmt=qcow2
done
touch stop
wait $writer

# Each point of the chain, restored, is the disk at its cut.
python3 "$oracle" check --window base.img $blocks cut0 w.log
for k in 1 2 3; do
    qemu-img convert -f qcow2 -O raw inc$k.qcow2 restore$k.img
    python3 "$oracle" check --window restore$k.img $blocks cut$k w.log
done
dirtybitmap info --control ctl > info
grep -F "name: c4" info
if grep -F "name: c3" info; then exit 1; fi

# With the writer stopped, one more incremental: the chain is the disk.
qemu-img create -q -f qcow2 -b inc3.qcow2 -F qcow2 inc4.qcow2
qemu-nbd -f qcow2 -k "$PWD/q4.sock" --fork --pid-file="$PWD/q4.pid" \
         inc4.qcow2
cleanup_fn kill_nbdkit "$(cat q4.pid)"
dirtybitmap backup --control ctl --incremental c4 --checkpoint c5 \
            "$uri" "nbd+unix:///?socket=$PWD/q4.sock"
wait_gone "$(cat q4.pid)"
qemu-img compare -f raw -F qcow2 disk.img inc4.qcow2
