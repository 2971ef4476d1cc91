#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# backup-begin races a resize.  The control thread is held (pause
# point "freeze", filter/testpause.h) after it has found bitmap b0 for
# the view and before it copies its bits; meanwhile the disk grows
# from 256M to 512M and a new client connects, whose .prepare resizes
# the bitmaps (new sets, the old one retired).  The set the view is
# frozen from must outlive the copy: nbdkit must stay up, backup-begin
# succeed with a view of the disk at one size and b0's bits at that
# size (or fail clearly), and the control socket still answer query.
# Before the fix the retired set was freed under the copy: SIGSEGV.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires python3 -c 'import nbd'

truncate -s 256M disk.img
start_nbdkit_paused "freeze resize-waits" \
    -P "$PWD/pid" -U "$PWD/sock" --filter="$FILTER" \
    file disk.img bitmap=b0 action=add granularity=64K control="$PWD/ctl"

python3 - "$abs_top_srcdir/tests" "$PWD" "$(cat pid)" <<'EOF2'
import os, select, sys, nbd
sys.path.insert(0, sys.argv[1])
from pause import Points, Background, fail
from controllib import Control

d, pid = sys.argv[2], int(sys.argv[3])
uri = "nbd+unix:///?socket=%s/sock" % d
M = 1 << 20
K64 = 65536

pidfd = os.pidfd_open(pid)

def alive(timeout=10):
    """Whether nbdkit is up: one that has crashed is given timeout s to
    be gone (its pidfd is readable once it is)."""
    p = select.poll()
    p.register(pidfd, select.POLLIN)
    return not p.poll(timeout * 1000)

def connect(name=""):
    h = nbd.NBD()
    h.add_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
    h.connect_uri("nbd+unix:///%s?socket=%s/sock" % (name, d))
    return h

def extents(h):
    out = []
    pos, size = 0, h.get_size()
    while pos < size:
        def cb(meta, off, es, err):
            out.extend(zip(es[0::2], es[1::2]))
        h.block_status(min(size - pos, 1 << 30), pos, cb)
        pos = sum(l for l, t in out)
    # Merge runs of one type.
    merged = []
    for l, t in out:
        if merged and merged[-1][1] == t:
            merged[-1] = (merged[-1][0] + l, t)
        else:
            merged.append((l, t))
    return merged

# The first client sees 256M and dirties two ranges of b0.
h = connect()
if h.get_size() != 256 * M:
    fail("size %d" % h.get_size())
h.pwrite(b"a" * K64, 1 * M)
h.pwrite(b"b" * K64, 200 * M)
h.shutdown()

pts = Points(d, ["freeze", "resize-waits"])
ctl = Control(d + "/ctl")
ctl.send({"execute": "backup-begin",
          "arguments": {"name": "view", "bitmap": "b0"}})
pts.wait(["freeze"])            # b0 found, its bits not yet copied

# The disk grows; a new client's .prepare resizes the bitmaps.  Either
# it is done (the set b0 was found in is retired), or it waits for the
# copy.
os.truncate(d + "/disk.img", 512 * M)
job = Background(connect)
got = pts.wait(["resize-waits", job])
print("while frozen:", ["resize waits" if g == "resize-waits" else
                        "the client connected" for g in got])
if "resize-waits" in got:
    pts.release("resize-waits")
pts.release("freeze")

try:
    reply, _ = ctl.reply()
except SystemExit:
    fail("the control socket closed without a reply to backup-begin: "
         "nbdkit %s" % ("is still up" if alive() else "has died"))
print("backup-begin:", reply)
h2 = job.join()
if not alive(0):
    fail("nbdkit has died")
if h2.get_size() != 512 * M:
    fail("the new client sees %d bytes" % h2.get_size())

# query still answers, at the new size.
q = Control(d + "/ctl")
q.send({"execute": "query"})
qr, _ = q.reply()
print("query:", qr)
if qr.get("return", {}).get("size") != 512 * M:
    fail("query: %r" % qr)

if "error" in reply:
    if set(reply) != {"error"} or "desc" not in reply["error"]:
        fail("backup-begin: %r" % reply)
    if qr["return"]["backup"] is not None:
        fail("backup-begin failed but a backup is running: %r" % qr)
    sys.exit(0)
if reply != {"return": {}}:
    fail("backup-begin: %r" % reply)

# The view is the disk at one size, with b0's bits at that size: 256M
# (the cut came first: the grown area is not in it) or 512M (the grown
# area is dirty).
h2.pwrite(b"c" * K64, 1 * M)     # kept for the view
h2.pwrite(b"d" * K64, 300 * M)
v = connect("view")
vsize = v.get_size()
want = [(1 * M, 1), (K64, 0), (199 * M - K64, 1), (K64, 0),
        (56 * M - K64, 1)]
if vsize == 512 * M:
    want.append((256 * M, 0))
elif vsize != 256 * M:
    fail("the view has %d bytes" % vsize)
got = extents(v)
print("view:", vsize, got)
if got != want:
    fail("the view's map %r, expected %r" % (got, want))
if v.pread(K64, 1 * M) != b"a" * K64 or v.pread(K64, 200 * M) != b"b" * K64:
    fail("the view does not hold the disk at the cut")
v.shutdown()
h2.shutdown()
EOF2
