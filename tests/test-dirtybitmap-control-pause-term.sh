#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# SIGTERM ends a paused server within a few seconds, even with a write
# held at the pause and the pausing client still connected: the held
# write fails, the bitmap file is closed cleanly, and the control
# socket is removed.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

truncate -s 1M disk.img
ctl="$PWD/ctl.sock"
sock="$PWD/nbd.sock"
# -v: nbdkit says when a request enters each layer ("dirtybitmap:
# pwrite" at our filter, "file: pwrite" at the plugin).
start_nbdkit_child -P "$PWD/pid" -U "$sock" -v --filter="$FILTER" \
                   file disk.img bitmap=b0 action=add control="$ctl" \
                   2> nbdkit.err
test -S "$ctl"

mkdir h
python3 "$abs_top_srcdir/tests/control-hold.py" "$ctl" h &
holder=$!
cleanup_fn touch "$PWD/h/close"
wait_until 10 [ -e h/paused ]
grep -Fx '{"return":{}}' h/paused

# A write, held: it reached our filter (wait up to 10 s for that), and
# half a second later (a write that is not held takes microseconds)
# it has still not reached the plugin.
nbdsh -u "nbd+unix:///?socket=$sock" -c 'h.pwrite(b"x" * 4096, 0)' \
      > write.out 2>&1 &
writer=$!
# The write reached the filter:
wait_for_log nbdkit.err "dirtybitmap: pwrite count=4096 offset=0 "
sleep 0.5
if grep -F "file: pwrite count=4096 offset=0 " nbdkit.err; then
    echo "$0: the write reached the plugin while the disk was paused"
    exit 1
fi
kill -s 0 $writer

start=$SECONDS
kill -TERM $nbdkit_pid
if ! wait_until 5 gone $nbdkit_pid; then
    echo "$0: a paused nbdkit did not exit within 5 seconds of SIGTERM"
    exit 1
fi
r=0
wait $nbdkit_pid || r=$?
echo "nbdkit exited with status $r after $((SECONDS - start)) s"

# The held write failed, and never reached the plugin or the disk.
r=0
wait $writer || r=$?
cat write.out
test $r -ne 0
if grep -F "file: pwrite count=4096 offset=0 " nbdkit.err; then
    echo "$0: the held write reached the plugin after SIGTERM"
    exit 1
fi
cmp disk.img <(head -c 1M /dev/zero)
touch h/close
wait $holder

# The socket is gone, the file closed cleanly.
if [ -e "$ctl" ]; then
    echo "$0: $ctl is left behind"
    exit 1
fi
dirtybitmap info disk.img.bitmaps > info
cat info
grep -Fx "state: closed cleanly" info
dirtybitmap check disk.img.bitmaps
