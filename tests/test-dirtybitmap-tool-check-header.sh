#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap check finds each kind of bad header the loader rejects
# (foreign magic, newer version, checksums, truncation, every field),
# naming the file and the problem; info, map, bitmap and the filter
# refuse the same file with the same message; no failing command
# changes a byte of it.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

source "$abs_top_srcdir/tests/tool-check-lib.sh"

# Not a bitmap file at all.
refused "not a dirtybitmap file (bad magic)" both_slots set-raw magic NOTDIRTY
refused "not a dirtybitmap file (bad magic)" cp disk.img c.bitmaps
# A newer format.
refused "unsupported format version 2 (this program reads version 1)" \
        poke set version 2
# Checksums: both header slots, or the directory.
refused "header checksum mismatch" both_slots set-raw seq 99
refused "directory checksum mismatch" poke set dir_crc 0x12345678
# Truncated.
refused "empty file (truncated?)" truncate -s 0 c.bitmaps
refused "truncated: 100 bytes, too short for a header" \
        truncate -s 100 c.bitmaps
refused "truncated: 12288 bytes, the header says $len" \
        truncate -s 12288 c.bitmaps
# Header fields.
refused "header length 200 is not 256" poke set length 200
refused "unsupported incompatible features 0x2" poke set incompat 2
refused "unknown header flags 0x8" poke set flags 9
refused "unknown durability mode 3" poke set open_mode 3
refused "disk size 1000000 recorded but not marked known" poke set flags 0
refused "disk size 9223372036854775808 is too large" \
        poke set disk_size 0x8000000000000000
refused "boot id is not terminated" \
        poke set boot_id 0123456789012345678901234567890123456789
refused "70000 bitmaps (the limit is 65535)" poke set nr_bitmaps 70000
refused "invalid file length 4096" poke set file_length 4096
dir=$(python3 "$edit" good.bitmaps get dir_offset)
refused "directory (offset 4096, length $dlen) overlaps the header slots" \
        poke set dir_offset 4096
refused "directory (offset $((dir + 8)), length $dlen) is not aligned to 4096 bytes" \
        poke set dir_offset $((dir + 8))
refused "directory (offset $len, length $dlen) lies outside the file" \
        poke set dir_offset $len
refused "no directory, but 2 bitmaps" poke set dir_length 0
refused "a directory of $dlen bytes, but no bitmaps" poke set nr_bitmaps 0
no_dir () { poke set nr_bitmaps 0; poke set dir_length 0; }
refused "directory offset $dir without a directory" no_dir
