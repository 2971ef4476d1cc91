#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# With durability=strict, a write to a new granule goes down only once
# its bit is on stable storage, even when another request's sync (a
# flush, a FUA write, another first touch: group commit) runs while
# the write is setting its bits.  A sync covers the tickets taken when
# it starts; a ticket taken before the bits are set would let a sync
# that started between the two cover the ticket but not the bits, and
# the write would go down with its bit in the page cache only.
#
# gdb holds the writer inside that window (at its first bits_set_range)
# and runs, from there, the sync another request would run then.  The
# bitmap file lives on an ext4 file system on a loop device; once the
# write has completed, a copy of the loop device's backing file is
# what a power loss would leave, and b0 there must have the write.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires gdb --version
requires mkfs.ext4 -V
requires python3 -c 'import nbd'
requires test "$(id -u)" -eq 0
truncate -s 64M lo.img
requires sh -c 'l=$(losetup -f --show lo.img) && losetup -d $l'

loop=$(losetup -f --show lo.img)
cleanup_fn losetup -d "$loop"
mkfs.ext4 -q -F "$loop"
mkdir mnt
mount "$loop" mnt
cleanup_fn umount -l "$PWD/mnt"
truncate -s 64M disk.img
uri="nbd+unix:///?socket=$PWD/nbd.sock"

start_nbdkit -P "$PWD/pid" -U nbd.sock --filter="$FILTER" file disk.img \
             bitmap-file="$PWD/mnt/disk.bitmaps" bitmap=b0 action=add \
             granularity=4K durability=strict
pid=$(cat pid)
# The first write of the run records the open state: not this one.
nbdsh -u "$uri" -c 'h.pwrite(b"a" * 4096, 0)'

cat > race.gdb <<'EOF'
set pagination off
set confirm off
break bits_set_range
echo ready\n
continue
call (int) dur_sync_to ((unsigned long) dur_requested ())
delete
detach
quit
EOF
gdb -q -batch -p "$pid" -x race.gdb > gdb.log 2>&1 &
gdb_pid=$!
cleanup_fn sh -c "kill $gdb_pid 2>/dev/null; :"
for (( i = 0; i < 300; ++i )); do
    grep -q '^ready' gdb.log && break
    sleep 0.1
done
grep -q '^ready' gdb.log
nbdsh -u "$uri" -c 'h.pwrite(b"b" * 4096, 1 << 20)'
wait $gdb_pid
cat gdb.log
# gdb stopped the writer in bits_set_range and ran the sync there.
grep -F 'Breakpoint 1, bits_set_range' gdb.log
grep -E '^\$1 = 0$' gdb.log

# What the device holds now: the write's granule is dirty in b0.
cp --sparse=always lo.img snap.img
kill_nbdkit "$pid"
loop2=$(losetup -f --show snap.img)
cleanup_fn losetup -d "$loop2"
mkdir snap
mount "$loop2" snap
cleanup_fn umount -l "$PWD/snap"
dirtybitmap map -U snap/disk.bitmaps b0 | awk '$3 == 0' > map
cat map
expect map <<'EOF'
         0        4096    0  data
   1048576        4096    0  data
EOF
