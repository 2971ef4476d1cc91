#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Reboot detection: after a kill -9 with the same boot id nothing is
# marked; after an unclean stop and a (simulated) reboot, bitmaps that
# were recording in a flush run are inconsistent, persistently, and
# refused for extents, enable, clear and merge; remove works; disabled
# bitmaps and the bitmaps of a strict run stay consistent.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires test -r /proc/sys/kernel/random/boot_id

# rebooted (functions.sh): cmd as on another boot of this machine (a
# boot id of its own, bind-mounted in a private mount namespace).
requires rebooted true
test "$(rebooted cat /proc/sys/kernel/random/boot_id)" = \
     0f0f0f0f-1111-4222-8333-444444444444
test "$(cat /proc/sys/kernel/random/boot_id)" != \
     0f0f0f0f-1111-4222-8333-444444444444

yes | head -c 1M > disk.img
dirtybitmap bitmap --add -g 4K --size 1M disk.img.bitmaps on
dirtybitmap bitmap --add -g 4K disk.img.bitmaps off
dirtybitmap bitmap --add -g 4K disk.img.bitmaps src

# write_and_kill OFFSET args...: nbdkit with args, one byte written at
# OFFSET, then kill -9.
n=0
write_and_kill ()
{
    local off=$1; shift
    n=$((n + 1))
    start_nbdkit_child -P "$PWD/pid$n" -U "$PWD/sock$n" \
                       --filter="$FILTER" file disk.img "$@"
    nbdsh -u "nbd+unix:///?socket=$PWD/sock$n" -c "h.pwrite(b'w', $off)"
    kill9 $nbdkit_pid
}

# A clean run dirties granule 0 in all three, then off is disabled.
nbdkit -U - --filter="$FILTER" file disk.img durability=flush \
       --run 'nbdsh -u "$uri" -c "h.pwrite(b\"w\", 0)"'
dirtybitmap bitmap --disable disk.img.bitmaps off

# A mere kill -9 (same boot id): nothing is marked, nothing is lost.
write_and_kill 8192 durability=flush
dirtybitmap info disk.img.bitmaps > info
cat info
grep -F "state: not closed cleanly (pid $nbdkit_pid, durability=flush, same boot)" info
test "$(grep -c 'consistent: true' info)" -eq 3
dirtybitmap map disk.img.bitmaps on > map
expect map <<'EOF2'
         0        4096    0  data
      4096        4096    1  hole
      8192        4096    0  data
     12288     1036288    1  hole
EOF2

# Unclean stop, then a reboot: "on" and "src" were recording in a
# flush run.
write_and_kill 16384 durability=flush
rebooted dirtybitmap info disk.img.bitmaps > info
cat info
grep -F "state: not closed cleanly (pid $nbdkit_pid, durability=flush, machine restarted since)" info
grep -A4 'name: on' info | grep -F "consistent: false"
grep -A4 'name: src' info | grep -F "consistent: false"
grep -A4 'name: off' info | grep -F "consistent: true"

# Refused, each with the reason and the way out; the file is untouched.
why="it was recording when the machine stopped uncleanly, when its file could not be synced, or when the disk was written without the filter, so it may have missed changes"
refused ()
{
    fails -k disk.img.bitmaps "$1" \
          rebooted nbdkit -U - --filter="$FILTER" file disk.img "${@:2}" \
                   --run true
}
refused "dirtybitmap: bitmap on is inconsistent: $why; it cannot answer extents: remove it (action=remove) and take a full backup" \
        bitmap=on
for a in enable clear merge:off; do
    refused "dirtybitmap: action $a on bitmap on failed: bitmap on is inconsistent: $why; remove it (action=remove) and take a full backup" \
            bitmap=on action=$a
done
refused "dirtybitmap: action merge:on on bitmap off failed: bitmap on is inconsistent: $why; remove it (action=remove) and take a full backup" \
        bitmap=off action=merge:on
fails "dirtybitmap: bitmap on is inconsistent: $why; remove it and take a full backup" \
      rebooted dirtybitmap map disk.img.bitmaps on

# The disabled bitmap still answers, with its bits; a read-only
# server leaves the file as it is.
sum=$(md5sum < disk.img.bitmaps)
rebooted nbdkit -U - -r --filter="$FILTER" file disk.img bitmap=off \
         --run 'nbdinfo --map "$uri"' > map
expect map <<'EOF2'
         0        4096    0  data
      4096     1044480    1  hole
EOF2
test "$(md5sum < disk.img.bitmaps)" = "$sum"

# A writable run takes the file over: the marks are now in the file,
# so they hold on any boot, and the open record is gone.
rebooted nbdkit -U - --filter="$FILTER" file disk.img bitmap=off --run true
dirtybitmap info disk.img.bitmaps > info
cat info
grep -F "state: closed cleanly" info
grep -A4 'name: on' info | grep -F "consistent: false"
grep -A4 'name: src' info | grep -F "consistent: false"
grep -A4 'name: off' info | grep -F "consistent: true"
fails "dirtybitmap: bitmap on is inconsistent: $why" \
      nbdkit -U - --filter="$FILTER" file disk.img bitmap=on --run true

# remove works.
for b in on src; do
    nbdkit -U - --filter="$FILTER" file disk.img bitmap=$b action=remove \
           --run true
done
dirtybitmap info disk.img.bitmaps > info
if grep -F "consistent: false" info; then
    echo "$0: a removed bitmap is still listed"
    exit 1
fi

# Another unclean stop and reboot; then the tool removes the condemned
# bitmap and adds a new one: it records and stays consistent.
write_and_kill 0 bitmap=rec action=add granularity=4K durability=flush
rebooted dirtybitmap bitmap --remove disk.img.bitmaps rec
rebooted dirtybitmap bitmap --add -g 4K disk.img.bitmaps new
rebooted nbdkit -U - --filter="$FILTER" file disk.img \
         --run 'nbdsh -u "$uri" -c "h.pwrite(b\"w\", 4096)"'
dirtybitmap info disk.img.bitmaps > info
cat info
grep -F "state: closed cleanly" info
grep -A4 'name: new' info | grep -F "recording: true"
grep -A4 'name: new' info | grep -F "consistent: true"
dirtybitmap map disk.img.bitmaps new > map
expect map <<'EOF2'
         0        4096    1  hole
      4096        4096    0  data
      8192     1040384    1  hole
EOF2

# A strict run, even one after an unclean flush run: every bit was
# on stable storage before its write went down, so after a reboot
# the bitmap is consistent and has them all.
write_and_kill 20480 bitmap=s action=add granularity=4K durability=flush
write_and_kill 24576 durability=strict
rebooted dirtybitmap info disk.img.bitmaps > info
cat info
grep -F "durability=strict, machine restarted since" info
test "$(grep -c 'consistent: true' info)" -eq 3
rebooted nbdkit -U - -r --filter="$FILTER" file disk.img bitmap=s \
         --run 'nbdinfo --map "$uri"' > map
expect map <<'EOF2'
         0       20480    1  hole
     20480        8192    0  data
     28672     1019904    1  hole
EOF2
