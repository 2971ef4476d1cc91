#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A write-back of a stopped bitmap's bits fails while it settles, and
# the error is reported to a sync of the writers' descriptor first (a
# flush, a FUA write: durability.c) before the settling commit syncs:
# the kernel reports a failed write-back once to each open file, so
# the settling commit must still hear of it.  The transaction must
# then fail and say so, and b0 must be inconsistent, not settled with
# bits that never reached the disk.
#
# The bitmap file lives on ext4 on a loop device whose backing file is
# on a small tmpfs.  gdb stops nbdkit where the settling commit
# begins; there the block of b0's bits is punched out of the backing
# file and the tmpfs filled, so that writing it back fails (ENOSPC
# below the loop device: EIO), and an fdatasync of the writers'
# descriptor takes the report.  Then the tmpfs is emptied again, and
# the settling commit goes on.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires gdb --version
requires mkfs.ext4 -V
requires filefrag -V
requires python3 -c 'import nbd'
requires test "$(id -u)" -eq 0
mkdir tmp
requires mount -t tmpfs -o size=48M tmpfs tmp
cleanup_fn umount -l "$PWD/tmp"
# The whole backing file allocated in the tmpfs: only what is punched
# out later needs space.
dd if=/dev/zero of=tmp/lo.img bs=1M count=32 status=none
loop=$(losetup -f --show tmp/lo.img)
cleanup_fn losetup -d "$loop"
mkfs.ext4 -q -F -b 4096 -E nodiscard "$loop"
mkdir mnt
mount "$loop" mnt
cleanup_fn umount -l "$PWD/mnt"
truncate -s 64M disk.img
bm="$PWD/mnt/disk.bitmaps"
uri="nbd+unix:///?socket=$PWD/nbd.sock"
edit="$abs_top_srcdir/tests/bmfile-edit.py"

start_nbdkit -P "$PWD/pid" -U nbd.sock --filter="$FILTER" file disk.img \
             bitmap-file="$bm" bitmap=b0 action=add granularity=4K \
             durability=flush control="$PWD/ctl.sock"
pid=$(cat pid)
# b0's page of bits is on the disk (the flush); then a bit is set in
# it again, in the page cache only.  (Writeback may still take the
# page out before the settle, when other programs fill the page
# cache: so gdb writes the page's own bytes into it again before it
# syncs.)
nbdsh -u "$uri" -c 'h.pwrite(b"a" * 4096, 0)' -c 'h.flush()'
nbdsh -u "$uri" -c 'h.pwrite(b"b" * 4096, 8192)'

# Where b0's bits are in the backing file.
off=$(python3 "$edit" "$bm" entry-get 0 data_offset)
phys=$(filefrag -e -b4096 "$bm" | awk -v l=$((off / 4096)) -F'[ :.]+' '
    $2 ~ /^[0-9]+$/ && l >= $3 && l <= $4 { print $5 + l - $3; exit }')
test -n "$phys"
# The writers' descriptor: the first one open on the bitmap file (made
# under a private name, so /proc may show that name, deleted).
fd=$(for f in /proc/$pid/fd/*; do
         case "$(readlink "$f")" in "$bm"*) basename "$f" ;; esac
     done | sort -n | head -1)
test -n "$fd"

# The page is dirtied again, and synced, by another program: the
# write-back error is the file's, so the writers' descriptor is told
# at its next sync too.  (Not by calls made in nbdkit through gdb:
# gdb 13 cannot restore the registers after an inferior call on
# some kernels, "Couldn't write extended state status".)
cat > redirty.py <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
off = int(sys.argv[2])
os.pwrite(fd, os.pread(fd, 4096, off), off)
try:
    os.fdatasync(fd)
    print("redirty: synced")
except OSError as e:
    print("redirty: sync failed: %s" % os.strerror(e.errno))
PY
cat > eio.gdb <<EOF
set pagination off
set confirm off
break bmf_txn_settle
echo ready\\n
continue
shell fallocate -p -o $((phys * 4096)) -l 4096 tmp/lo.img
shell dd if=/dev/zero of=tmp/fill bs=1M status=none 2>/dev/null; true
shell python3 "$PWD/redirty.py" "$bm" $off
shell rm tmp/fill
delete
detach
quit
EOF
gdb -q -batch -p "$pid" -x eio.gdb > gdb.log 2>&1 &
gdb_pid=$!
cleanup_fn sh -c "kill $gdb_pid 2>/dev/null; :"
wait_until 30 grep -q '^ready' gdb.log
python3 "$abs_top_srcdir/tests/control.py" send "$PWD/ctl.sock" \
        '{"execute": "transaction", "arguments": {"actions": [{"action": "add", "bitmap": "b1"}, {"action": "disable", "bitmap": "b0"}]}}' \
        > reply
wait $gdb_pid
cat gdb.log reply
# The write-back failed, and the writers' descriptor was told.
grep -F 'Breakpoint 1, ' gdb.log
grep '^redirty: sync failed: ' gdb.log
# The transaction says what happened, and b0 is not trusted.
grep -F '"error"' reply
grep -F 'the bits of the bitmaps that stopped recording cannot be made durable' reply
kill_nbdkit "$pid"
dirtybitmap info "$bm" > info
cat info
grep -A4 'name: b0' info | grep -F 'consistent: false'
