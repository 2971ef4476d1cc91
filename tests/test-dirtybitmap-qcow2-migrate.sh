#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The recipe of dirtybitmap(1), "Moving a qcow2 disk to the filter,
# with its bitmaps", run as the man page writes it (its commands are
# taken from the page; only /run/ becomes this directory and the
# filter the one built here).  A qcow2 disk whose bitmap b0 qemu added
# at the last backup, and filled since, becomes a raw disk served by
# the filter; the bitmap arrives as qemu's map says; the next backup is
# an incremental from b0 that copies exactly what qemu recorded plus
# what was written through the filter since, and leaves the backup
# equal to the disk, but for a mark put in the backup where nothing
# was written: nothing else was copied.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires qemu-img --version
requires qemu-io --version
requires qemu-nbd --version

oracle="$abs_top_srcdir/tests/dirty-ranges.py"
pod="$abs_top_srcdir/man/dirtybitmap.pod"
size=$((32 * 1024 * 1024))
mark=$((30 * 1024 * 1024))      # written by nobody after the backup

# The recipe's command blocks, in order: recipe.1, recipe.2, ...
awk -v want="Moving a qcow2 disk to the filter, with its bitmaps" '
    /^=head/ { on = (substr ($0, 8) == want); next }
    !on { next }
    /^ / { if (!block) { n++; block = 1 }; print > ("recipe." n); next }
    { block = 0 }
' "$pod"
cat recipe.*
test -s recipe.1
test -s recipe.2
test ! -e recipe.3
# run N: run block N of the recipe here.
run ()
{
    sed -e "s|/run/|$PWD/|g" -e "s|--filter=dirtybitmap|--filter=$FILTER|" \
        recipe.$1 > step.$1
    bash -e -x step.$1
}

# The machine on qcow2: data, then the last backup with its checkpoint
# b0 (a full copy, as libvirt's backup would make it).
qemu-img create -q -f qcow2 vm.qcow2 $size
qemu-io -f qcow2 -c 'write -P 0x11 0 4M' -c 'write -P 0x12 16M 8M' \
        vm.qcow2 > /dev/null
qemu-img bitmap --add vm.qcow2 b0
qemu-img convert -f qcow2 -O raw vm.qcow2 backup.img
printf 'MARK' | dd of=backup.img bs=1 seek=$mark conv=notrunc status=none
# It runs on: qemu records its writes in b0, and stores it at exit.
qemu-io -f qcow2 -c 'write -P 0x21 1000000 5000' \
        -c 'write -P 0x22 8388608 65536' -c 'write -P 0x23 20000000 300000' \
        -c 'write -z 12582912 4096' -c 'write -P 0x24 33550000 4000' \
        vm.qcow2 > /dev/null
nbdinfo --map=qemu:dirty-bitmap:b0 -- \
        [ qemu-nbd -r -f qcow2 -B b0 vm.qcow2 ] > qemu.map
"$oracle" qemu < qemu.map > want.qemu
test "$(wc -l < want.qemu)" -ge 4

# The move, and the server.
run 1
wait_until 10 test -s vm.pid
cleanup_fn kill_nbdkit "$(cat vm.pid)"
qemu-img compare -f qcow2 -F raw vm.qcow2 vm.img
# b0 is what qemu recorded, granule for granule.
dirtybitmap map -U vm.img.bitmaps b0 > moved.map
"$oracle" map < moved.map > got.moved
diff -u want.qemu got.moved

# The machine runs on the filter: one write over one of qemu's, others
# new, a zero.
nbdsh -u "nbd+unix:///?socket=$PWD/vm.sock" \
      -c 'h.pwrite(b"\x31" * 100, 1000100)' \
      -c 'h.pwrite(b"\x32" * 70000, 4194300)' \
      -c 'h.zero(8192, 26214400)'
printf '%s\n' "1000100 100" "4194300 70000" "26214400 8192" |
    "$oracle" expect $size 65536 > want.filter
sort -n want.qemu want.filter | awk '{ print $1, $2 - $1 }' |
    "$oracle" expect $size 65536 > want.all
want=$(awk '{ n += $2 - $1 } END { print n }' want.all)

# The next backup: an incremental from b0.
run 2 > summary
cat summary
copied=$(sed -n 's/^copied \([0-9]*\) bytes, zeroed \([0-9]*\) bytes.*/\1/p' summary)
zeroed=$(sed -n 's/^copied \([0-9]*\) bytes, zeroed \([0-9]*\) bytes.*/\2/p' summary)
test $((copied + zeroed)) = $want
# The backup is the disk, but for the mark: only b0's ranges came.
cmp -l backup.img vm.img > differ || true
cat differ
test "$(wc -l < differ)" = 4
test "$(awk 'NR == 1 { print $1 }' differ)" = $((mark + 1))
# b1 goes on from the backup's cut; b0 has gone.
dirtybitmap info --control vm.ctl > info
grep -F "name: b1" info
if grep -F "name: b0" info; then
    echo "$0: --remove-incremental left b0"; exit 1
fi
