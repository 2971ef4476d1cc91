#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The order of syncs in durability=coarse, seen with strace: the
# bitmap file is synced before the first write to each coarse granule
# reaches the disk, and not for other writes, even to new granules;
# concurrent first writes to coarse granules share syncs; a flush
# syncs the bits before the disk.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires strace -V

yes | head -c 8M > disk.img
dirtybitmap bitmap --add -g 4K --size 8M disk.img.bitmaps b0

# events LOG: "sync bitmaps", "sync disk" (an fdatasync, when it
# returned), "sync range" (an msync of the bitmap file) and "write
# disk OFFSET" (a pwrite, when it started).
cp "$abs_top_srcdir/tests/coarse-strace-events.py" events.py

trace ()
{
    strace -f -y -o strace.log -e trace=pwrite64,fdatasync,msync \
           nbdkit -U - --filter="$FILTER" file disk.img \
           durability=coarse coarse-granularity=1M "$@"
    python3 events.py strace.log > events
    cat events
}

# The start: a commit (shadows made, two syncs); the first write
# records the open state (a commit while serving: only its header is
# synced, "sync range").  Then: a sync before the write
# to coarse granule 0 (1M), none for a new granule of it, one before
# coarse granule 1, none for granule 0 again; a flush syncs the bits
# first; a clean stop commits (two more).
trace --run 'nbdsh -u "$uri" -c "h.pwrite(b\"a\", 8192)" \
                             -c "h.pwrite(b\"b\", 16384)" \
                             -c "h.pwrite(b\"c\", 1048676)" \
                             -c "h.pwrite(b\"d\", 8192)" \
                             -c "h.pwrite(b\"e\", 20480)" \
                             -c "h.flush()"'
expect events <<'EOF2'
sync bitmaps
sync bitmaps
sync range
sync bitmaps
write disk 8192
write disk 16384
sync bitmaps
write disk 1048676
write disk 8192
write disk 20480
sync bitmaps
sync disk
sync bitmaps
sync bitmaps
sync bitmaps
EOF2

# A later run: the shadow bits of granules 0 and 1 are durable in the
# file, so writes there, even to new granules, sync nothing; granule 2
# does.
trace --run 'nbdsh -u "$uri" -c "h.pwrite(b\"f\", 32768)" \
                             -c "h.pwrite(b\"g\", 1048576 + 65536)" \
                             -c "h.pwrite(b\"h\", 2097152 + 4096)"'
expect events <<'EOF2'
sync bitmaps
sync bitmaps
sync range
write disk 32768
write disk 1114112
sync bitmaps
write disk 2101248
sync bitmaps
sync bitmaps
sync bitmaps
EOF2

# Group commit: 64 concurrent writes to new granules, 16 in each of 4
# new coarse granules: at most one sync per coarse granule, and none
# of them goes down before the first sync that follows the start's and
# the open record's commits (two syncs and a ranged one).
cat > burst.py <<'EOF2'
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
for i in range(64):
    h.aio_pwrite(nbd.Buffer.from_bytearray(bytearray(b"c" * 512)),
                 4194304 + (i % 4) * 1048576 + (i // 4) * 4096)
while h.aio_in_flight() > 0:
    h.poll(-1)
EOF2
trace --run 'python3 burst.py "$uri"'
writes=$(grep -c '^write disk' events)
test $writes -eq 64
grep -n . events | sed -n 1,3p | cut -d: -f2 | paste -sd, | grep -Fx 'sync bitmaps,sync bitmaps,sync range'
awk '/^sync bitmaps/ { n++ } /^write disk/ && n < 3 { exit 1 }' events
syncs=$(awk '/^write disk/ { last = NR } { line[NR] = $0 }
             END { n = 0
                   for (i = 1; i <= last; i++)
                       if (line[i] == "sync bitmaps") n++
                   print n - 2 }' events)
echo "group commit: $syncs syncs for 4 coarse granules and $writes writes"
test $syncs -ge 1
test $syncs -le 4
dirtybitmap map disk.img.bitmaps b0 > map
expect map <<'EOF2'
         0        8192    1  hole
      8192        4096    0  data
     12288        4096    1  hole
     16384        8192    0  data
     24576        8192    1  hole
     32768        4096    0  data
     36864     1011712    1  hole
   1048576        4096    0  data
   1052672       61440    1  hole
   1114112        4096    0  data
   1118208      983040    1  hole
   2101248        4096    0  data
   2105344     2088960    1  hole
   4194304       65536    0  data
   4259840      983040    1  hole
   5242880       65536    0  data
   5308416      983040    1  hole
   6291456       65536    0  data
   6356992      983040    1  hole
   7340032       65536    0  data
   7405568      983040    1  hole
EOF2
