#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# backup-prepare, then a cut under a pause that syncs nothing: the
# begin replies at its cut, its checkpoint is committed after the
# resume, before the next reply; the view is the disk at the cut, the
# checkpoint holds what was written after it.  A preparation changes
# nothing anyone can see; one that no longer fits (other arguments, a
# transaction since, its client gone) is dropped and the begin does
# it all.  Errors come at the prepare, as the begin would give them.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires python3 -c 'import nbd'

truncate -s 4M disk.img
start_nbdkit -P "$PWD/pid" -U "$PWD/nbd.sock" --filter="$FILTER" \
             file disk.img bitmap=b0 action=add control="$PWD/ctl.sock"

cat > steps.py <<'EOF'
import nbd, sys
sys.path.insert(0, sys.argv[1])
from controllib import Control, fail

sock, ctl = sys.argv[2], sys.argv[3]
K = 64 * 1024


def call(c, cmd, args=None):
    req = {"execute": cmd}
    if args is not None:
        req["arguments"] = args
    c.send(req)
    return c.reply()[0]


def ok(c, cmd, args=None):
    r = call(c, cmd, args)
    if "return" not in r:
        fail("%s %s: %s" % (cmd, args, r))
    return r["return"]


def refused(c, cmd, args, want):
    r = call(c, cmd, args)
    if "error" not in r or r["error"]["desc"] != want:
        fail("%s %s: %s, expected the error %r" % (cmd, args, r, want))


def names(c):
    return [b["name"] for b in ok(c, "query")["bitmaps"]]


def disk(export=""):
    h = nbd.NBD()
    h.set_export_name(export)
    h.connect_unix(sock)
    return h


c = Control(ctl)
h = disk()
h.pwrite(b"a" * 4096, 0)
h.pwrite(b"z" * 4096, K)
view = {"name": "view", "bitmap": "b0", "checkpoint": "b1"}

# Errors at the prepare, in the begin's words; nothing changed.
refused(c, "backup-prepare", dict(view, bitmap="nosuch"),
        "bitmap nosuch not found")
refused(c, "backup-prepare", dict(view, checkpoint="b0"),
        "the checkpoint must be a new bitmap, not b0")
refused(c, "backup-prepare", dict(view, name=""),
        "backup-prepare: argument 'name': the name must be 1 to 1023 bytes")
refused(c, "pause", {"sync": "no"},
        "pause: argument 'sync' must be true or false")

# A preparation changes nothing visible.
ok(c, "backup-prepare", view)
q = ok(c, "query")
if q["backup"] is not None or names(c) != ["b0"]:
    fail("a preparation is visible: %s" % q)

# The cut.  h's writes wait while the disk is paused.
ok(c, "pause", {"sync": False})
if not ok(c, "query")["paused"]:
    fail("not paused")
ok(c, "backup-begin", view)
ok(c, "resume")
q = ok(c, "query")
b = q["backup"]
if b is None or b["failed"] or b["failure"] is not None:
    fail("the view after the cut: %s" % b)
if names(c) != ["b0", "b1"]:
    fail("the checkpoint is not there after the cut: %s" % names(c))
h.pwrite(b"b" * 4096, K)
h.pwrite(b"c" * 4096, 0)

# The view is the disk at the cut.
v = disk("view")
if v.pread(4096, 0) != b"a" * 4096 or v.pread(4096, K) != b"z" * 4096:
    fail("the view is not the disk at the cut")
v.shutdown()
dirty = {x["name"]: x["dirty-bytes"] for x in ok(c, "query")["bitmaps"]}
if dirty != {"b0": 2 * K, "b1": 2 * K}:
    fail("dirty bytes after the cut: %s" % dirty)
ok(c, "backup-end", {"name": "view"})

# A preparation for other arguments is dropped: the begin does it all.
ok(c, "backup-prepare", dict(view, checkpoint="b2"))
ok(c, "pause", {"sync": False})
ok(c, "backup-begin", dict(view, checkpoint="b3"))
ok(c, "resume")
if names(c) != ["b0", "b1", "b3"]:
    fail("after a begin with other arguments: %s" % names(c))
ok(c, "backup-end", {"name": "view"})

# A transaction after the preparation: the begin does it again.
ok(c, "backup-prepare", dict(view, checkpoint="b4"))
c2 = Control(ctl)
ok(c2, "transaction", {"actions": [{"action": "add", "bitmap": "x"}]})
h.pwrite(b"d" * 4096, 2 * K)
ok(c, "pause", {"sync": False})
ok(c, "backup-begin", dict(view, checkpoint="b4"))
ok(c, "resume")
if names(c) != ["b0", "b1", "b3", "x", "b4"]:
    fail("after a stale preparation: %s" % names(c))
v = disk("view")
if v.pread(4096, 2 * K) != b"d" * 4096 or v.pread(4096, 0) != b"c" * 4096:
    fail("the view of a stale preparation is not the disk at the cut")
v.shutdown()
ok(c, "backup-end", {"name": "view"})

# A begin outside a pause replies once its checkpoint is committed.
ok(c, "backup-prepare", dict(view, checkpoint="b5"))
ok(c, "backup-begin", dict(view, checkpoint="b5"))
if "b5" not in names(c2):
    fail("b5 is not there after its begin")
ok(c, "backup-end", {"name": "view"})

# The client that prepared goes away: its preparation goes with it.
ok(c, "backup-prepare", dict(view, checkpoint="b6"))
c.close()
ok(c2, "backup-begin", dict(view, checkpoint="b7"))
ok(c2, "backup-end", {"name": "view"})
if names(c2) != ["b0", "b1", "b3", "x", "b4", "b5", "b7"]:
    fail("at the end: %s" % names(c2))

# A preparation dropped after another transaction has grown the file:
# dropping it keeps what the file holds now.
c = Control(ctl)
ok(c, "backup-prepare", dict(view, checkpoint="b8"))
ok(c2, "transaction", {"actions": [{"action": "add", "bitmap": "y"}]})
c.close()
ok(c2, "query")
h.shutdown()
EOF
python3 steps.py "$abs_top_srcdir/tests" "$PWD/nbd.sock" "$PWD/ctl.sock"

# What the preparations wrote and never committed leaves the file
# sound, and every bitmap in it, even with no commit after the last
# one was dropped (kill -9: no clean stop commits again).
kill -9 "$(cat pid)"
dirtybitmap check disk.img.bitmaps
dirtybitmap info disk.img.bitmaps > info
test "$(grep -E '^ +name: ' info | awk '{ print $2 }' | xargs)" = \
     "b0 b1 b3 x b4 b5 b7 y"
