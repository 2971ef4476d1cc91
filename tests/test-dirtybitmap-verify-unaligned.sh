#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A disk whose size is not a multiple of 512 (3 chunks and 1000 bytes):
# its full backup verifies, to the last byte; a byte flipped in the
# short last chunk of a copy of it is reported as that chunk's range.
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/sums-lib.sh"

size=$((3 * chunk + 1000))
head -c $size /dev/urandom > vda.img
serve vda
backup vda c1.json "$PWD/backup.img" --checkpoint c1
report c1.json mode=full written=$size checksums="$PWD/vda.c1.sums"
stop vda
cmp vda.img backup.img
test "$(stat -c %s backup.img)" = $size

dirtybitmap verify backup.img vda.c1.sums > verify.out
expect verify.out <<EOF2
backup.img: all 4 chunks match the checksums of c1
EOF2

cp backup.img bad.img
python3 "$sums_py" flip $((size - 1)) bad.img
r=0
dirtybitmap verify bad.img vda.c1.sums > bad.out || r=$?
cat bad.out
test $r = 1
expect bad.out <<EOF2
differs: offset $((3 * chunk)), 1000 bytes
bad.img: 1 of 4 chunks differ from the checksums of c1
EOF2
