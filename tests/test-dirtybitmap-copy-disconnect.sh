#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A source server that does not close the connection after
# NBD_CMD_DISC does not keep a finished copy from ending: the summary
# is printed and dirtybitmap copy exits 0 within a few seconds, with
# the copy complete.
source ./functions.sh
set -e
set -x
requires python3 --version
requires timeout --version

size=$((1024 * 1024))
sock="$tmpdir/open.sock"
python3 "$abs_top_srcdir/tests/hostile-nbd.py" --socket "$sock" \
        --pidfile "$tmpdir/open.pid" --size $size --mode keep-open &
wait_until 10 [ -s open.pid ]
cleanup_fn kill_nbdkit "$(cat open.pid)"

# The disk the server serves: "0123456789abcdef" over and over.
python3 -c "
import sys
sys.stdout.buffer.write(b'0123456789abcdef' * ($size // 16))" > expected.img

start=$(date +%s)
r=0
timeout 20 dirtybitmap copy --full "nbd+unix:///?socket=$sock" backup.img \
        > out 2> err || r=$?
end=$(date +%s)
cat out err
test $r -eq 0
grep -Ex "copied $size bytes, zeroed 0 bytes, 1 range, [0-9.]+ seconds" out
test $((end - start)) -le 8
cmp expected.img backup.img
