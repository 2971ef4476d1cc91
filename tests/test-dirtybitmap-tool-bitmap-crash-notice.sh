#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap bitmap, the first to open a file after the machine
# stopped under a server, keeps in the file what that costs (the marks
# of a durability=flush run, the bits rebuilt from the shadows of a
# durability=coarse run) and says so on stderr, bitmap by bitmap; the
# next command, the file committed, says nothing more.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

edit="$abs_top_srcdir/tests/bmfile-edit.py"
truncate -s 4M disk.img
bm="$PWD/disk.img.bitmaps"

# crash MODE [PARAM]: a server in MODE writes 4096 bytes at 8192 and is killed;
# then the file looks as after a power loss (another boot id).
crash ()
{
    rm -f "$bm"
    dirtybitmap bitmap --add -g 4K --size 4M "$bm" b0
    dirtybitmap bitmap --add -g 4K --disable "$bm" off
    start_nbdkit_child -P "$PWD/pid-$1" -U "$PWD/sock-$1" --filter="$FILTER" \
                       file disk.img bitmap=b0 durability="$@"
    nbdsh -u "nbd+unix:///?socket=$PWD/sock-$1" -c 'h.pwrite(b"a" * 4096, 8192)'
    kill9 $nbdkit_pid
    python3 "$edit" "$bm" set boot_id 00000000-0000-0000-0000-000000000000
}

crash flush
dirtybitmap bitmap --add "$bm" new 2> err
cat err
expect err <<EOF2
dirtybitmap: $bm: bitmap b0 is inconsistent: it was recording when the machine stopped uncleanly, when its file could not be synced, or when the disk was written without the filter, so it may have missed changes; remove it and take a full backup
EOF2
dirtybitmap bitmap --add "$bm" newer 2> err
expect err < /dev/null

crash coarse coarse-granularity=1M
dirtybitmap bitmap --add "$bm" new 2> err
cat err
# The coarse granule of the write (1M) is dirty, 4K of it was already.
expect err <<EOF2
dirtybitmap: $bm: the machine stopped while durability=coarse was recording: bitmap b0: 1044480 bytes are dirty because of it (from its coarse shadow)
EOF2
dirtybitmap bitmap --add "$bm" newer 2> err
expect err < /dev/null
dirtybitmap map "$bm" b0 | awk '$3 == 0' > map
expect map <<'EOF2'
         0     1048576    0  data
EOF2
