#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Hostile bitmap files: empty, truncated, garbage, a foreign magic, a
# future version, bad header and directory checksums, sizes that do
# not agree.  nbdkit refuses each with an error naming the file and
# the problem, and leaves the file exactly as it was; so does a
# writing dirtybitmap.  A header slot torn by a crash (bad checksum)
# is passed over for the other one.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

edit="$abs_top_srcdir/tests/bmfile-edit.py"
yes | head -c 1M > disk.img
bm="$PWD/disk.img.bitmaps"

# The base file: two bitmaps with some bits, two valid header slots.
dirtybitmap bitmap --add -g 4K --size 1M base.bitmaps b0
dirtybitmap bitmap --add -g 64K base.bitmaps b1
nbdkit -U - --filter="$FILTER" file disk.img bitmap-file=base.bitmaps \
       --run 'nbdsh -u "$uri" -c "h.pwrite(b\"x\", 8192)"'
length=$(python3 "$edit" base.bitmaps get file_length)
test "$(stat -c %s base.bitmaps)" -eq $length

# hostile PROBLEM: the forged disk.img.bitmaps is refused by nbdkit
# and by a writing dirtybitmap, each naming it and PROBLEM, and left
# as it was; dirtybitmap check finds the problem too.
hostile ()
{
    local problem="$1"

    fails -k "$bm" "nbdkit: error: dirtybitmap: $bm: $problem" \
          nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 --run true
    tool_fails -k "$bm" "dirtybitmap: $bm: $problem" bitmap --add "$bm" b2
    tool_fails "$bm: $problem" check "$bm"
}

: > "$bm"
hostile "empty file (truncated?)"

head -c 100 base.bitmaps > "$bm"
hostile "truncated: 100 bytes, too short for a header"

head -c $((length - 4096)) base.bitmaps > "$bm"
hostile "truncated: $((length - 4096)) bytes, the header says $length"

head -c $length /dev/urandom > "$bm"
hostile "not a dirtybitmap file (bad magic)"

cp base.bitmaps "$bm"
python3 "$edit" "$bm" set magic QFI.FILE 0
python3 "$edit" "$bm" set magic QFI.FILE 1
hostile "not a dirtybitmap file (bad magic)"

if qemu-img --version >/dev/null 2>&1; then
    rm -f "$bm"
    qemu-img create -f qcow2 "$bm" 1M
    hostile "not a dirtybitmap file (bad magic)"
fi

cp base.bitmaps "$bm"
python3 "$edit" "$bm" set version 2
hostile "unsupported format version 2 (this program reads version 1)"

# Both slots' checksums broken.
cp base.bitmaps "$bm"
python3 "$edit" "$bm" set-raw seq 99 0
python3 "$edit" "$bm" set-raw seq 99 1
hostile "header checksum mismatch"

# The directory changed under its checksum.
cp base.bitmaps "$bm"
python3 "$edit" "$bm" entry-raw 0 gbits 13
hostile "directory checksum mismatch"

# Sizes that do not agree: b0's data is sized for 1M, not 1G.
cp base.bitmaps "$bm"
python3 "$edit" "$bm" set disk_size 1073741824
hostile "bitmap b0: data length 4096 does not match the disk size 1073741824 at granularity 4096"

cp base.bitmaps "$bm"
python3 "$edit" "$bm" set file_length $((length + 8192))
hostile "truncated: $length bytes, the header says $((length + 8192))"

# A torn header write: the newest slot fails its checksum, so the
# other, older slot is current (the state before the last commit: the
# clean close of the writing run left the open record there).
cp base.bitmaps "$bm"
slot=$(python3 "$edit" "$bm" current)
python3 "$edit" "$bm" set-raw seq 12345
test "$(python3 "$edit" "$bm" current)" -eq $((1 - slot))
dirtybitmap check "$bm"
map_of -r --filter="$FILTER" file disk.img bitmap=b0 > map
expect map <<'EOF2'
         0        8192    1  hole
      8192        4096    0  data
     12288     1036288    1  hole
EOF2
