#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The order of syncs, seen with strace: with durability=strict the
# bitmap file is synced before a write to a new granule reaches the
# disk, and not at all for a granule already durably dirty; concurrent
# first touches share syncs.  With durability=flush bits are synced
# before a flush or a FUA write goes down, and otherwise not.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires strace -V

yes | head -c 4M > disk.img
dirtybitmap bitmap --add -g 4K --size 4M disk.img.bitmaps b0

# events LOG: the log of strace -f -y as lines "sync bitmaps",
# "sync disk" (an fdatasync, when it returned), "sync range" (an msync:
# only the bitmap file is synced so) and "write disk OFFSET" (a pwrite,
# when it started).
cat > events.py <<'EOF2'
import re, sys
pending = {}
def name(path):
    return "bitmaps" if path.endswith(".bitmaps") else "disk"
for line in open(sys.argv[1]):
    m = re.match(r"(\d+) +(.*)", line)
    if not m:
        continue
    pid, rest = m.groups()
    m = re.match(r"fdatasync\(\d+<([^>]*)>\)\s*= 0", rest)
    if m:
        print("sync", name(m.group(1)))
        continue
    m = re.match(r"fdatasync\(\d+<([^>]*)> <unfinished", rest)
    if m:
        pending[pid] = m.group(1)
        continue
    if re.match(r"<\.\.\. fdatasync resumed>\)\s*= 0", rest):
        print("sync", name(pending.pop(pid)))
        continue
    if re.match(r"msync\(.*\)\s*= 0", rest) or \
       re.match(r"<\.\.\. msync resumed>\)\s*= 0", rest):
        print("sync range")
        continue
    m = re.match(r"pwrite64\(\d+<([^>]*disk\.img)>, .*, (\d+)\)", rest) or \
        re.match(r"pwrite64\(\d+<([^>]*disk\.img)>, .*, (\d+) <unfinished", rest)
    if m:
        print("write disk", m.group(2))
EOF2

trace ()
{
    strace -f -y -o strace.log ${inject:+-e inject=$inject} \
           -e trace=pwrite64,fdatasync,msync \
           nbdkit -U - --filter="$FILTER" file disk.img "$@"
    python3 events.py strace.log > events
    cat events
}

# durability=flush: the start commits (two syncs of the file); the
# first write records the open state (a commit while serving: only its
# header is synced, "sync range"), other new granules cost nothing, a
# flush syncs the bits before the disk, and a FUA write to a new
# granule syncs them first.
trace durability=flush \
      --run 'nbdsh -u "$uri" -c "h.pwrite(b\"a\", 8192)" \
                             -c "h.pwrite(b\"b\", 16384)" \
                             -c "h.flush()" \
                             -c "h.pwrite(b\"c\", 24576, nbd.CMD_FLAG_FUA)" \
                             -c "h.pwrite(b\"d\", 24676, nbd.CMD_FLAG_FUA)"'
expect events <<'EOF2'
sync bitmaps
sync bitmaps
sync range
write disk 8192
write disk 16384
sync bitmaps
sync disk
sync bitmaps
write disk 24576
sync disk
write disk 24676
sync disk
sync bitmaps
sync bitmaps
sync bitmaps
EOF2

# durability=strict: a sync before every write to a new granule, none
# for one already durably dirty (in this run or an earlier one).
trace durability=strict \
      --run 'nbdsh -u "$uri" -c "h.pwrite(b\"e\", 32768)" \
                             -c "h.pwrite(b\"f\", 32868)" \
                             -c "h.pwrite(b\"g\", 40960)" \
                             -c "h.pwrite(b\"h\", 8192)"'
expect events <<'EOF2'
sync bitmaps
sync bitmaps
sync range
sync bitmaps
write disk 32768
write disk 32868
sync bitmaps
write disk 40960
write disk 8192
sync bitmaps
sync bitmaps
sync bitmaps
EOF2

# Group commit: 64 concurrent writes, each to a new granule, and each
# preceded by a sync of the bitmaps; fewer syncs than writes.
cat > burst.py <<'EOF2'
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
for i in range(64):
    h.aio_pwrite(nbd.Buffer.from_bytearray(bytearray(b"c" * 512)),
                 1048576 + i * 4096)
while h.aio_in_flight() > 0:
    h.poll(-1)
EOF2
# (Each fdatasync takes 50 ms longer, so that writes arrive while one
# runs, whatever the speed of the machine.)
inject=fdatasync:delay_exit=50000 \
    trace durability=strict --run 'python3 burst.py "$uri"'
writes=$(grep -c '^write disk' events)
test $writes -eq 64
# The syncs from the first write to the last one: after the start's
# (two) and the open record's ("sync range"), the group commits.
grep -n . events | sed -n 1,3p | cut -d: -f2 | paste -sd, | grep -Fx 'sync bitmaps,sync bitmaps,sync range'
syncs=$(awk '/^write disk/ { last = NR } { line[NR] = $0 }
             END { n = 0
                   for (i = 4; i <= last; i++)
                       if (line[i] == "sync bitmaps") n++
                   print n }' events)
echo "group commit: $syncs syncs for $writes first touches"
test $syncs -ge 1
test $syncs -lt $writes
# Nothing reaches the disk before the first group sync.
awk 'NR > 3 && /^sync bitmaps/ { ok = 1 } /^write disk/ && !ok { exit 1 }' \
    events
dirtybitmap map disk.img.bitmaps b0 > map
expect map <<'EOF2'
         0        8192    1  hole
      8192        4096    0  data
     12288        4096    1  hole
     16384        4096    0  data
     20480        4096    1  hole
     24576        4096    0  data
     28672        4096    1  hole
     32768        4096    0  data
     36864        4096    1  hole
     40960        4096    0  data
     45056     1003520    1  hole
   1048576      262144    0  data
   1310720     2883584    1  hole
EOF2
