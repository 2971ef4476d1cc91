#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap resize killed between its two steps (gdb holds it where
# it commits the bitmaps, once the disk is resized, and kills it): the
# disk has its new size, the bitmaps the old one.  The next resize
# names what happened (the disk resized without its bitmaps) and the
# way out, which is the interrupted command again, to the size the
# disk has: the bitmaps follow it, every enabled one inconsistent (the
# disk changed without them).
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires gdb --version

bm="$PWD/disk.img.bitmaps"
truncate -s 1M disk.img
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=add \
       --run 'nbdsh -u "$uri" -c "h.pwrite(b\"a\" * 512, 0)"'

gdb -batch -ex 'break bmf_txn_commit' -ex run -ex kill \
    --args "$(command -v dirtybitmap)" resize "$bm" 2M > gdb.out 2>&1 || :
cat gdb.out
grep -F "Breakpoint 1, bmf_txn_commit" gdb.out
test "$(stat -c %s disk.img)" = 2097152
dirtybitmap info "$bm" | grep -Fx "disk size: 1048576 (1 MiB)"

# Another size: refused, with the cause and the way out.
tool_fails -k disk.img -k "$bm" \
    "dirtybitmap: resize: $bm: its bitmaps cover 1048576 bytes, the size $PWD/disk.img had when they last recorded it, but it is 2097152 bytes now: it was resized without them (a dirtybitmap resize interrupted between its two steps, or another program), so every enabled bitmap is to be taken as inconsistent.  To bring the bitmaps to the disk as it is: dirtybitmap resize $bm 2097152" \
    resize "$bm" +1M
if grep -F "plugin's own tools" fails.err; then
    echo "$0: the advice names a filter below, not the interrupted resize"
    exit 1
fi

# The way out.
dirtybitmap resize "$bm" 2M > out 2> err
cat out err
grep -Fx "Image resized." out
grep -F "disk.img was written without the filter since its bitmaps last recorded it" err
test "$(stat -c %s disk.img)" = 2097152
dirtybitmap info "$bm" > info
cat info
grep -Fx "disk size: 2097152 (2 MiB)" info
grep -A4 "name: b0" info | grep -Fx "        consistent: false"
