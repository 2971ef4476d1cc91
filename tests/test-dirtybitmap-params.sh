#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Every bad parameter stops nbdkit with a message naming it, and
# leaves the bitmap file as it was.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

truncate -s 1M disk.img
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=add --run true
sum0=$(md5sum < disk.img.bitmaps)

# refused "expected message" args...: nbdkit must exit 1 before
# serving, and leave the bitmap file as it was.
refused ()
{
    fails -k disk.img.bitmaps "$1" \
          nbdkit -U - --filter="$FILTER" "${@:2}" --run 'echo SERVED'
}

refused "dirtybitmap: action= needs bitmap=NAME" file disk.img action=add
refused "dirtybitmap: action=frob: unknown action (expected add, remove, clear, enable, disable or merge:SRC)" \
        file disk.img bitmap=b0 action=frob
refused "dirtybitmap: action=merge:: the source bitmap name after merge: must be 1 to 1023 bytes" \
        file disk.img bitmap=b0 action=merge:
refused "dirtybitmap: granularity=1000: must be a power of 2 from 512 to 2G" \
        file disk.img bitmap=b1 action=add granularity=1000
refused "dirtybitmap: granularity=256: must be a power of 2 from 512 to 2G" \
        file disk.img bitmap=b1 action=add granularity=256
refused "dirtybitmap: granularity=4G: must be a power of 2 from 512 to 2G" \
        file disk.img bitmap=b1 action=add granularity=4G
refused "dirtybitmap: granularity=lots: must be a power of 2 from 512 to 2G" \
        file disk.img bitmap=b1 action=add granularity=lots
refused "dirtybitmap: granularity= can only be used with action=add" \
        file disk.img bitmap=b0 granularity=4K
refused "dirtybitmap: granularity= can only be used with action=add" \
        file disk.img bitmap=b0 action=clear granularity=4K
refused "dirtybitmap: merge-file= can only be used with action=merge:SRC" \
        file disk.img bitmap=b0 merge-file=disk.img.bitmaps
refused "dirtybitmap: extents=all: must be bitmap or passthrough" \
        file disk.img bitmap=b0 extents=all
refused "dirtybitmap: extents=bitmap needs bitmap=NAME" \
        file disk.img extents=bitmap
refused "dirtybitmap: durability=always: must be flush, strict or coarse" \
        file disk.img bitmap=b0 durability=always
for g in 1000 256 4G lots; do
    refused "dirtybitmap: coarse-granularity=$g: must be a power of 2 from 512 to 2G" \
            file disk.img bitmap=b0 durability=coarse coarse-granularity=$g
done
for d in flush strict; do
    refused "dirtybitmap: coarse-granularity= can only be used with durability=coarse" \
            file disk.img bitmap=b0 durability=$d coarse-granularity=16M
done
refused "dirtybitmap: bitmap= given more than once" \
        file disk.img bitmap=b0 bitmap=b1
refused "dirtybitmap: bitmap=: the name must be 1 to 1023 bytes" \
        file disk.img bitmap=
long=$(printf 'x%.0s' {1..1024})
refused "dirtybitmap: bitmap=: the name must be 1 to 1023 bytes" \
        file disk.img bitmap=$long
refused "dirtybitmap: bitmap b7 not found in $PWD/disk.img.bitmaps (use action=add to create it)" \
        file disk.img bitmap=b7
refused "dirtybitmap: the plugin was given no file=FILE to keep the bitmaps next to: give bitmap-file=PATH" \
        memory 1M bitmap=b0 action=add
refused "dirtybitmap: file=/dev/null is not a regular file, so there is no default place for the bitmaps: give bitmap-file=PATH" \
        file /dev/null bitmap=b0 action=add
refused "dirtybitmap: $PWD/nodir/x.bitmaps: cannot create" \
        memory 1M bitmap-file=nodir/x.bitmaps bitmap=b0 action=add
refused "dirtybitmap: $PWD/missing.bitmaps: No such file or directory" \
        file disk.img bitmap=b0 action=merge:b0 merge-file=missing.bitmaps
# None of that changed the bitmap file.
test "$(md5sum < disk.img.bitmaps)" = "$sum0"
