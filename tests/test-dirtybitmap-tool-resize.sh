#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap resize: the stopped disk and every bitmap in one step,
# as qemu-img resize: a grown area is dirty, a shrink cuts the bitmaps
# and needs --shrink, and the next start trusts them (the disk's
# identity is recorded).  A failure in the middle leaves bitmaps that
# the next start marks inconsistent, never bitmaps that trust a disk
# they did not see.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

bm="$PWD/disk.img.bitmaps"
truncate -s 1M disk.img
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=add \
       --run 'nbdsh -u "$uri" -c "h.pwrite(b\"a\" * 512, 0)"'

# served MAP-FILE: the map a start serves from b0, which must not say
# the disk was written without the filter.
served ()
{
    nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 \
           --run 'nbdinfo --map "$uri"' > "$1" 2> served.err
    cat served.err
    if grep -F "without the filter" served.err; then
        echo "$0: the resize was taken for a write made without the filter"
        exit 1
    fi
}

# Grow: the new area is dirty, the old bits are kept.
dirtybitmap resize "$bm" 2M > out
grep -Fx "Image resized." out
test "$(stat -c %s disk.img)" = 2097152
served map
expect map <<'EOF2'
         0        4096    0  data
      4096       61440    2  zero
     65536      983040    1  hole
   1048576     1048576    2  zero
EOF2

# Shrink: refused without --shrink, nothing changed; with it, cut.
fails -k "$bm" -k disk.img \
      "dirtybitmap: resize: Use the --shrink option to perform a shrink operation." \
      dirtybitmap resize "$bm" 512K
dirtybitmap resize --shrink "$bm" -1536K
test "$(stat -c %s disk.img)" = 524288
served map
expect map <<'EOF2'
         0        4096    0  data
      4096       61440    2  zero
     65536      458752    1  hole
EOF2

# A bitmap file that never saw the disk's size: what grows past the
# size the disk had is new, so dirty.
dirtybitmap bitmap --add --size 512K other.bitmaps o1
dirtybitmap resize --disk disk.img other.bitmaps +64K
dirtybitmap map other.bitmaps o1 > map
expect map <<'EOF2'
         0      524288    1  hole
    524288       65536    0  data
EOF2
dirtybitmap resize --shrink --disk disk.img other.bitmaps 512K

# After a write made without the filter, the bitmaps are inconsistent
# and say so; the resize still happens.
printf x | dd of=disk.img bs=1 seek=70000 conv=notrunc status=none
dirtybitmap resize "$bm" 1M 2> err
cat err
grep -F "disk.img was written without the filter since its bitmaps last recorded it" err
dirtybitmap info "$bm" | grep -A4 "name: b0" | grep -F "consistent: false"
test "$(stat -c %s disk.img)" = 1048576

# A failed commit after the disk was resized: the next start finds the
# disk written without the filter.
rm "$bm"
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b1 action=add --run true
shim="$abs_top_builddir/tests/.libs/libfailsync.so"
if LD_PRELOAD="$shim" FAIL_SYNC_AT=1 dirtybitmap resize "$bm" 2M 2> err; then
    echo "$0: resize succeeded with a failing sync"; exit 1
fi
cat err
grep -F "disk.img is resized, but its bitmaps could not be" err
test "$(stat -c %s disk.img)" = 2097152
if nbdkit -U - --filter="$FILTER" file disk.img bitmap=b1 --run true \
          2> err; then
    echo "$0: b1 trusted after a resize it did not record"; exit 1
fi
grep -F "was written without the filter" err

# What cannot be resized so: a served disk, a disk the bitmaps do not
# cover whole (a filter below changes its size), a file with no disk.
dirtybitmap bitmap --add --size 4K small.bitmaps s
fails -k small.bitmaps -k disk.img \
      "dirtybitmap: resize: $PWD/small.bitmaps: its bitmaps cover 4096 bytes, but disk.img is 2097152 bytes" \
      dirtybitmap resize --disk disk.img "$PWD/small.bitmaps" 4M
fails -k small.bitmaps \
      "dirtybitmap: resize: small.bitmaps: which disk it describes is not known: give --disk DISKFILE" \
      dirtybitmap resize small.bitmaps 8K
start_nbdkit -P "$PWD/pid" -U "$PWD/sock" --filter="$FILTER" file disk.img
fails -k disk.img "dirtybitmap: $bm: in use by another process" \
      dirtybitmap resize "$bm" 4M
