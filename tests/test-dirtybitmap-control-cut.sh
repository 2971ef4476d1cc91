#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A transaction is a cut through the writes.  Three connections write
# nonstop (pwrite, zero, trim, 8 in flight each) while a control client
# rotates the recording bitmap as fast as the server answers, CUTS
# times (default 200, and 60 with durability=strict): "add b{k},
# disable b{k-1}".  Then, offline, every write that completed between
# two cuts is in the bitmap that recorded between them, and every
# write in flight at a cut is in one of the bitmaps around it
# (control-cut.py, which prints the figures).  The writers and the
# control client share CLOCK_MONOTONIC.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires python3 -c 'import nbd'

g=4096
size=$((16 * 1024 * 1024))
here="$abs_top_srcdir/tests"

# run DURABILITY CUTS
run ()
{
    local mode=$1 cuts=$2 i t p
    local sock="$PWD/$mode/nbd.sock" ctl="$PWD/$mode/ctl.sock"
    local -a writers=()

    mkdir $mode
    truncate -s $size $mode/disk.img
    start_nbdkit -P "$PWD/$mode/pid" -U "$sock" --filter="$FILTER" \
                 file $mode/disk.img bitmap=b0 action=add granularity=$g \
                 durability=$mode control="$ctl"
    for i in 1 2 3; do
        python3 "$here/control-writer.py" "nbd+unix:///?socket=$sock" $i \
                $mode/w$i.log $mode/stop 8 &
        writers+=($!)
    done
    for i in 1 2 3; do
        wait_until -i 0.05 10 [ -e $mode/w$i.log.ready ]
    done

    python3 "$here/control-cut.py" rotate "$ctl" $cuts $g $mode/cuts
    touch $mode/stop
    for p in "${writers[@]}"; do wait $p; done

    # A clean stop, then the bitmaps as the file holds them.
    kill_nbdkit "$(cat $mode/pid)"
    dirtybitmap check $mode/disk.img.bitmaps
    python3 "$here/control-cut.py" check $mode/disk.img.bitmaps $cuts $g \
            $mode/cuts $mode/w1.log $mode/w2.log $mode/w3.log
}

run flush ${CUTS:-200}
run strict ${CUTS:-60}
