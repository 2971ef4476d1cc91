#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A bitmap file goes from one durability mode to the other and keeps
# working: a file of durability=flush runs opens in the default mode
# (coarse), which makes its shadows from its bits, so that a power loss
# right after finds the old bits' coarse granules too; a file of
# default runs opens in durability=flush, which drops the shadows, and
# in the default mode again, which makes them again.  After a power
# loss the mode of the run that stopped decides, not the mode of the
# next start: a default run's bitmaps are rebuilt from their shadows
# by a flush start, a flush run's bitmaps are inconsistent for a
# default start.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires python3 -c 'import nbd'
requires_boot_id_mount

edit="$abs_top_srcdir/tests/bmfile-edit.py"
bm=disk.img.bitmaps
truncate -s 64M disk.img
M=1048576

# write OFFSET args...: a clean run with args that writes 4K at OFFSET.
write ()
{
    local off=$1; shift
    nbdkit -U - --filter="$FILTER" file disk.img "$@" \
           --run "nbdsh -u \"\$uri\" -c 'h.pwrite(b\"w\" * 4096, $off)'"
}
# shadows: 1 if the file has coarse shadows, else 0.
shadows ()
{
    echo $(( ($(python3 "$edit" $bm get compat) >> 1) & 1 ))
}
# dirty NAME: the dirty ranges of bitmap NAME, "offset length" a line.
dirty ()
{
    dirtybitmap map "$@" | awk '$3 == 0 { print $1, $2 }'
}
# crash OFFSET args...: a server with args writes 4K at OFFSET, then
# the machine loses power: nbdkit is killed and the bits set since
# the start (whose commit synced the file) are lost.
n=0
crash ()
{
    local off=$1; shift
    n=$((n + 1))
    start_nbdkit_child -P "$PWD/pid$n" -U "$PWD/sock$n" \
                       --filter="$FILTER" file disk.img "$@"
    nbdsh -u "nbd+unix:///?socket=$PWD/sock$n" -c 'pass'
    cp $bm synced.bitmaps
    nbdsh -u "nbd+unix:///?socket=$PWD/sock$n" \
          -c "h.pwrite(b'w' * 4096, $off)"
    kill9 $nbdkit_pid
    python3 "$edit" $bm data-from synced.bitmaps
}

# A file of flush runs: no shadows.
write $M bitmap=b0 action=add durability=flush
test "$(shadows)" = 0
# A default run takes it over: its shadows are made from the bits.
write $((40 * M))
test "$(shadows)" = 1
dirtybitmap info $bm > info
cat info
grep -F 'consistent: true' info
dirty $bm b0 > map
expect map <<EOF2
$M 65536
$((40 * M)) 65536
EOF2
# A power loss in the next default run: the bits of the flush run
# come back as their coarse granules (16M), with the lost write's.
crash $((20 * M))
rebooted dirtybitmap info $bm > info
cat info
grep -F 'durability=coarse, machine restarted since' info
grep -F 'consistent: true' info
rebooted dirtybitmap map $bm b0 | awk '$3 == 0 { print $1, $2 }' > map
expect map <<EOF2
0 $((48 * M))
EOF2

# A file of default runs, opened by a flush run: consistent, the same
# bits, the shadows dropped; then by a default run: made again.
rm -f $bm
write $M bitmap=b0 action=add
test "$(shadows)" = 1
write $((40 * M)) durability=flush
test "$(shadows)" = 0
dirtybitmap info $bm | grep -F 'consistent: true'
dirty $bm b0 > map
expect map <<EOF2
$M 65536
$((40 * M)) 65536
EOF2
write $((41 * M))
test "$(shadows)" = 1
dirty $bm b0 > map
expect map <<EOF2
$M 65536
$((40 * M)) 65536
$((41 * M)) 65536
EOF2

# A default run loses power; the next start, on another boot, is a
# flush run: it rebuilds the bitmap from the shadows of the run that
# stopped, says so, and serves it.
rm -f $bm
write $M bitmap=b0 action=add
crash $((40 * M))
# The start's commit had synced b0 with the bit at 1M and the shadow
# bit of [0, 16M); the lost write at 40M left its shadow bit of
# [32M, 48M): both coarse granules are dirty, all but the 64K known.
rebooted nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 \
         durability=flush --run 'nbdinfo --map "$uri"' > nbdinfo.map 2> err
cat err nbdinfo.map
grep -F "the machine stopped while durability=coarse was recording: bitmap b0: $((32 * M - 65536)) bytes are dirty because of it (from its coarse shadow)" err
# Dirty (no hole bit), merged.
awk '!($3 % 2) { if (s != "" && $1 == e) e += $2
                 else { if (s != "") print s, e - s; s = $1; e = $1 + $2 } }
     END { if (s != "") print s, e - s }' nbdinfo.map > map
expect map <<EOF2
0 $((16 * M))
$((32 * M)) $((16 * M))
EOF2
test "$(shadows)" = 0
dirtybitmap info $bm | grep -F 'consistent: true'

# A flush run loses power; the next start, on another boot, is a
# default run: the bitmap is inconsistent.
rm -f $bm
write $M bitmap=b0 action=add durability=flush
crash $((40 * M)) durability=flush
fails -k $bm "dirtybitmap: bitmap b0 is inconsistent" \
      rebooted nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 \
               --run true
rebooted nbdkit -U - --filter="$FILTER" file disk.img --run true
dirtybitmap info $bm > info
cat info
grep -F 'consistent: false' info
