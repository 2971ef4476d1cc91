#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# One owner per bitmap file, even when starts race.  A start that fails
# after creating the file must not leave a second start holding the
# lock on a file that has gone from the path (recording into a file
# nobody reads, while a third start takes the path).  strace widens
# the window: the failing start's unlink waits 0.3 s, the second
# start's flock 0.6 s.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires strace -V

truncate -s 1M disk.img
bm="$PWD/disk.img.bitmaps"

# A: fails after opening (or creating) the file.
strace -f -o /dev/null -e trace=unlink -e inject=unlink:delay_enter=300000 \
       nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 \
       action=add action=merge:missing --run true 2> a.err &
a=$!
# B: starts while A holds the file (if A ever shows it at the path).
wait_until 3 test -e "$bm" || :
strace -f -o /dev/null -e trace=flock -e inject=flock:delay_enter=600000 \
       nbdkit -f -P "$PWD/pidb" -U "$PWD/sockb" --filter="$FILTER" \
       file disk.img bitmap=b0 action=add 2> b.err &
b=$!
if wait $a; then
    echo "$0: the start with a failing action succeeded"; exit 1
fi
cat a.err
grep -F "dirtybitmap: action merge:missing on bitmap b0 failed: bitmap missing not found" a.err
wait_until 10 test -s pidb
pidb=$(cat pidb)
cleanup_fn kill_nbdkit $pidb
nbdsh -u "nbd+unix:///?socket=$PWD/sockb" -c 'h.pwrite(b"b", 131072)'

# C: the file at the path is B's, in use.
if nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 --run true \
          2> c.err; then
    echo "$0: a third start served the disk beside B"; exit 1
fi
cat c.err
grep -F "dirtybitmap: $bm: in use by another process" c.err

# And what B recorded is in that file.
kill_nbdkit $pidb
wait $b
dirtybitmap map "$bm" b0 > map
expect map <<'EOF2'
         0      131072    1  hole
    131072       65536    0  data
    196608      851968    1  hole
EOF2
