#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# One bitmap file describes one disk: after a first connection, a
# connection naming another export is refused; the same name is fine.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

truncate -s 1M disk.img
sock="$PWD/sock"
nbdkit -U "$sock" --log=stderr -f --filter="$FILTER" \
       file disk.img bitmap=b0 action=add 2> nbdkit.err &
cleanup_fn kill_nbdkit $!
for (( i = 0; i < 100; ++i )); do test -S "$sock" && break; sleep 0.1; done

nbdsh -u "nbd+unix:///first?socket=$sock" -c 'h.pwrite(b"1", 0)'
nbdsh -u "nbd+unix:///first?socket=$sock" -c 'h.pwrite(b"2", 65536)'
if nbdsh -u "nbd+unix:///second?socket=$sock" -c 'h.pwrite(b"3", 131072)'
then
    echo "$0: a second export name was accepted"; exit 1
fi
sleep 0.5
cat nbdkit.err
grep -F 'dirtybitmap: export "second" refused: the bitmaps in '"$PWD"'/disk.img.bitmaps track export "first" (one bitmap file describes one disk)' nbdkit.err
nbdinfo --map "nbd+unix:///first?socket=$sock" > map
expect map <<'EOF2'
         0        4096    0  data
      4096       61440    2  zero
     65536        4096    0  data
     69632       61440    2  zero
    131072      917504    1  hole
EOF2
