#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# restore-from= from a source with holes: the fill writes the ranges
# that the source reads as zeroes as zeroes (holes in the disk file),
# and everything else from the source's data.  The source has more
# extents than the fill asks for at once (it asks again from where the
# answer stopped): data granules between holes, a long hole, and a
# short last granule of data, over a disk of garbage.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
source "$abs_top_srcdir/tests/restore-lib.sh"

# 32M of 64K of data then 64K of hole (512 extents), 8M of hole, 12K
# of data: 40M and 12K.
size=$((40 * 1024 * 1024 + 12288))
rm -f image
truncate -s $size image
for (( k = 0; k < 256; ++k )); do
    head -c 65536 /dev/urandom |
        dd of=image bs=64K seek=$((2 * k)) conv=notrunc status=none
done
head -c 12288 /dev/urandom |
    dd of=image bs=4K seek=$((40 * 256)) conv=notrunc status=none
yes G | head -c $size > disk.img
serve_source image
if [ "$(nbdinfo --map "$src" | grep -c zero)" -lt 256 ]; then
    echo "$0: the source does not report its holes: skipped"
    exit 77
fi

nbdkit -f -P "$PWD/pid" -U "$PWD/sock" --filter="$FILTER" file disk.img \
       restore-from="$src" control="$PWD/ctl" 2> nbdkit.err &
nbdkit_pid=$!
cleanup_fn kill_nbdkit $nbdkit_pid
python3 "$restore_py" wait ctl
kill_nbdkit $nbdkit_pid
cat nbdkit.err

cmp disk.img image
# The holes of the source are holes of the disk (16M and 12K of data,
# and less than 1M more).
allocated=$(( $(stat -c %b disk.img) * $(stat -c %B disk.img) ))
echo "disk.img allocates $allocated bytes"
test $allocated -lt $(( 17 * 1024 * 1024 + 12288 ))
