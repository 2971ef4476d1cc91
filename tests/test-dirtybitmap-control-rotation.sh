#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The backup recipe of nbdkit-dirtybitmap-filter(1), EXAMPLES, as
# written: a disk served all along, with a control socket, while a
# client writes; each backup freezes b0 while "next" records, selects
# b0, copies, and folds "next" back into b0.  Each incremental copy
# brings exactly the bytes b0 marks dirty, and after the writes stop
# one more round leaves the backup equal to the disk: no write was
# lost across the rotations.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires python3 -c 'import nbd'

truncate -s 64M disk.img
ctl="$PWD/disk.ctl"
uri="nbd+unix:///?socket=$PWD/disk.sock"
start_nbdkit -P "$PWD/pid" -U "$PWD/disk.sock" --filter="$FILTER" \
             file disk.img control="$ctl"

# One control request, as the man page sends it with socat.
control ()
{
    python3 -c '
import socket, sys
s = socket.socket (socket.AF_UNIX)
s.settimeout (30)
s.connect (sys.argv[1])
s.sendall (sys.argv[2].encode () + b"\n")
reply = b""
while not reply.endswith (b"\n"):
    data = s.recv (65536)
    if not data:
        break
    reply += data
sys.stdout.write (reply.decode ())
' "$ctl" "$1"
}

# A full backup of a disk with data, b0 recording first.
nbdsh -u "$uri" -c 'h.pwrite (b"\x55" * (1 << 20), 1 << 20)'
dirtybitmap bitmap --add --control "$ctl" b0
dirtybitmap copy --full "$uri" backup.img

# A client writes 4K blocks all over the disk until told to stop
# (without libnbd's debug output: thousands of requests).
env -u LIBNBD_DEBUG nbdsh -u "$uri" -c '
import os, random, time
random.seed (7)
open ("writing", "w").close ()
while not os.path.exists ("stop"):
    h.pwrite (random.randbytes (4096),
              random.randrange (0, (64 << 20) - 4096, 512))
    time.sleep (0.005)
' &
writer=$!
stop_writer () { kill $writer 2>/dev/null || :; }
cleanup_fn stop_writer
wait_until 60 [ -e writing ]

round ()
{
    local dirty copied zeroed

    dirtybitmap bitmap --add --control "$ctl" next
    dirtybitmap bitmap --disable --control "$ctl" b0
    test "$(control '{"execute": "select", "arguments": {"bitmap": "b0"}}')" = '{"return":{}}'
    dirty=$(dirtybitmap info --output=json --control "$ctl" |
            python3 -c 'import json, sys
print ([b for b in json.load (sys.stdin)["bitmaps"]
        if b["name"] == "b0"][0]["dirty-bytes"])')
    dirtybitmap copy "$uri" backup.img > summary
    cat summary
    test "$(control '{"execute": "select", "arguments": {"bitmap": null}}')" = '{"return":{}}'
    dirtybitmap bitmap --clear --merge next --enable --control "$ctl" b0
    dirtybitmap bitmap --remove --control "$ctl" next
    # The copy brought what b0 marked, no more.
    copied=$(sed -n 's/^copied \([0-9]*\) bytes, zeroed \([0-9]*\) bytes.*/\1/p' summary)
    zeroed=$(sed -n 's/^copied \([0-9]*\) bytes, zeroed \([0-9]*\) bytes.*/\2/p' summary)
    test "$((copied + zeroed))" = "$dirty"
    test "$dirty" -lt $((64 << 20))
}

for i in 1 2 3; do
    sleep 0.3
    round
done
# The writes went on through every round.
kill -s 0 $writer
touch stop
wait $writer
if cmp -s disk.img backup.img; then
    echo "$0: the backup equals the disk before the last round"; exit 1
fi
round
cmp disk.img backup.img
dirtybitmap info --control "$ctl" > info
grep -c "name: " info | grep -x 1
