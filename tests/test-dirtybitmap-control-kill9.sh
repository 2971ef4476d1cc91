#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# kill -9 of nbdkit at a random moment of a transaction that arrives
# over the control socket, while two connections write: the file
# opens, "dirtybitmap check" finds it sound, it holds the bitmaps as
# they were before the transaction or as they are after it (after it
# if the reply came), and no completed write is missing from the
# bitmap that recorded it (control-kill.py).  ROUNDS=N rounds
# (default 8), each on the file the last one left.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires python3 -c 'import nbd'

rounds=${ROUNDS:-8}
g=4096
size=$((16 * 1024 * 1024))
truncate -s $size disk.img
dirtybitmap bitmap --add -g $g --size $size disk.img.bitmaps b0
sock="$PWD/nbd.sock"
ctl="$PWD/ctl.sock"
uri="nbd+unix:///?socket=$sock"
here="$abs_top_srcdir/tests"
j=1

for (( r = 0; r < rounds; ++r )); do
    # kill -9 leaves both sockets behind: the filter replaces its own.
    rm -f "$sock" stop w1.log* w2.log*
    start_nbdkit_child -P "$PWD/pid" -U "$sock" --filter="$FILTER" \
                       file disk.img control="$ctl"
    writers=()
    for i in 1 2; do
        python3 "$here/control-writer.py" "$uri" $((r * 2 + i)) w$i.log \
                stop 8 &
        writers+=($!)
    done
    for i in 1 2; do
        wait_until -i 0.05 10 [ -e w$i.log.ready ]
    done

    python3 "$here/control-kill.py" txn "$ctl" $nbdkit_pid $j $g txn.json
    kill9 $nbdkit_pid
    for p in "${writers[@]}"; do wait $p; done

    dirtybitmap check disk.img.bitmaps
    dirtybitmap info disk.img.bitmaps | grep -F "not closed cleanly"
    python3 "$here/control-kill.py" check disk.img.bitmaps txn.json \
            w1.log w2.log
    j=$(cat next-j)
done

# What the rounds hit.
sort outcomes | uniq -c
# A last clean start and stop: the file serves again.
rm -f "$sock"
start_nbdkit -P "$PWD/pid2" -U "$sock" --filter="$FILTER" \
             file disk.img control="$ctl"
python3 "$here/control.py" query "$ctl" > query
grep '^bitmaps .*"name": "b'$((j - 1))'", "recording": true' query
kill_nbdkit "$(cat pid2)"
dirtybitmap check disk.img.bitmaps
