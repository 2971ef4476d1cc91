#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap backup --manifest FILE: exit 1 means every disk stays at
# B.  A manifest that cannot be written (its directory missing, FILE a
# directory, FILE.tmp a directory) is refused before anything changes
# on any server.  One that can no longer be written once the set is
# committed (its directory removed while the copies run) is said
# loudly, and the backup, complete, exits 0.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires python3 -c 'import nbd'
source "$abs_top_srcdir/tests/machine-lib.sh"

disks="a b"
start_disk a 8M
start_disk b 8M
write_some 1 $disks
# b's target is served by an nbdkit of its own, which the test stops
# to hold b's copy.
truncate -s 8M b.bak
resume_target () { [ ! -s t.pid ] || kill -CONT "$(cat t.pid)" || :; }
cleanup_fn resume_target            # before the server's own hook
start_nbdkit_child -P "$PWD/t.pid" -U "$PWD/t.sock" file b.bak
args=(--disk "$(disk a a.bak)"
      --disk "$(disk b "nbd+unix:///?socket=$PWD/t.sock")")
backup "${args[@]}" --checkpoint c1
same_disks $disks
write_some 2 $disks
states $disks > before.states

# refused MESSAGE MANIFEST: the incremental from c1 with --manifest
# MANIFEST fails with MESSAGE, and nothing changed.
refused ()
{
    fails -k a.bak -k b.bak -k a.c1.sums -k b.c1.sums -k a.c2.sums -k b.c2.sums \
          "dirtybitmap: backup: --manifest $2: $1" \
          dirtybitmap backup "${args[@]}" --incremental c1 --checkpoint c2 \
          --remove-incremental --manifest "$2"
    states $disks > after.states
    diff -u before.states after.states
    no_leftovers $disks
}
refused "cannot write nodir/m.json.tmp: No such file or directory" \
        nodir/m.json
mkdir m.json
refused "is a directory" m.json
mkdir -p mdir/m.json.tmp
refused "cannot write mdir/m.json.tmp: Is a directory" mdir/m.json
rmdir mdir/m.json.tmp

# The directory goes while b's copy is held (its target stopped): the
# set is committed, the manifest cannot be written, the status is 0.
kill -STOP "$(cat t.pid)"
backup "${args[@]}" --incremental c1 --checkpoint c2 --remove-incremental \
       --manifest mdir/m.json > late.out 2> late.err &
job=$!
b_begun () { state b | grep -q ' view=backup '; }
wait_until 30 b_begun || :
state b | grep ' view=backup '
rm -r mdir
kill -CONT "$(cat t.pid)"
r=0
wait $job || r=$?
cat late.out late.err
test $r = 0
grep -F "dirtybitmap: backup: --manifest mdir/m.json: No such file or directory" late.err
grep -F "dirtybitmap: backup: NO MANIFEST: the backup is complete (checkpoint c2 on every disk), but its manifest mdir/m.json could not be written" late.err
test ! -e mdir
bitmaps_are c2 $disks
same_disks $disks
