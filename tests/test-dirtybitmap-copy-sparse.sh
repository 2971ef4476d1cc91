#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copies keep the target sparse.  A disk of 128 MiB holding 4 MiB of
# data (and 1 MiB of zeroes written as data) is copied with --full:
# - served by nbdkit file, whose extents have the zero bit on holes,
#   to a new file;
# - served through the filter with bitmap=, whose clean ranges are
#   holes WITHOUT the zero bit ("unchanged", not "zero": they must be
#   read), to a new file;
# - to an existing file full of data;
# - to an NBD server serving a file full of data, from nbdkit file and
#   through the filter.
# Every time the target reads the same as the disk and allocates no
# more than the disk does; but an NBD target, which gets write-zeroes
# only over whole blocks of 2M on multiples of 2M, allocates the 2M
# blocks that hold data (or the zeroes written as data), and no more.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires python3 --version

size=$((128 * 1024 * 1024))
truncate -s $size disk.img
python3 - <<'EOF2'
import random
random.seed(3)
with open("disk.img", "r+b") as f:
    for i in range(16):
        f.seek(i * (8 << 20) + 4096 * random.randrange(16))
        f.write(random.randbytes(256 << 10))
    f.seek(100 << 20)
    f.write(bytes(1 << 20))          # zeroes, allocated
EOF2
sync disk.img
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=add --run true

# blocks FILE: allocated 512-byte blocks.
blocks () { sync "$1"; stat -c %b "$1"; }
disk_blocks=$(blocks disk.img)
test "$disk_blocks" -ge $((5 * 2048))
data=$((16 * 256 * 1024))

# check TARGET: same bytes, allocation no more than the disk's.
check ()
{
    cmp disk.img "$1"
    test "$(blocks "$1")" -le "$disk_blocks"
}

# The summary: the data copied, the rest zeroed.
summary="copied $data bytes, zeroed $((size - data)) bytes, [0-9]+ ranges, [0-9.]+ seconds"

# A new file, from nbdkit file: the zero ranges are not even read.
nbdkit -U - -r file disk.img \
       --run 'dirtybitmap copy --full "$uri" new1.img' > out
cat out
grep -Ex "$summary" out
check new1.img

# A new file, through the filter: everything is read, and the blocks
# of zeroes are not written.
nbdkit -U - -r --filter="$FILTER" file disk.img bitmap=b0 \
       --run 'dirtybitmap copy --full "$uri" new2.img' > out
cat out
grep -Ex "copied $data bytes, zeroed $((size - data)) bytes, 1 range, [0-9.]+ seconds" out
check new2.img

# An existing file full of data: the zeroes are punched.
yes | head -c $size > old.img
test "$(blocks old.img)" -ge $((size / 512))
nbdkit -U - -r file disk.img \
       --run 'dirtybitmap copy --full "$uri" old.img' > out
cat out
grep -Ex "$summary" out
check old.img

# An NBD server serving a file full of data: write-zeroes punch too,
# over whole blocks of 2M.  The data is in the first 2M of each 8M,
# and the zeroes written as data fill half of the block at 100M: 17
# blocks of 2M are written, the rest is zeroed.
yes | head -c $size > nbd.img
sock="$tmpdir/nbd.sock"
start_nbdkit -P "$tmpdir/nbd.pid" -U "$sock" file nbd.img
nbdkit -U - -r file disk.img \
       --run "dirtybitmap copy --full \"\$uri\" 'nbd+unix:///?socket=$sock'" \
       > out
cat out
written=$((17 * 2 * 1024 * 1024))
grep -Ex "copied $written bytes, zeroed $((size - written)) bytes, [0-9]+ ranges, [0-9.]+ seconds" out
kill_nbdkit "$(cat nbd.pid)"
cmp disk.img nbd.img
# (and a few blocks of the file system's own, as for the disk)
test "$(blocks nbd.img)" -le $(( written / 512 + 64 ))

# The same through the filter: everything is read, in pieces of 2M by
# default for an NBD target, and those that read as zeroes are zeroed;
# now the block at 100M is one of them: 16 blocks are written.
yes | head -c $size > nbd.img
sock="$tmpdir/nbd2.sock"
start_nbdkit -P "$tmpdir/nbd.pid" -U "$sock" file nbd.img
nbdkit -U - -r --filter="$FILTER" file disk.img bitmap=b0 \
       --run "dirtybitmap copy --full \"\$uri\" 'nbd+unix:///?socket=$sock'" \
       > out
cat out
written=$((16 * 2 * 1024 * 1024))
grep -Ex "copied $written bytes, zeroed $((size - written)) bytes, 1 range, [0-9.]+ seconds" out
kill_nbdkit "$(cat nbd.pid)"
cmp disk.img nbd.img
test "$(blocks nbd.img)" -le $(( written / 512 + 64 ))
