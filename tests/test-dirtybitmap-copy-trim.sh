#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap copy --trim-source trims every range on the source, and
# only after the target has acknowledged the write or write-zeroes of
# that range.  Source and target are two exports of one nbdkit, so one
# log filter sees both in order.
source ./functions.sh
set -e
set -x
requires nbdkit --filter=log null --version
requires python3 --version

size=$((4 * 1024 * 1024))
mkdir d
truncate -s $size d/disk.img
yes | head -c $((2 * 1024 * 1024 + 12345)) | dd of=d/disk.img conv=notrunc
cp d/disk.img disk.orig
yes | head -c $size > d/backup.img

sock="$tmpdir/s.sock"
start_nbdkit -P "$tmpdir/s.pid" -U "$sock" --filter=log file dir=d \
             logfile="$tmpdir/s.log"
dirtybitmap copy --full --trim-source --request-size 256K \
            "nbd+unix:///disk.img?socket=$sock" \
            "nbd+unix:///backup.img?socket=$sock" > out
cat out
kill_nbdkit "$(cat s.pid)"

# The backup holds the disk; the source was trimmed everywhere.
cmp disk.orig d/backup.img
cmp d/disk.img <(head -c $size /dev/zero)

# Each trim of the source comes after the target's successful write or
# zero of the same bytes.
python3 - s.log $size <<'EOF2'
import re, sys
def covered(ranges, start, end):
    for s, e in sorted(ranges):
        if s <= start < e:
            start = e
    return start >= end

export = {}              # connection -> export name
req = {}                 # (connection, id) -> (name, offset, count)
on_target = []           # ranges acknowledged by the target, in order
trims = 0
for line in open(sys.argv[1]):
    m = re.search(r"connection=(\d+) Connect export=(\S+)", line)
    if m:
        export[m[1]] = m[2]
        continue
    m = re.search(r"connection=(\d+) (\w+) id=(\d+) offset=0x([0-9a-f]+) "
                  r"count=0x([0-9a-f]+)", line)
    if m:
        req[(m[1], m[3])] = (m[2], int(m[4], 16), int(m[5], 16))
        if m[2] == "Trim":
            assert export[m[1]] == "disk.img", line
            off, count = int(m[4], 16), int(m[5], 16)
            assert covered(on_target, off, off + count), \
                ("trim before the target had it", line)
            trims += count
        continue
    m = re.search(r"connection=(\d+) \.\.\.(\w+) id=(\d+) return=0", line)
    if m and export[m[1]] == "backup.img" and m[2] in ("Write", "Zero"):
        name, off, count = req[(m[1], m[3])]
        on_target.append((off, off + count))
assert trims == int(sys.argv[2]), trims
EOF2
