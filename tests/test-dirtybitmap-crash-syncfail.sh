#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A sync of the bitmap file fails (an LD_PRELOAD shim makes one
# fdatasync return EIO; the servers run in durability=flush, whose
# syncs the counts below are): that flush and later FUA writes fail, and
# every enabled bitmap is marked inconsistent in the file at once, so
# that neither a clean stop nor a kill -9 right after leaves bitmaps
# that look sound; the disabled one stays consistent.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
shim="$abs_top_builddir/tests/.libs/libfailsync.so"
requires test -f "$shim"

yes | head -c 1M > disk.img
bm="$PWD/disk.img.bitmaps"
dirtybitmap bitmap --add -g 4K --size 1M "$bm" b1
dirtybitmap bitmap --disable "$bm" b1

for stop in term kill; do
    dirtybitmap bitmap --add -g 4K "$bm" b0
    # The startup commit syncs twice, the open record's commit (at the
    # first write, while serving) only its header: the fourth sync,
    # the flush's, fails.
    export LD_PRELOAD="$shim" FAIL_SYNC_AT=4
    start_nbdkit_child -P "$PWD/pid-$stop" -U "$PWD/sock-$stop" \
                       --filter="$FILTER" file disk.img bitmap=b0 \
                       durability=flush control="$PWD/ctl-$stop" \
                       2> "nbdkit-$stop.err"
    unset LD_PRELOAD FAIL_SYNC_AT
    nbdsh -u "nbd+unix:///?socket=$PWD/sock-$stop" -c '
h.pwrite(b"a", 8192)
for call in (h.flush, lambda: h.pwrite(b"c", 24576, nbd.CMD_FLAG_FUA)):
    try:
        call()
        raise SystemExit("a sync that failed was not reported")
    except nbd.Error as e:
        assert e.errno == "EIO", e
h.pwrite(b"b", 16384)
'
    # The running server says what the file says: b0 can no longer be
    # trusted; b1, disabled and settled, can.
    python3 "$abs_top_srcdir/tests/control.py" query "$PWD/ctl-$stop" \
            > query-$stop
    cat query-$stop
    python3 - query-$stop <<'EOF2'
import json, sys
q = dict(l.split(" ", 1) for l in open(sys.argv[1]).read().splitlines())
assert json.loads(q["state"]) == "failed", q
bm = {b["name"]: b for b in json.loads(q["bitmaps"])}
assert bm["b0"]["consistent"] is False, bm
assert bm["b0"]["recording"] is False, bm
assert bm["b1"]["consistent"] is True, bm
EOF2
    if [ $stop = kill ]; then
        kill9 $nbdkit_pid
    else
        kill_nbdkit $nbdkit_pid
    fi
    cat nbdkit-$stop.err
    grep -F "dirtybitmap: $bm: a sync of the bitmaps failed (fdatasync: Input/output error): every enabled bitmap is now inconsistent: take a full backup" \
         nbdkit-$stop.err
    # Said once (then each failed request says it failed).
    test "$(grep -c "Input/output error" nbdkit-$stop.err)" = 1
    test "$(grep -c "dirtybitmap: the bitmaps cannot be made durable" \
                 nbdkit-$stop.err)" = 2

    dirtybitmap info "$bm" > info
    cat info
    grep -A4 'name: b0' info | grep -F "consistent: false"
    grep -A4 'name: b1' info | grep -F "consistent: true"
    fails "dirtybitmap: bitmap b0 is inconsistent" \
          nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 --run true
    dirtybitmap bitmap --remove "$bm" b0
done

# The disk grows while nbdkit runs: the next connection's resize
# commits new regions, and the sync after its header write fails.
# That header may be current at the next open while bits went on into
# the old regions, so after a kill -9 the bitmap must be inconsistent,
# not silently short of bits.
rm -f "$bm"
dirtybitmap bitmap --add -g 4K --size 1M "$bm" b0
# Syncs: startup commit 1-2, open record 3 (its header), resize 4 (the
# write-back of the new directory), 5 (the new data) and 6 (the
# header).
export LD_PRELOAD="$shim" FAIL_SYNC_AT=6
start_nbdkit_child -P "$PWD/pid-grow" -U "$PWD/sock-grow" \
                   --filter="$FILTER" file disk.img bitmap=b0 \
                   durability=flush 2> nbdkit-grow.err
unset LD_PRELOAD FAIL_SYNC_AT
nbdsh -u "nbd+unix:///?socket=$PWD/sock-grow" -c 'h.pwrite(b"a", 8192)'
truncate -s 2M disk.img
if nbdsh -u "nbd+unix:///?socket=$PWD/sock-grow" -c 'h.pwrite(b"b", 4096)'
then
    echo "$0: the connection whose resize failed was served"; exit 1
fi
# The next connection is served: its bits go into the old regions.
nbdsh -u "nbd+unix:///?socket=$PWD/sock-grow" -c 'h.pwrite(b"c", 4096)'
kill9 $nbdkit_pid
cat nbdkit-grow.err
grep -F "dirtybitmap: cannot resize the bitmaps to 2097152 bytes: $bm: write header: Input/output error" nbdkit-grow.err
dirtybitmap check "$bm"
dirtybitmap info "$bm" > info
cat info
grep -A4 'name: b0' info | grep -F "consistent: false"

# A live transaction stops b0 (add b1, disable b0), and the sync of
# b0's bits when it settles fails: the reply is an error, and b0 (until
# then settling) is inconsistent with b1, since its last bits may be
# lost; after a kill -9 the file says so too.
rm -f "$bm" ctl.sock
dirtybitmap bitmap --add -g 4K --size 2M "$bm" b0
# Syncs: startup 1-2, open record 3; the transaction: 4 (the write-back
# of the directory), 5 (b1's new region), 6 (the header, b0 settling);
# the settle: 7 (the directory), 8 (b0's bits), 9 (the header).
export LD_PRELOAD="$shim" FAIL_SYNC_AT=8
start_nbdkit_child -P "$PWD/pid-settle" -U "$PWD/sock-settle" \
                   --filter="$FILTER" file disk.img bitmap=b0 \
                   durability=flush control="$PWD/ctl.sock" \
                   2> nbdkit-settle.err
unset LD_PRELOAD FAIL_SYNC_AT
nbdsh -u "nbd+unix:///?socket=$PWD/sock-settle" -c 'h.pwrite(b"a", 8192)'
python3 "$abs_top_srcdir/tests/control.py" error "$PWD/ctl.sock" \
        '{"execute": "transaction", "arguments": {"actions": [{"action": "add", "bitmap": "b1"}, {"action": "disable", "bitmap": "b0"}]}}' \
        GenericError "the bits of the bitmaps that stopped recording cannot be made durable (a sync of the file failed): every enabled bitmap is now inconsistent: take a full backup"
kill9 $nbdkit_pid
cat nbdkit-settle.err
grep -F "dirtybitmap: $bm: fdatasync: Input/output error" nbdkit-settle.err
grep -F "the bits of the bitmaps that stopped recording cannot be made durable: every enabled bitmap is now inconsistent: take a full backup" nbdkit-settle.err
dirtybitmap check "$bm"
dirtybitmap info "$bm" > info
cat info
grep -A4 'name: b0' info | grep -F "consistent: false"
grep -A4 'name: b1' info | grep -F "consistent: false"
