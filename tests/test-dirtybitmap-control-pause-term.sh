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
start_nbdkit_child -P "$PWD/pid" -U "$sock" --filter="$FILTER" \
                   file disk.img bitmap=b0 action=add control="$ctl"
test -S "$ctl"

mkdir h
python3 "$abs_top_srcdir/tests/control-hold.py" "$ctl" h &
holder=$!
cleanup_fn touch "$PWD/h/close"
for (( i = 0; i < 100; ++i )); do [ -e h/paused ] && break; sleep 0.1; done
grep -Fx '{"return":{}}' h/paused

# A write, held.
nbdsh -u "nbd+unix:///?socket=$sock" -c 'h.pwrite(b"x" * 4096, 0)' \
      > write.out 2>&1 &
writer=$!
sleep 0.5

start=$SECONDS
kill -TERM $nbdkit_pid
for (( i = 0; i < 50; ++i )); do
    kill -s 0 $nbdkit_pid 2>/dev/null || break
    sleep 0.1
done
if kill -s 0 $nbdkit_pid 2>/dev/null; then
    echo "$0: a paused nbdkit did not exit within 5 seconds of SIGTERM"
    exit 1
fi
r=0
wait $nbdkit_pid || r=$?
echo "nbdkit exited with status $r after $((SECONDS - start)) s"

# The held write failed.
r=0
wait $writer || r=$?
cat write.out
test $r -ne 0
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
