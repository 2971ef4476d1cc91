#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A transaction is a cut through the writes.  Three connections write
# nonstop (pwrite, zero, trim, 8 in flight each) while a control client
# rotates the recording bitmap as fast as the server answers, CUTS
# times (default 250): "add b{k}, disable b{k-1}".  Then, offline,
# every write that completed between two cuts is in the bitmap that
# recorded between them, and every write in flight at a cut is in one
# of the two bitmaps around it (control-cut.py, which prints the
# figures).  The writers and the control client share CLOCK_MONOTONIC.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires python3 -c 'import nbd'

cuts=${CUTS:-250}
g=4096
size=$((16 * 1024 * 1024))
truncate -s $size disk.img
sock="$PWD/nbd.sock"
ctl="$PWD/ctl.sock"
start_nbdkit -P "$PWD/pid" -U "$sock" --filter="$FILTER" \
             file disk.img bitmap=b0 action=add granularity=$g \
             control="$ctl"
uri="nbd+unix:///?socket=$sock"

writers=()
for i in 1 2 3; do
    python3 "$abs_top_srcdir/tests/control-writer.py" "$uri" $i w$i.log stop 8 &
    writers+=($!)
done
for i in 1 2 3; do
    for (( t = 0; t < 200; ++t )); do
        [ -e w$i.log.ready ] && break
        sleep 0.05
    done
    test -e w$i.log.ready
done

python3 "$abs_top_srcdir/tests/control-cut.py" rotate "$ctl" $cuts $g cuts
touch stop
for p in "${writers[@]}"; do wait $p; done

# A clean stop, then the bitmaps as the file holds them.
kill_nbdkit "$(cat pid)"
dirtybitmap check disk.img.bitmaps
python3 "$abs_top_srcdir/tests/control-cut.py" check disk.img.bitmaps \
        $cuts $g cuts w1.log w2.log w3.log
