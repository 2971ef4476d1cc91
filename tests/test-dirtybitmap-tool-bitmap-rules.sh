#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap bitmap follows qemu-img bitmap's rules: each mistake
# exits 1 with a message naming the action, the bitmap and the
# problem, and leaves every file it names byte-identical.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

source "$abs_top_srcdir/tests/tool-bitmap-lib.sh"

dirtybitmap bitmap --add --size 1M $bm b0
dirtybitmap bitmap --add -g 4K $bm b1

# The rules of qemu-img bitmap.
bitmap_fails "dirtybitmap: action add on bitmap b0 failed: bitmap b0 already exists" \
             --add $bm b0
for a in remove clear enable disable; do
    bitmap_fails "dirtybitmap: action $a on bitmap b9 failed: bitmap b9 not found" \
                 --$a $bm b9
done
bitmap_fails "dirtybitmap: action merge:b0 on bitmap b9 failed: bitmap b9 not found" \
             --merge b0 $bm b9
bitmap_fails "dirtybitmap: action merge:b9 on bitmap b1 failed: bitmap b9 not found" \
             --merge b9 $bm b1
bitmap_fails "dirtybitmap: Need at least one of --add, --remove, --clear, --enable, --disable, or --merge" \
             $bm b0
bitmap_fails "dirtybitmap: granularity only supported with --add" \
             -g 4K --remove $bm b0
bitmap_fails "dirtybitmap: Merge bitmap source file only supported with --merge" \
             -b $bm --add $bm b2
bitmap_fails "dirtybitmap: Expecting filename and bitmap name" --add $bm
for g in 0 256 1000 4G; do
    bitmap_fails "dirtybitmap: -g $g: granularity must be a power of 2 from 512 to 2G" \
                 --add -g $g $bm b2
done
bitmap_fails "dirtybitmap: action add failed: the bitmap name \"\" must be 1 to 1023 bytes" \
             --add $bm ""
long=$(printf 'n%.0s' {1..1024})
bitmap_fails "dirtybitmap: action add failed: the bitmap name \"$long\" must be 1 to 1023 bytes" \
             --add $bm $long
dirtybitmap bitmap --add --remove $bm ${long:1}
bitmap_fails "dirtybitmap: disk.img: not a dirtybitmap file (bad magic)" --add disk.img b0
bitmap_fails "dirtybitmap: nosuch: No such file or directory" \
             --merge b0 -b nosuch $bm b1
bitmap_fails "dirtybitmap: disk.img: not a dirtybitmap file (bad magic)" \
             --merge b0 -b disk.img $bm b1
