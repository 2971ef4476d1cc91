#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What a transaction makes durable while the server runs in
# durability=flush, seen with strace: a checkpoint (add b1, disable
# b0) syncs b1's new region and the directory before the cut, then a
# header that says b0 settles
# (writes may still be setting its bits); once none can, it syncs b0's
# bits (they must survive a power loss from now on: a disabled bitmap
# stays consistent), then a header that says b0 has settled, all
# before the reply.  It syncs no more of the file (not the bits still
# being recorded) and calls no fdatasync.  The bits are the right ones.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires strace -V

truncate -s 512M disk.img
bm="$PWD/disk.img.bitmaps"
ctl="$PWD/ctl.sock"
control="$abs_top_srcdir/tests/control.py"
edit="$abs_top_srcdir/tests/bmfile-edit.py"

# Markers in the trace: an access() of a path that does not exist.
cat > steps.sh <<EOF
set -e
nbdsh -u "\$1" -c 'h.pwrite(b"a" * 4096, 8192)'
python3 -c 'import os; os.access("/mark-begin", os.F_OK)'
python3 "$control" ok "$ctl" '{"execute": "transaction", "arguments": {"actions": [{"action": "add", "bitmap": "b1"}, {"action": "disable", "bitmap": "b0"}]}}'
python3 -c 'import os; os.access("/mark-end", os.F_OK)'
nbdsh -u "\$1" -c 'h.pwrite(b"b" * 4096, 16384)'
EOF
strace -f -y -o strace.log \
       -e trace=mmap,msync,sync_file_range,pwrite64,fdatasync,access \
       nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=add \
       granularity=4K durability=flush control="$ctl" \
       --run 'bash steps.sh "$uri"'

b0_offset=$(python3 "$edit" "$bm" entry-get 0 data_offset)
b0_length=$(python3 "$edit" "$bm" entry-get 0 data_length)
test "$b0_length" -eq 16384

# The syncs of the bitmap file between the markers, in order: "sync
# OFFSET LENGTH" (a mapping of the file, then msync: a ranged
# fdatasync), "write OFFSET LENGTH" (a write-back waited for, before
# the msync that makes it durable), "header OFFSET" (a write of a
# header slot), "fdatasync".
python3 - strace.log > syncs <<'EOF'
import re, sys
# The bitmap file (under its private name if it was created by this
# run: that name is gone since).
FD = r"\d+<[^>]*\.bitmaps[^>]*>(?:\(deleted\))?"
on = False
mapped = {}
for line in open(sys.argv[1]):
    if "/mark-begin" in line:
        on = True
    elif "/mark-end" in line:
        break
    if not on:
        continue
    pid = line.split()[0]
    m = re.search(r"mmap\(NULL, (\d+), PROT_READ, MAP_SHARED, " + FD +
                  r", (0x[0-9a-f]+|0)\) = (0x[0-9a-f]+)", line)
    if m:
        mapped[m.group(3)] = (int(m.group(2), 16), int(m.group(1)))
        continue
    m = re.search(r"msync\((0x[0-9a-f]+), \d+, MS_SYNC\) = 0", line)
    if m:
        print("sync %d %d" % mapped[m.group(1)])
        continue
    m = re.search(r"sync_file_range\(" + FD + r", (\d+), (\d+), "
                  r"SYNC_FILE_RANGE_WAIT_BEFORE\|SYNC_FILE_RANGE_WRITE\|"
                  r"SYNC_FILE_RANGE_WAIT_AFTER\) = 0", line)
    if m:
        print("write %s %s" % (m.group(1), m.group(2)))
        continue
    m = re.search(r"pwrite64\(" + FD + r", .*, 256, (0|4096)\)", line)
    if m:
        print("header", m.group(1))
        continue
    if re.search(r"fdatasync\(" + FD, line):
        print("fdatasync")
EOF
cat syncs
b1_offset=$(python3 "$edit" "$bm" entry-get 1 data_offset)
b1_length=$(python3 "$edit" "$bm" entry-get 1 data_length)
dir_offset=$(python3 "$edit" "$bm" get dir_offset)
dir_length=$(python3 "$edit" "$bm" get dir_length)
first=$(awk '$1 == "header" { print $2; exit }' syncs)
last=$(awk '$1 == "header" { s = $2 } END { print s }' syncs)
# The directory of the first header (b0 settling) is not in the file
# any more; it has the final one's length.
dir_a=$(awk 'NR == 1 { print $2 }' syncs)
# Before the cut, the new directory and b1's new region, with one
# cache flush; then the header (b0 settling).  Then b0's bits and the
# directory of the settled state, and its header.  Nothing else: not
# the bits still being recorded (b1's after the cut), and no
# fdatasync.
expect syncs <<EOF
write $dir_a $dir_length
sync $b1_offset $b1_length
header $first
sync $first 4096
write $dir_offset $dir_length
sync $b0_offset $b0_length
header $last
sync $last 4096
EOF
# Settled: b0 is disabled (flags 0: not enabled, not settling).
test "$(python3 "$edit" "$bm" entry-get 0 flags)" -eq 0

# The cut: the write before is in b0 only, the write after in b1 only.
dirtybitmap map "$bm" b0 | awk '$3 == 0' > map0
expect map0 <<'EOF'
      8192        4096    0  data
EOF
dirtybitmap map "$bm" b1 | awk '$3 == 0' > map1
expect map1 <<'EOF'
         0       65536    0  data
EOF
