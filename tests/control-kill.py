#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# control-kill.py: kill -9 in the middle of a transaction that arrives
# over the control socket, under writes.
#
#   control-kill.py txn SOCKET PID J GRANULARITY LOG
#       T1 = "add b{J}, disable b{J-1}", to its reply; then T2 = "add
#       b{J+1}, disable b{J}" (and "remove b{J-2}" when there is one),
#       and kill -9 PID at a random moment from sending it to one and a
#       half times T1's duration later (so sometimes after T2's
#       reply).  LOG (JSON) gets the times (CLOCK_MONOTONIC) and the
#       bitmaps after T1, as query showed them.
#
#   control-kill.py check BITMAPFILE LOG WRITELOG...
#       the file holds the state after T1 or after T2 (after T2 if
#       its reply came), every bitmap consistent; and every write that
#       completed (control-writer.py) is in the bitmap that recorded it:
#       b{J-1} before T1, b{J} after T1 (and after T2 if T2 did not
#       take), b{J+1} after T2; one in flight at a cut, in one of the
#       bitmaps around it.  Prints the outcome and the next J.
import json
import os
import random
import select
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from controllib import (Control, completed_writes, dirty_granules, fail,
                        info, is_in, place, rotation)


def bitmaps_of(lst):
    """What must survive a crash: name, granularity, flags, in order."""
    return [(b["name"], b["granularity"], b["recording"], b["consistent"])
            for b in lst]


def txn(path, pid, j, gran, logname):
    c = Control(path)
    s1 = c.send(rotation(j, gran))
    r, r1 = c.reply()
    if r != {"return": {}, "id": j}:
        fail("T1: %r" % r)
    c.send({"execute": "query"})
    q, _ = c.reply()
    after_t1 = bitmaps_of(q["return"]["bitmaps"])

    extra = [{"action": "remove", "bitmap": "b%d" % (j - 2)}] \
        if any(b[0] == "b%d" % (j - 2) for b in after_t1) else []
    delay = random.uniform(0, 1.5 * (r1 - s1))
    s2 = c.send(rotation(j + 1, gran, extra))
    r2 = None
    deadline = s2 + delay
    while True:
        left = (deadline - time.monotonic_ns()) / 1e9
        if left <= 0:
            break
        if r2 is None and select.select([c.s], [], [], left)[0]:
            r, r2 = c.reply()
            if r != {"return": {}, "id": j + 1}:
                fail("T2: %r" % r)
        elif r2 is not None:
            time.sleep(left)
    killed = time.monotonic_ns()
    os.kill(pid, signal.SIGKILL)
    json.dump({"j": j, "gran": gran, "s1": s1, "r1": r1, "s2": s2, "r2": r2,
               "killed": killed, "after_t1": after_t1,
               "removed": [a["bitmap"] for a in extra]},
              open(logname, "w"))


def check(bmfile, logname, writelogs):
    log = json.load(open(logname))
    j, gran = log["j"], log["gran"]
    after_t1 = [tuple(b) for b in log["after_t1"]]
    after_t2 = [b if b[0] != "b%d" % j else (b[0], b[1], False, b[3])
                for b in after_t1 if b[0] not in log["removed"]]
    after_t2.append(("b%d" % (j + 1), gran, True, True))

    st = info(bmfile)
    now = bitmaps_of(st["bitmaps"])
    if now == after_t1:
        outcome = "before T2"
    elif now == after_t2:
        outcome = "after T2"
    else:
        fail("the file holds neither the state before T2 nor after it:\n"
             "  before: %r\n  after:  %r\n  file:   %r" %
             (after_t1, after_t2, now))
    if log["r2"] is not None and outcome == "before T2":
        fail("T2 was answered, but the file does not hold it")

    # The bitmaps in the order they recorded, and the cuts between.
    seq = ["b%d" % (j - 1), "b%d" % j]
    sent, reply = [log["s1"]], [log["r1"]]
    if outcome == "after T2":
        seq.append("b%d" % (j + 1))
        sent.append(log["s2"])
        reply.append(log["r2"] if log["r2"] is not None else log["killed"])
    nr = (st["disk-size"] + gran - 1) // gran
    bm = [dirty_granules(bmfile, name, gran, nr) for name in seq]

    writes, other = completed_writes(writelogs)
    must = inflight = missing = 0
    for w in writes:
        # (Its reply may be read after the kill: it was sent before.)
        a, b = place(w, sent, reply)
        if a == b:
            must += 1
        else:
            inflight += 1
        if not any(is_in(bm[k], gran, w) for k in range(a, b + 1)):
            missing += 1
            if missing <= 10:
                print("MISSING: write %r (cuts %d to %d) in none of %s" %
                      (w, a + 1, b, seq[a:b + 1]))
    t1 = (log["r1"] - log["s1"]) / 1e6
    at = (log["killed"] - log["s2"]) / 1e6
    print("T1 took %.2f ms; killed %.2f ms into T2 (%s); file: %s" %
          (t1, at, "answered" if log["r2"] else "not answered", outcome))
    print("writes checked: %d between cuts, %d in flight at one; %d not "
          "completed; missing: %d" % (must, inflight, other, missing))
    if missing or must + inflight < 100:
        sys.exit(1)
    with open("next-j", "w") as f:
        print(j + 2 if outcome == "after T2" else j + 1, file=f)
    with open("outcomes", "a") as f:
        print(outcome, file=f)


if sys.argv[1] == "txn":
    txn(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]),
        sys.argv[6])
elif sys.argv[1] == "check":
    check(sys.argv[2], sys.argv[3], sys.argv[4:])
else:
    fail("usage: control-kill.py txn|check ...")
