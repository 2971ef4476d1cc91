#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The disk's size changes while nbdkit is stopped, and no client
# connects after the restart before dirtybitmap backup: the view must
# be the disk at its cut, at the size it has then, not at the size the
# bitmap file last recorded.  A shrunk disk: the copy must not read
# past its end (before the fix nbdkit aborted in backend_pread); a
# grown one: the backup must hold its end (before the fix it silently
# lacked it).  And a disk the bitmap file has never seen the size of.
# Each case: the backup equals the disk (cmp), nbdkit is still up.
# Last, a read-only server (which keeps the file's size) over a grown
# disk: an incremental view is the disk's size, its grown area changed
# and readable.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires nbdinfo --version
requires python3 -c 'import nbd'

failures=
fail () { echo "$0: FAIL: $*"; failures="$failures
$*"; }

# case NAME SIZE-BEFORE SIZE-AFTER: a client sees the disk at
# SIZE-BEFORE (none if it is 0), nbdkit stops cleanly, the disk is
# resized to SIZE-AFTER (its new end random), nbdkit starts again and
# dirtybitmap backup runs before any client connects.
run_case ()
{
    local name=$1 before=$2 after=$3 d=$PWD/$1 pid
    rm -rf "$d"; mkdir "$d"
    dd if=/dev/urandom of="$d/disk.img" bs=64K \
       count=$(( (before > 0 ? before : after) / 65536 )) status=none
    if [ "$before" -gt 0 ]; then
        nbdkit -U - --filter="$FILTER" file "$d/disk.img" \
               control="$d/ctl" --run 'nbdinfo --size "$uri"' > "$d/size"
        [ "$(cat "$d/size")" = "$before" ] ||
            { fail "$name: the first client saw $(cat "$d/size")"; return; }
    fi
    if [ "$after" -gt "$before" ]; then
        dd if=/dev/urandom of="$d/disk.img" bs=64K seek=$(( before / 65536 )) \
           count=$(( (after - before) / 65536 )) conv=notrunc status=none
    fi
    truncate -s "$after" "$d/disk.img"

    start_nbdkit_child -P "$d/pid" -U "$d/sock" --filter="$FILTER" \
                       file "$d/disk.img" control="$d/ctl" 2> "$d/nbdkit.err"
    pid=$nbdkit_pid
    if ! dirtybitmap backup --control "$d/ctl" --checkpoint c1 \
         "nbd+unix:///?socket=$d/sock" "$d/target.img" > "$d/out" 2>&1; then
        cat "$d/out"
        fail "$name: dirtybitmap backup failed"
    fi
    cat "$d/out"
    if ! kill -s 0 "$pid" 2>/dev/null; then
        cat "$d/nbdkit.err"
        fail "$name: nbdkit has died"
        return
    fi
    if [ -f "$d/target.img" ] && cmp "$d/disk.img" "$d/target.img"; then
        :
    else
        ls -l "$d/disk.img" "$d/target.img" || :
        fail "$name: the backup differs from the disk"
    fi
    # The bitmaps are at the disk's size now, the checkpoint in them.
    dirtybitmap info --control "$d/ctl" > "$d/info" || :
    cat "$d/info"
    grep -F "name: c1" "$d/info" ||
        fail "$name: the checkpoint is not in the bitmaps"
    grep -F "disk size: $after " "$d/info" ||
        fail "$name: the bitmaps are not at the disk's size"
    kill_nbdkit "$pid" || fail "$name: nbdkit did not stop cleanly"
}

run_case shrunk 1048576 917504
run_case grown 1048576 1245184
run_case unsized 0 1048576

# Read-only: b0 sees 1M (and nothing written), the disk grows to
# 1.25M, nbdkit -r; the view from b0 is 1.25M, the old 1M unchanged,
# the grown 256K changed and equal to the disk.
d=$PWD/readonly
rm -rf "$d"; mkdir "$d"
dd if=/dev/urandom of="$d/disk.img" bs=64K count=16 status=none
nbdkit -U - --filter="$FILTER" file "$d/disk.img" bitmap=b0 action=add \
       --run 'nbdinfo --size "$uri"'
# Grown while the read-only server serves it (grown while stopped, the
# disk was written without the filter: a read-only start refuses it).
start_nbdkit_child -P "$d/pid" -r -U "$d/sock" --filter="$FILTER" \
                   file "$d/disk.img" bitmap=b0 control="$d/ctl" \
                   2> "$d/nbdkit.err"
dd if=/dev/urandom of="$d/disk.img" bs=64K seek=16 count=4 conv=notrunc \
   status=none
python3 - "$abs_top_srcdir/tests" "$d" <<'EOF2' || fail "readonly: the view"
import sys
sys.path.insert(0, sys.argv[1])
import nbd
from controllib import Control

d = sys.argv[2]
c = Control(d + "/ctl")
c.send({"execute": "backup-begin",
        "arguments": {"name": "view", "bitmap": "b0"}})
reply, _ = c.reply()
print("backup-begin:", reply)
assert reply == {"return": {}}, reply
h = nbd.NBD()
h.add_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
h.connect_uri("nbd+unix:///view?socket=%s/sock" % d)
size = h.get_size()
assert size == 1310720, size
ext = []
h.block_status(size, 0,
               lambda m, off, es, err: ext.extend(zip(es[0::2], es[1::2])))
print("view map:", ext)
assert ext == [(1048576, nbd.STATE_HOLE), (262144, 0)], ext
disk = open(d + "/disk.img", "rb").read()
assert h.pread(262144, 1048576) == disk[1048576:], "the grown area differs"
h.shutdown()
EOF2
kill -s 0 $nbdkit_pid 2>/dev/null || fail "readonly: nbdkit has died"
cat "$d/nbdkit.err"

if [ -n "$failures" ]; then
    echo "$0: failed:$failures"
    exit 1
fi
