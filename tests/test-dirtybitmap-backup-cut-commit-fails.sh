#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The checkpoint of a begin made inside its own client's pause is
# committed after the resume; here that commit fails (an LD_PRELOAD
# shim fails the sync of its header, the 12th sync of the bitmap file
# in this sequence).  The begin and the resume have replied; the next
# reply (a query) says the view failed and why, the file's state is
# failed, and its bitmaps are b0 alone; dirtybitmap backup, on the same
# sequence, says the backup failed after its cut, does not try to
# remove a checkpoint the file never had, and exits 1.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires python3 -c 'import nbd'

shim="$abs_top_builddir/tests/.libs/libfailsync.so"
requires test -f "$shim"

# serve: a fresh bitmap file, the 12th sync failing, one write done.
serve ()
{
    rm -f disk.img disk.img.bitmaps
    truncate -s 4M disk.img
    export LD_PRELOAD="$shim" FAIL_SYNC_AT=12
    start_nbdkit -P "$PWD/pid$1" -U "$PWD/nbd$1.sock" --filter="$FILTER" \
                 file disk.img bitmap=b0 action=add control="$PWD/ctl$1.sock"
    unset LD_PRELOAD FAIL_SYNC_AT
    nbdsh -u "nbd+unix:///?socket=$PWD/nbd$1.sock" -c 'h.pwrite(b"a" * 4096, 0)'
}

serve 1
cat > steps.py <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
from controllib import Control, fail

c = Control(sys.argv[2])



view = {"name": "v", "bitmap": "b0", "checkpoint": "b1"}
c.ok("backup-prepare", view)
c.ok("pause", {"sync": False})
c.ok("backup-begin", view)
c.ok("resume")
q = c.ok("query")
b = q["backup"]
want = sys.argv[3] + ": write header: Input/output error"
if b is None or not b["failed"] or b["failure"] != want:
    fail("the view after a failed commit: %s (expected failure %r)"
         % (b, want))
if q["state"] != "failed":
    fail("the file's state after a failed commit: %s" % q["state"])
# The query lists the bitmaps the file has: not b1, whose commit failed.
names = [x["name"] for x in q["bitmaps"]]
if names != ["b0"]:
    fail("the bitmaps after a failed commit: %s (expected b0 alone)" % names)
c.ok("backup-end", {"name": "v"})
EOF
python3 steps.py "$abs_top_srcdir/tests" "$PWD/ctl1.sock" \
        "$PWD/disk.img.bitmaps"
kill_nbdkit "$(cat pid1)"

serve 2
r=0
dirtybitmap backup \
    --disk "control=$PWD/ctl2.sock,source=nbd+unix:///?socket=$PWD/nbd2.sock,target=$PWD/d.bak,name=d" \
    --checkpoint c1 > out 2> err || r=$?
cat out err
test $r = 1
grep -Fx "dirtybitmap: backup: the backup failed after its cut: $PWD/disk.img.bitmaps: write header: Input/output error" err
tail -n 1 err | grep "^dirtybitmap: backup incomplete:"
# c1 was never in the file: nothing to remove, and nothing said of it.
if grep "could not remove checkpoint" err; then
    echo "$0: the tool tried to remove a checkpoint the file never had"
    exit 1
fi

# The same from b0: the server's bitmaps, b0 too, are condemned by the
# failed commit, and the tool says that the next backup from b0 reads
# the whole disk; it does (b0 is inconsistent there), and succeeds.
kill_nbdkit "$(cat pid2)"
serve 3
disk="control=$PWD/ctl3.sock,source=nbd+unix:///?socket=$PWD/nbd3.sock,target=$PWD/d3.bak,name=d"
r=0
dirtybitmap backup --disk "$disk" --checkpoint c1 --incremental b0 \
    > out 2> err || r=$?
cat out err
test $r = 1
grep -Fx "dirtybitmap: backup: the server's bitmap file failed a commit: its bitmaps, b0 too, can no longer be trusted, and the next backup from b0 reads the whole disk" err
dirtybitmap backup --disk "$disk" --checkpoint c1 --incremental b0 \
    --output=json > out 2> err
cat out err
grep "bitmap b0 is inconsistent" err
python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))["disks"][0]
assert d["mode"] in ("full", "resync") and d["bytes-read"] == 4 << 20, d' out
