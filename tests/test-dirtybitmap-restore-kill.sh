#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# restore-from= and kill -9, at each step of the fill (after its read
# of the source, after its write into the disk, after the flush, after
# the marks, after their sync, before the record says complete) and of
# a client's write to a granule not restored (after the fill of the
# granules it covers in part, after it went down, after the flush):
# the same command line resumes, completes, and the disk is the image
# with every write the server acknowledged, checked byte by byte
# against the writers' logs (a write in flight at the kill may have
# landed or not).
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
source "$abs_top_srcdir/tests/restore-lib.sh"

size=$((4 * 1024 * 1024 + 12288))
head -c $size /dev/urandom > image
serve_source image
args=(--filter="$FILTER" file disk.img restore-from="$src"
      control="$PWD/ctl")

# serve [ENV...]: a server of the disk with args, as a child; a socket
# of its own (a killed server leaves its socket behind), in $uri.
k=0
serve ()
{
    k=$((k + 1))
    uri="nbd+unix:///?socket=$PWD/sock$k"
    env "$@" nbdkit -f -P "$PWD/pid" -U "$PWD/sock$k" "${args[@]}" &
    nbdkit_pid=$!
    cleanup_fn kill_nbdkit $nbdkit_pid
}

# round N POINT: kill -9 with a thread held at POINT, then resume.
round ()
{
    local n=$1 point=$2
    rm -f disk.img disk.img.bitmaps ./*.reached ./*.release a.log b.log
    yes G | head -c $size > disk.img
    : > a.log
    : > b.log
    mkfifo restore-fill-start.{reached,release} $point.{reached,release}
    serve DIRTYBITMAP_TEST_PAUSE="restore-fill-start $point" \
          DIRTYBITMAP_TEST_PAUSE_DIR="$PWD"
    reached restore-fill-start

    case $point in
        restore-write-*)
            # The first write (to a granule not restored: the fill is
            # held) holds there.
            python3 "$restore_py" write "$uri" a.log $n 15 &
            ;;
        *)
            # Acknowledged before the fill moves: all must be there.
            python3 "$restore_py" write "$uri" a.log $n 15
            release restore-fill-start
            ;;
    esac
    reached $point
    # Writes in flight at the kill, or not yet begun.
    python3 "$restore_py" write "$uri" b.log $((n + 200)) 20 &
    kill9 $nbdkit_pid
    wait || true

    # The same command line resumes, and completes.
    rm -f ctl
    serve
    python3 "$restore_py" wait ctl
    kill_nbdkit $nbdkit_pid
    python3 "$restore_py" check disk.img image a.log b.log
    dirtybitmap info disk.img.bitmaps | grep -Fx "restore: from $src: complete"
}

n=0
for point in restore-fill-read restore-fill-written restore-fill-flushed \
             restore-fill-marked restore-fill-synced restore-complete \
             restore-write-filled restore-write-down restore-write-flushed
do
    n=$((n + 1))
    round $n $point
done
