#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A power loss right after a live transaction that disables the only
# recording bitmap: the bitmap as the disk holds it is the bitmap as
# the server had it when it replied, and it is consistent (a disabled
# bitmap stays so after a power loss).  Writes go on all through the
# transaction, and the bitmap gets their bits until the transaction
# takes effect; the header that says it is disabled and settled must
# not reach the disk before them.
#
# The bitmap file lives on an ext4 file system on a loop device; the
# power loss is a copy of the loop device's backing file taken as soon
# as the reply comes (what the file system had written to its device
# by then); the reboot is another boot id.  Every msync of the bitmap
# file is slowed by strace, so that writes land while each one runs.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires strace -V
requires_boot_id_mount
requires_loop_ext4 lo.img

mount_loop_ext4 lo.img mnt
truncate -s 64M disk.img
control="$abs_top_srcdir/tests/control.py"

# A write of a new granule every 100 ms; each logged when it completed.
cat > writer.py <<'EOF'
import nbd, sys, time
h = nbd.NBD()
h.connect_uri(sys.argv[1])
end = time.monotonic() + 6
off = 1 << 20
while time.monotonic() < end:
    h.pwrite(b"w" * 4096, off)
    print("%.6f %d" % (time.monotonic(), off), flush=True)
    off += 1 << 20
    time.sleep(0.1)
EOF
cat > steps.sh <<EOF
set -e
nbdsh -u "\$1" -c 'h.pwrite(b"a" * 4096, 0)'
python3 writer.py "\$1" > writes.log &
sleep 0.5
python3 -c 'import time; print("%.6f" % time.monotonic())' > sent
python3 "$control" ok "$PWD/ctl.sock" '{"execute": "transaction", "arguments": {"actions": [{"action": "disable", "bitmap": "b0"}]}}'
cp --sparse=always lo.img snap.img
python3 -c 'import time; print("%.6f" % time.monotonic())' > reply
dirtybitmap map -U mnt/disk.bitmaps b0 > live.map
wait
EOF
strace -f -qq -o /dev/null -e trace=msync -e inject=msync:delay_enter=400000 \
       nbdkit -U - --filter="$FILTER" file disk.img \
       bitmap-file="$PWD/mnt/disk.bitmaps" bitmap=b0 action=add \
       granularity=4K control="$PWD/ctl.sock" --run 'bash steps.sh "$uri"'

# The disk as the power loss left it, on another boot.
losetup -d "$loop"
loop=$(losetup -f --show snap.img)
cleanup_fn losetup -d "$loop"
mount "$loop" mnt
cp mnt/disk.bitmaps after.bitmaps
umount mnt
echo 00000000-1111-2222-3333-444444444444 > boot_id
unshare -m sh -c "mount --bind '$PWD/boot_id' /proc/sys/kernel/random/boot_id &&
                  dirtybitmap info after.bitmaps > info &&
                  dirtybitmap map after.bitmaps b0 > map"
cat info live.map
grep -F 'machine restarted since' info
grep -A5 'name: b0' info | grep -F 'recording: false'
grep -A5 'name: b0' info | grep -F 'consistent: true'
# b0 on the disk is b0 as the server had it when it replied.
expect map < live.map
# That is every write that completed before the transaction was sent,
# and some that it recorded while it ran (so the test saw the window).
sent=$(cat sent) reply=$(cat reply)
before=$(awk -v t="$sent" '$1 < t { print $2 }' writes.log)
during=$(awk -v s="$sent" -v r="$reply" '$1 >= s && $1 < r { print $2 }' writes.log)
test -n "$before"
for off in 0 $before; do
    awk -v o="$off" '$3 == 0 && $1 <= o && o < $1 + $2 { f = 1 }
                     END { exit !f }' live.map
done
in_b0=0
for off in $during; do
    if awk -v o="$off" '$3 == 0 && $1 <= o && o < $1 + $2 { f = 1 }
                        END { exit !f }' live.map; then
        in_b0=$((in_b0 + 1))
    fi
done
echo "$(echo $before | wc -w) writes before the transaction, $(echo $during | wc -w) during it, $in_b0 of those in b0"
test $in_b0 -ge 1
