#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap backup --incremental B --remove-incremental, where one
# disk lost B (removed): that disk resyncs from its checksums, the
# other is an incremental; after the backup B is removed where it was,
# and nothing is said of a B that is not there (no "remove bitmap B
# yourself" for a bitmap that does not exist).
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
args=(--disk "$(disk a a.bak)" --disk "$(disk b b.bak)")
backup "${args[@]}" --checkpoint c1
same_disks $disks
test -f b.c1.sums

write_some 2 $disks
dirtybitmap bitmap --remove --control "$PWD/b.ctl" c1
backup "${args[@]}" --incremental c1 --checkpoint c2 \
       --remove-incremental > out 2> err
cat out err
grep -F "dirtybitmap: backup: disk b: bitmap c1 is missing: a resync" err
grep -E '^b: resync: read 8388608 bytes' out
if grep -F "c1 yourself" err; then
    echo "$0: asked to remove a bitmap that is not there"
    exit 1
fi
if grep -F "not found" err; then
    echo "$0: tried to remove a bitmap that is not there"
    exit 1
fi
# The only thing said is the resync.
test "$(grep -c '^dirtybitmap' err)" = 1
bitmaps_are c2 $disks
same_disks $disks
