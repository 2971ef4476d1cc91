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
# The log filter, below ours, shows what reaches the plugin.
start_nbdkit -P "$PWD/pid" -U "$sock" --filter="$FILTER" --filter=log \
             file disk.img bitmap=b0 action=add granularity=4K \
             control="$ctl" logfile="$PWD/log"

# wait_for FILE [TENTHS]: until FILE exists (default 10 s).
wait_for ()
{
    local i
    for (( i = 0; i < ${2:-100}; ++i )); do
        [ -e "$1" ] && return 0
        sleep 0.1
    done
    return 1
}

# write_bg OFFSET TAG: a write of 4096 bytes of TAG in the background;
# TAG.done appears once it completed.
write_bg ()
{
    nbdsh -u "$uri" -c "h.pwrite(b'$2' * 4096, $1)" \
          -c "open('$2.done', 'w').close()" &
}

# 1. Pause, write, resume.
mkdir h1
python3 "$hold" "$ctl" h1 &
holder=$!
wait_for h1/paused
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
sleep 1
if [ -e a.done ]; then
    echo "$0: a write completed while the disk was paused"
    exit 1
fi
touch h1/resume
wait_for h1/resumed
grep -Fx '{"return":{}}' h1/resumed
wait_for a.done
wait $writer
touch h1/close
wait $holder
python3 "$control" query "$ctl" > query
grep -Fx 'paused false' query

# 2. Pause, write, and the pausing client goes away.
mkdir h2
python3 "$hold" "$ctl" h2 &
holder=$!
wait_for h2/paused
write_bg 65536 b
writer=$!
sleep 1
if [ -e b.done ]; then
    echo "$0: a write completed while the disk was paused"
    exit 1
fi
touch h2/close
wait $holder
wait_for b.done
wait $writer

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
