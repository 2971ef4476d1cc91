#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# SIGINT or SIGTERM stops dirtybitmap copy: the requests in flight end,
# "copy interrupted: X of Y dirty bytes copied" goes to stderr, the exit
# status is 1 (with --output=json the summary says "interrupted"), an
# existing target keeps what was written, a new file of --full is not
# created, and copying again completes the backup.
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
dirty=$(dirtybitmap info disk.img.bitmaps |
            sed -n 's/^ *dirty bytes: \([0-9]*\)\( (.*)\)\{0,1\}$/\1/p')
test "$dirty" -gt $((4 * 1024 * 1024))

# The source: each read takes 100ms, so with two in flight at 64K the
# copy takes seconds.  The log filter, below the delay,
# says when a read has been served.
sock="$tmpdir/src.sock"
start_nbdkit -P "$tmpdir/src.pid" -U "$sock" -r \
             --filter="$FILTER" --filter=delay --filter=log file disk.img \
             bitmap=b0 rdelay=100ms logfile="$tmpdir/src.log"
uri="nbd+unix:///?socket=$sock"

# reads_done: how many reads the source has served so far.
reads_done ()
{
    grep -c '\.\.\.Read .* return=0' src.log || :
}

read_more_than () { [ "$(reads_done)" -gt "$1" ]; }

# interrupt SIGNAL ARGS...: run "dirtybitmap copy ARGS" in the
# background, send SIGNAL once the source has served it a read (so
# mid-copy: the copy is under way, and far from done); sets r and
# secs (from the signal to the exit).
interrupt ()
{
    local signal=$1 t0 t1 before
    shift
    before=$(reads_done)
    dirtybitmap copy --requests 2 --request-size 64K "$@" > out 2> err &
    copy=$!
    if ! wait_until 10 read_more_than "$before"; then
        echo "$0: the copy read nothing in 10 seconds"
        exit 1
    fi
    t0=$(date +%s%N)
    kill -s $signal $copy
    r=0
    wait $copy || r=$?
    t1=$(date +%s%N)
    secs=$(( (t1 - t0) / 1000000000 ))
    cat out err
}

# SIGINT, to an existing file.
interrupt INT "$uri" backup.img
test $r -eq 1
test $secs -le 3
test ! -s out
n=$(sed -n "s/^dirtybitmap: copy interrupted: \([0-9]*\) of $dirty dirty bytes copied$/\1/p" err)
test -n "$n"
test "$n" -gt 0
test "$n" -lt "$dirty"
test $((n % 65536)) -eq 0
# Nothing else: no error, the server is still there.
test "$(grep -v '^libnbd: debug' err | wc -l)" -eq 1
kill -s 0 "$(cat src.pid)"

# SIGTERM, with the summary as JSON.
interrupt TERM --output=json "$uri" backup.img
test $r -eq 1
test $secs -le 3
grep -F "dirtybitmap: copy interrupted: " err
python3 - out $dirty <<'EOF2'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["result"] == "interrupted", j
assert j["stage"] == "copy", j
assert j["bytes-total"] == int(sys.argv[2]), j
assert 0 < j["bytes-copied"] < j["bytes-total"], j
assert j["error"] is None, j
EOF2

# SIGINT during a full copy to a new file: no file, not even the
# temporary one.
interrupt INT --full "$uri" new.img
test $r -eq 1
n=$(sed -n "s/^dirtybitmap: copy interrupted: \([0-9]*\) of $size bytes copied$/\1/p" err)
test -n "$n"
test "$n" -gt 0
test "$n" -lt "$size"
test ! -e new.img
if ls -a | grep -F new.img; then
    echo "$0: a file was left behind"
    exit 1
fi

# The bitmap still says what to copy: run it again, to the end.
kill_nbdkit "$(cat src.pid)"
nbdkit -U - -r --filter="$FILTER" file disk.img bitmap=b0 \
       --run 'dirtybitmap copy "$uri" backup.img'
cmp disk.img backup.img
