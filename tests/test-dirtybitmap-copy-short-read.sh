#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A server whose read replies (structured reply chunks) cover only part
# of what was asked makes dirtybitmap copy fail with exit status 1 and
# a message naming the source, the request and what the reply
# covered, instead of taking the missing bytes as zeroes; the new file
# of --full is not created.
source ./functions.sh
set -e
set -x
requires python3 --version

size=$((1024 * 1024))
sock="$tmpdir/short.sock"
python3 "$abs_top_srcdir/tests/hostile-nbd.py" --socket "$sock" \
        --pidfile "$tmpdir/short.pid" --size $size --mode short-read &
wait_until 10 [ -s short.pid ]
cleanup_fn kill_nbdkit "$(cat short.pid)"

r=0
dirtybitmap copy --full --request-size 64K "nbd+unix:///?socket=$sock" \
            backup.img > out 2> err || r=$?
cat out err
test $r -eq 1
test ! -s out
grep -F "dirtybitmap: copy: source nbd+unix:///?socket=$sock: reading 65536 bytes at offset " err
grep -F ": the server's reply covers only 32768 of them" err
grep -Fx "dirtybitmap: copy incomplete: 0 of $size bytes copied" err
# No backup.img, and no temporary file left behind.
test ! -e backup.img
if ls -a | grep -F backup.img; then
    echo "$0: a file was left behind"
    exit 1
fi
