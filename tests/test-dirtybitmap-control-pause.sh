#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# pause: the reply comes after the layer below was flushed; a write
# issued while paused waits, and completes (recorded) after resume;
# the pause belongs to its client (another one can neither pause nor
# resume, but is still served), and when that client goes away
# without resuming, the disk resumes.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

truncate -s 1M disk.img
ctl="$PWD/ctl.sock"
sock="$PWD/nbd.sock"
uri="nbd+unix:///?socket=$sock"
control="$abs_top_srcdir/tests/control.py"
hold="$abs_top_srcdir/tests/control-hold.py"
# The log filter, below ours, shows what reaches the plugin.  With -v,
# nbdkit says when a request enters each layer: "dirtybitmap: pwrite"
# when it reaches our filter, "log: pwrite" when it is passed below.
start_nbdkit_child -P "$PWD/pid" -U "$sock" -v \
                   --filter="$FILTER" --filter=log \
                   file disk.img bitmap=b0 action=add granularity=4K \
                   control="$ctl" logfile="$PWD/log" 2> nbdkit.err

# write_bg OFFSET TAG: a write of 4096 bytes of TAG in the background;
# TAG.done appears once it completed.
write_bg ()
{
    nbdsh -u "$uri" -c "h.pwrite(b'$2' * 4096, $1)" \
          -c "open('$2.done', 'w').close()" &
}

# held OFFSET: the write at OFFSET reached our filter while the disk
# was paused and was not passed below.  It waits (up to 10 s) for the
# write to enter the filter: a write that never got there proves
# nothing.  Then it gives a write that is not held half a second to
# go through (it would take microseconds), and fails if it did.
held ()
{
    local below="log: pwrite count=4096 offset=$1 "
    # The write reached the filter:
    wait_for_log nbdkit.err "dirtybitmap: pwrite count=4096 offset=$1 "
    sleep 0.5
    if grep -F "$below" nbdkit.err; then
        echo "$0: the write at $1 was passed below while the disk was paused"
        exit 1
    fi
}

# passed OFFSET: the write at OFFSET went below (after the resume).
passed ()
{
    if ! grep -F "log: pwrite count=4096 offset=$1 " nbdkit.err; then
        echo "$0: the write at $1 never reached the layer below"
        exit 1
    fi
}

# 1. Pause, write, resume.
mkdir h1
python3 "$hold" "$ctl" h1 &
holder=$!
wait_until 10 [ -e h1/paused ]
grep -Fx '{"return":{}}' h1/paused
# The reply came after a flush reached the plugin.
grep -E "\.\.\.Flush .*return=0" log
python3 "$control" query "$ctl" > query
grep -Fx 'paused true' query
# Another client cannot pause or resume, but is served.
python3 "$control" error "$ctl" '{"execute": "pause"}' GenericError \
        "already paused by another control client"
python3 "$control" error "$ctl" '{"execute": "resume"}' GenericError \
        "not paused by this control client"
write_bg 8192 a
writer=$!
held 8192
if [ -e a.done ]; then
    echo "$0: a write completed while the disk was paused"
    exit 1
fi
touch h1/resume
wait_until 10 [ -e h1/resumed ]
grep -Fx '{"return":{}}' h1/resumed
wait $writer
test -e a.done
passed 8192
touch h1/close
wait $holder
python3 "$control" query "$ctl" > query
grep -Fx 'paused false' query

# 2. Pause, write, and the pausing client goes away.
mkdir h2
python3 "$hold" "$ctl" h2 &
holder=$!
wait_until 10 [ -e h2/paused ]
write_bg 65536 b
writer=$!
held 65536
if [ -e b.done ]; then
    echo "$0: a write completed while the disk was paused"
    exit 1
fi
touch h2/close
wait $holder
wait $writer
test -e b.done
passed 65536
# It went below only once the pausing client had gone.
gone=$(grep -nF "the control client that paused has gone: resuming" \
           nbdkit.err | cut -d: -f1)
below=$(grep -nF "log: pwrite count=4096 offset=65536 " nbdkit.err |
            cut -d: -f1)
test -n "$gone"
test "$gone" -lt "$below"

# Both writes are on the disk and in the bitmap.
nbdsh -u "$uri" -c 'assert h.pread(4096, 8192) == b"a" * 4096' \
      -c 'assert h.pread(4096, 65536) == b"b" * 4096'
nbdinfo --map "$uri" > map
cat map
expect map <<'EOF2'
         0        8192    1  hole
      8192        4096    0  data
     12288       53248    1  hole
     65536        4096    0  data
     69632      978944    1  hole
EOF2
