#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# restore-from= and a power loss, at each step of the fill (after its
# write into the disk, after the flush, after the marks, after their
# sync): the same command line, on another boot, resumes and
# completes; every write that a flush made durable is kept (a write
# into a granule not restored yet must not be filled over: its mark
# must be durable too), a write acknowledged after the last flush is
# there or not, and no byte of the disk's old data is left.
#
# The disk and its bitmap file live on an ext4 file system on a loop
# device; the power loss is a copy of the loop device's backing file
# (what the file system had written to its device by then); the
# reboot is another boot id.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires_boot_id_mount
requires_loop_ext4 lo.img
source "$abs_top_srcdir/tests/restore-lib.sh"

size=$((4 * 1024 * 1024 + 12288))
head -c $size /dev/urandom > image
serve_source image
args=(--filter="$FILTER" file mnt/disk.img restore-from="$src"
      control="$PWD/ctl")

format_loop_ext4 lo.img
power_on lo.img

n=0
for point in restore-fill-written restore-fill-flushed restore-fill-marked \
             restore-fill-synced
do
    n=$((n + 1))
    rm -f mnt/disk.img mnt/disk.img.bitmaps ./*.reached ./*.release \
       a.log b.log
    # The old data, on stable storage: none of it may be left.
    yes G | head -c $size > mnt/disk.img
    sync mnt/disk.img
    mkfifo restore-fill-start.{reached,release} $point.{reached,release}
    DIRTYBITMAP_TEST_PAUSE="restore-fill-start $point" \
    DIRTYBITMAP_TEST_PAUSE_DIR="$PWD" \
        start_nbdkit_child -P "$PWD/pid" -U "$PWD/sock$n" "${args[@]}"
    uri="nbd+unix:///?socket=$PWD/sock$n"
    reached restore-fill-start
    # Made durable by a flush each; then acknowledged only.
    python3 "$restore_py" write "$uri" a.log $n 10 flush
    python3 "$restore_py" write "$uri" b.log $((n + 100)) 10
    release restore-fill-start
    reached $point

    # The power goes.
    cp --sparse=always "$backing" snap$n.img
    kill9 $nbdkit_pid
    power_off
    power_on snap$n.img

    rebooted nbdkit -U - "${args[@]}" \
             --run "python3 '$restore_py' wait '$PWD/ctl'"
    python3 "$restore_py" check mnt/disk.img image a.log b.log \
            --loose-after-flush
done
