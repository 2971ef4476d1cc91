#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A source server that goes away in the middle of a copy (SIGTERM, then
# kill -9) makes dirtybitmap copy fail with exit status 1, say what
# failed and how much of the dirty data was copied; copying again
# afterwards completes the backup.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires nbdkit --filter=delay null --version

size=$((16 * 1024 * 1024))
yes | head -c $size > disk.img
cp disk.img backup.img
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=add \
       --run 'nbdsh -u "$uri" -c "
for i in range(0, 16 << 20, 2 << 20):
    h.pwrite(b\"%d\" % i * 100000, i)
"'
dirtybitmap info disk.img.bitmaps > info
dirty=$(sed -n 's/^ *dirty bytes: \([0-9]*\)\( (.*)\)\{0,1\}$/\1/p' info)
test "$dirty" -gt $((4 * 1024 * 1024))

for signal in TERM KILL; do
    # Reads take 200ms each and two are in flight: a minute or so for
    # the whole copy, which the signal cuts after about a second.
    sock="$tmpdir/$signal.sock"
    start_nbdkit -P "$tmpdir/$signal.pid" -U "$sock" -r \
                 --filter="$FILTER" --filter=delay file disk.img \
                 bitmap=b0 rdelay=200ms
    r=0
    dirtybitmap copy --requests 2 --request-size 64K \
                "nbd+unix:///?socket=$sock" backup.img \
                > out 2> err &
    copy=$!
    sleep 1
    kill -s $signal "$(cat $signal.pid)"
    wait $copy || r=$?
    cat out err
    test $r -eq 1
    test ! -s out
    grep -F "dirtybitmap: copy: source nbd+unix:///?socket=$sock: " err
    n=$(sed -n "s/^dirtybitmap: copy incomplete: \([0-9]*\) of $dirty dirty bytes copied$/\1/p" err)
    test -n "$n"
    test "$n" -lt "$dirty"
    test $((n % 65536)) -eq 0
    wait_gone "$(cat $signal.pid)"
done
grep -F "the server closed the connection" err

# The bitmap still says what to copy: run it again, to the end.
nbdkit -U - -r --filter="$FILTER" file disk.img bitmap=b0 \
       --run 'dirtybitmap copy "$uri" backup.img'
cmp disk.img backup.img
