#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap check finds each kind of bad directory entry and data
# region the loader rejects, naming the file and the problem; info,
# map, bitmap and the filter refuse the same file with the same
# message; no failing command changes a byte of it.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

source "$abs_top_srcdir/tests/tool-check-lib.sh"

# The directory.
refused "directory entry 2 is cut off" poke set nr_bitmaps 3
refused "directory has 40 bytes after its last entry" poke set nr_bitmaps 1
refused "directory entry 0: name length 0 (must be 1 to 1023)" \
        poke entry 0 name_length 0
refused "bitmap b0: name used twice" poke entry 1 name b0
refused "bitmap b1: granularity 2^8 is out of range (512 to 2G)" \
        poke entry 1 gbits 8
refused "bitmap b0: unknown flags 0x8" poke entry 0 flags 9
# Regions: outside the file, overlapping, of the wrong length.
refused "bitmap b1: data (offset 1048576, length 4096) lies outside the file" \
        poke entry 1 data_offset 1048576
refused "bitmap b1: data (offset 0, length 4096) overlaps the header slots" \
        poke entry 1 data_offset 0
# (The 4096 bytes before b1's data are free: its old directory.)
off1=$(python3 "$edit" good.bitmaps entry-get 1 data_offset)
refused "bitmap b1: data (offset $((off1 - 3584)), length 4096) is not aligned to 4096 bytes" \
        poke entry 1 data_offset $((off1 - 3584))
refused "regions at offsets $off0 and $off0 overlap" \
        poke entry 1 data_offset $off0
refused "bitmap b0: data length 8192 does not match the disk size 1000000 at granularity 65536" \
        poke entry 0 data_length 8192
