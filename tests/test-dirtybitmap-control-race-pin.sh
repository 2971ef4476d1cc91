#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A client's first block status races a transaction that clears (or
# removes) the bitmap it reads.  The transaction is held (pause point
# "txn-checked", filter/testpause.h) after it has checked that no
# connection pins the bitmap and before it publishes; meanwhile the
# client asks for its first block status, which pins the bitmap.
# Then either the transaction is refused (the bitmap is pinned), or
# the pin waits for it: the client's two block-status passes must
# agree, whatever the transaction's reply.  Before the fix the pin
# landed between the check and the publish: the first pass read the
# old bits, the transaction succeeded, the second pass read the
# cleared bitmap (after a remove: an error).
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires python3 -c 'import nbd'

for action in clear remove; do
    rm -rf $action
    mkdir $action
    cd $action
    truncate -s 64M disk.img
    start_nbdkit_paused "txn-checked pin-waits" \
        -P "$PWD/pid" -U "$PWD/sock" --filter="$FILTER" \
        file disk.img bitmap=b0 action=add granularity=64K \
        control="$PWD/ctl"

    python3 - "$abs_top_srcdir/tests" "$PWD" $action <<'EOF2'
import os, sys, nbd
sys.path.insert(0, sys.argv[1])
from pause import Points, Background, fail
from controllib import Control

d, action = sys.argv[2], sys.argv[3]
M = 1 << 20
h = nbd.NBD()
h.add_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
h.connect_uri("nbd+unix:///?socket=%s/sock" % d)
h.pwrite(b"a" * 65536, 1 * M)   # b0 is dirty there; no block status yet

def status():
    """One pass of block status over the disk: its extents, or the
    error."""
    out = []
    try:
        h.block_status(64 * M, 0,
                       lambda meta, off, es, err: out.append(list(es)))
    except nbd.Error as e:
        return "error: errno %s" % e.errno
    return out

pts = Points(d, ["txn-checked", "pin-waits"])
ctl = Control(d + "/ctl")
ctl.send({"execute": "transaction", "arguments": {"actions": [
    {"action": action, "bitmap": "b0"}]}})
pts.wait(["txn-checked"])      # pins checked: none; not yet published

# The client's first block status: it pins b0.  Either it is done, or
# the pin waits for the transaction.
first = Background(status)
got = pts.wait(["pin-waits", first])
print("while the transaction is held:",
      ["the pin waits" if g == "pin-waits" else "the first pass is done"
       for g in got])
if "pin-waits" in got:
    pts.release("pin-waits")
pts.release("txn-checked")

reply, _ = ctl.reply()
one = first.join()
two = status()
print("%s: %r" % (action, reply))
print("first pass: %r" % one)
print("second pass: %r" % two)
if "error" in reply:
    if "is in use" not in reply["error"].get("desc", ""):
        fail("the transaction failed, but not because b0 is pinned: %r"
             % reply)
elif reply != {"return": {}}:
    fail("the transaction's reply: %r" % reply)
if one != two:
    fail("the block status changed under the client that pinned it")
h.shutdown()

q = Control(d + "/ctl")
q.send({"execute": "query"})
qr, _ = q.reply()
if "return" not in qr:
    fail("query: %r" % qr)
EOF2
    kill_nbdkit "$(cat pid)"
    cd ..
done
