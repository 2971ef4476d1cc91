#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A backup into a repository only adds a point: it runs while readers
# read (a point served for hours, a restore, a verify), and they read
# what they read before.  What changes points' images waits for no
# reader but is refused while one is there: a prune, and a backup that
# must first finish a removal that a prune killed on the way left;
# once the reader has gone, that backup finishes it, and says so.
source ./functions.sh
set -e
set -x
requires gdb --version
source "$abs_top_srcdir/tests/repo-lib.sh"

start_disk a $((8 * 1024 * 1024))
busy="$repo is in use by another dirtybitmap"
for p in c1 c2; do
    write_some $p a
    rbackup $p a
    snapshot a $p
done

# A point served: a backup adds c3 meanwhile; the served point reads
# as it was; a prune is refused.
dirtybitmap serve "$repo@c1" --socket "$PWD/s.sock" > serve.out &
spid=$!
cleanup_fn kill_nbdkit $spid
wait_until 10 [ -S s.sock ]
write_some c3 a
rbackup c3 a
snapshot a c3
tool_fails "prune: $busy (a list, restore, rollback, serve or verify reading it): try again once it has ended" \
    prune --keep-last 1 "$repo"
nbdsh -u "nbd+unix:///?socket=$PWD/s.sock" -c '
import sys
sys.stdout.buffer.write(h.pread(h.get_size(), 0))' > served
cmp a.c1 served
kill -TERM $spid
wait $spid
restored c3 a x.img

# A prune killed inside its first removal (c2's: the newest first)
# leaves it to finish.
gdb -q -batch \
    -ex 'break *repo_fold_step if $_streq((char *) $rdi, "fold")' \
    -ex run -ex kill \
    --args "$(command -v dirtybitmap)" prune --keep-last 1 "$repo" \
    > gdb.log 2>&1
cat gdb.log
grep -Eq "Breakpoint 1, .*repo_fold_step" gdb.log
test -e R/prune.json

# A reader there: the backup that must finish it is refused, nothing
# changed; without the reader it finishes the removal, then backs up.
flock -F -s R/lock sh -c 'touch held; exec sleep 60' &
holder=$!
wait_until 10 [ -e held ]
write_some c4 a
tool_fails -k R/prune.json \
    "backup: $repo: a prune that did not complete must be finished first, by this backup: $busy (a list, restore, rollback, serve or verify reading it): try again once it has ended" \
    backup --repo "$repo" --control "$PWD/a.ctl" --checkpoint c4 "$(uri a)"
kill $holder
wait $holder || :
rbackup c4 a 2> c4.err
cat c4.err
grep -F "backup: $repo: finished the removal of point c2, begun by a prune that did not complete" c4.err
test ! -e R/prune.json
snapshot a c4
restored c1 a x.img
restored c3 a x.img
restored c4 a x.img
