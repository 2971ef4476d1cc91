#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap check finds each kind of corruption the loader rejects
# (and bits past the end of the disk), naming the file and the
# problem; info, map, bitmap and the filter refuse the same file with
# the same message; no failing command changes a byte of it.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

edit="$abs_top_srcdir/tests/bmfile-edit.py"

# good.bitmaps: a 1000000 byte disk, b0 (64K granules, 16 of them)
# and b1 (4K), some bits set.
yes | head -c 1000000 > disk.img
dirtybitmap bitmap --add --size 1000000 good.bitmaps b0
dirtybitmap bitmap --add -g 4K good.bitmaps b1
nbdkit -U - --filter="$FILTER" file disk.img bitmap-file=good.bitmaps \
       --run 'nbdsh -u "$uri" -c "h.pwrite(b\"x\", 100000)"'
dirtybitmap check good.bitmaps > good.out 2> good.err
expect good.out <<'EOF2'
No errors were found in the bitmap file.
EOF2
test ! -s good.err
off0=$(python3 "$edit" good.bitmaps entry-get 0 data_offset)
len=$(python3 "$edit" good.bitmaps get file_length)
dlen=$(python3 "$edit" good.bitmaps get dir_length)
cur=$(python3 "$edit" good.bitmaps current)

# refused MESSAGE CMD...: make c.bitmaps from good.bitmaps with CMD (a
# command on c.bitmaps), then check reports MESSAGE as its only
# problem, and every other user of the file refuses it with MESSAGE.
refused ()
{
    local msg="$1" r sum; shift
    cp good.bitmaps c.bitmaps
    "$@"
    sum=$(md5sum < c.bitmaps)

    r=0; dirtybitmap check c.bitmaps > out 2> err || r=$?
    cat err
    test $r = 1
    test ! -s out
    expect err <<EOF2
dirtybitmap: c.bitmaps: $msg
dirtybitmap: c.bitmaps: 1 problem found
EOF2
    for args in "info c.bitmaps" "info -U c.bitmaps" "map c.bitmaps b0" \
                "bitmap --add c.bitmaps b9" "bitmap --remove c.bitmaps b0" \
                "bitmap --add --size 1000000 c.bitmaps b9" \
                "bitmap --merge b0 -b c.bitmaps good.bitmaps b1"; do
        tool_fails -k good.bitmaps "dirtybitmap: c.bitmaps: $msg" $args
    done
    fails "c.bitmaps: $msg" \
          nbdkit -U - --filter="$FILTER" file disk.img \
                 bitmap-file=c.bitmaps bitmap=b0 --run true
    test "$(md5sum < c.bitmaps)" = "$sum"
}
poke () { python3 "$edit" c.bitmaps "$@"; }
both_slots () { poke "$@" 0; poke "$@" 1; }

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
refused "unsupported incompatible features 0x1" poke set incompat 1
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
# The directory.
refused "directory entry 2 is cut off" poke set nr_bitmaps 3
refused "directory has 40 bytes after its last entry" poke set nr_bitmaps 1
refused "directory entry 0: name length 0 (must be 1 to 1023)" \
        poke entry 0 name_length 0
refused "bitmap b0: name used twice" poke entry 1 name b0
refused "bitmap b1: granularity 2^8 is out of range (512 to 2G)" \
        poke entry 1 gbits 8
refused "bitmap b0: unknown flags 0x4" poke entry 0 flags 5
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

# Bits past the last granule: the loader ignores them, check reports.
cp good.bitmaps c.bitmaps
poke word 0 0 0x10000
r=0; dirtybitmap check c.bitmaps > out 2> err || r=$?
test $r = 1
expect err <<'EOF2'
dirtybitmap: c.bitmaps: bitmap b0: bits set past the end of the disk
dirtybitmap: c.bitmaps: 1 problem found
EOF2
# ... also in the zero padding after the last word (b1: 245 granules
# in 4 words, then 508 words of padding up to 4096 bytes).
cp good.bitmaps c.bitmaps
poke word 1 4 1
r=0; dirtybitmap check c.bitmaps > out 2> err || r=$?
test $r = 1
expect err <<'EOF2'
dirtybitmap: c.bitmaps: bitmap b1: bits set past the end of the disk
dirtybitmap: c.bitmaps: 1 problem found
EOF2
cp good.bitmaps c.bitmaps
poke word 1 511 0x8000000000000000
r=0; dirtybitmap check c.bitmaps > out 2> err || r=$?
test $r = 1
grep -F "dirtybitmap: c.bitmaps: bitmap b1: bits set past the end of the disk" err
# The last granule's own bit is no problem.
cp good.bitmaps c.bitmaps
poke word 1 3 0x10000000000000
dirtybitmap check c.bitmaps

# check lists every problem it finds.
cp good.bitmaps c.bitmaps
poke word 0 0 0x10000
poke entry-raw 1 flags 0x11
poke entry-raw 1 gbits 40
sum=$(md5sum < c.bitmaps)
r=0; dirtybitmap check c.bitmaps > out 2> err || r=$?
test $r = 1
test ! -s out
expect err <<'EOF2'
dirtybitmap: c.bitmaps: directory checksum mismatch
dirtybitmap: c.bitmaps: bitmap b1: granularity 2^40 is out of range (512 to 2G)
dirtybitmap: c.bitmaps: bitmap b1: unknown flags 0x10
dirtybitmap: c.bitmaps: bitmap b0: bits set past the end of the disk
dirtybitmap: c.bitmaps: 4 problems found
EOF2
test "$(md5sum < c.bitmaps)" = "$sum"

# A torn write of the header slot being replaced is no problem: the
# other slot is current, and the file is used as it was.
cp good.bitmaps c.bitmaps
poke set-raw seq 12345 $((1 - cur))
dirtybitmap check c.bitmaps
dirtybitmap map good.bitmaps b1 > good.map
dirtybitmap map c.bitmaps b1 > c.map
cmp c.map good.map

# A bitmap of a disk whose size is unknown has no data, so no data
# offset either.
nbdkit -U - --filter="$FILTER" file disk.img bitmap-file=unsized.bitmaps \
       bitmap=b0 action=add --run true
dirtybitmap check unsized.bitmaps
python3 "$edit" unsized.bitmaps entry 0 data_offset 8192
r=0; dirtybitmap check unsized.bitmaps > out 2> err || r=$?
test $r = 1
expect err <<'EOF2'
dirtybitmap: unsized.bitmaps: bitmap b0: data offset 8192 without data
dirtybitmap: unsized.bitmaps: 1 problem found
EOF2
r=0; dirtybitmap info unsized.bitmaps > out 2> err || r=$?
test $r = 1
grep -F "dirtybitmap: unsized.bitmaps: bitmap b0: data offset 8192 without data" err

# Files that cannot be read.
r=0; dirtybitmap check nosuch.bitmaps 2> err || r=$?
test $r = 1
grep -F "dirtybitmap: nosuch.bitmaps: No such file or directory" err
r=0; dirtybitmap check . 2> err || r=$?
test $r = 1
grep -F "dirtybitmap: .: not a regular file" err
