#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# control-cut.py: the cut rule of transactions (CONTRACT 3), measured.
#
#   control-cut.py rotate SOCKET N GRANULARITY CUTLOG
#       N transactions, the k-th (1 to N) being "add b{k}, disable
#       b{k-1}", each sent as soon as the previous one's reply came,
#       except that after every odd one the client waits 5 to 20 ms
#       (so that some writes fall wholly between two cuts); CUTLOG
#       gets "K SENT_NS REPLY_NS" for each (CLOCK_MONOTONIC: before the
#       request is sent, after its reply is read).
#
#   control-cut.py check BITMAPFILE N GRANULARITY CUTLOG WRITELOG...
#       reads every bitmap b0 to bN of the (stopped) file with
#       "dirtybitmap map --output=json", and checks every completed
#       write of the WRITELOGs (control-writer.py) against the rule.
#
# b{k} records from cut k to cut k+1 (b0 from the start, bN to the
# end).  A write is before cut k if it completed before T_k's request
# was sent, after it if it started after T_k's reply was read, and in
# flight at it otherwise.  A write "is in" a bitmap when every granule
# it touches is dirty there.  The rule:
#   - a write after cut k and before cut k+1 is in b{k};
#   - a write in flight at cut k is in b{k-1} or b{k} (or both);
#     one in flight at cuts k to m (its reply came late, after
#     several transactions) is in one of b{k-1} to b{m}: it reached
#     the server at one instant, and some bitmap recorded then, but
#     from the client's clocks that instant may lie anywhere between
#     its start and its end.
# check prints its figures, and exits 1 if any write is missing.  It
# also counts what the same check finds when each write is looked for
# in the bitmap after the one it belongs to: that must find writes
# missing, or the bitmaps are too full for the check to mean anything.
import concurrent.futures
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from controllib import (Control, completed_writes, dirty_granules, fail,
                        info, is_in, place, rotation)


def rotate(path, n, gran, cutlog):
    c = Control(path)
    with open(cutlog, "w") as log:
        for k in range(1, n + 1):
            sent = c.send(rotation(k, gran))
            r, got = c.reply()
            if r != {"return": {}, "id": k}:
                fail("transaction %d: %r" % (k, r))
            print(k, sent, got, file=log)
            if k % 2:
                time.sleep(random.uniform(0.005, 0.02))
    c.close()


def check(bmfile, n, gran, cutlog, writelogs):
    cuts = [tuple(map(int, l.split())) for l in open(cutlog)]
    if [c[0] for c in cuts] != list(range(1, n + 1)):
        fail("%s does not hold cuts 1 to %d" % (cutlog, n))
    sent = [c[1] for c in cuts]
    reply = [c[2] for c in cuts]
    writes, failed = completed_writes(writelogs)
    if failed:
        fail("%d requests failed or never completed" % failed)

    st = info(bmfile)
    nr = (st["disk-size"] + gran - 1) // gran
    names = [b["name"] for b in st["bitmaps"]]
    if names != ["b%d" % k for k in range(n + 1)]:
        fail("unexpected bitmaps %r" % names[:5])
    # Two "dirtybitmap map" at a time: the machine has two cores.
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        bm = list(pool.map(lambda k: dirty_granules(bmfile, "b%d" % k, gran,
                                                    nr), range(n + 1)))

    must = inflight = multi = missing = neither = 0
    shifted_checked = shifted_missing = 0
    per_bitmap = [0] * (n + 1)
    for w in writes:
        a, b = place(w, sent, reply)
        if a == b:
            must += 1
            per_bitmap[a] += 1
            if not is_in(bm[a], gran, w):
                missing += 1
                if missing <= 10:
                    print("MISSING: write %r after cut %d, before cut %d, "
                          "not in b%d" % (w, a, a + 1, a))
            if a < n:
                shifted_checked += 1
                if not is_in(bm[a + 1], gran, w):
                    shifted_missing += 1
        else:
            inflight += 1
            multi += b > a + 1
            if not any(is_in(bm[k], gran, w) for k in range(a, b + 1)):
                neither += 1
                if neither <= 10:
                    print("NEITHER: write %r in flight at cuts %d to %d, "
                          "in none of b%d to b%d" % (w, a + 1, b, a, b))

    durations = sorted(reply[i] - sent[i] for i in range(n))
    fill = sum(sum(b) for b in bm) / (len(bm) * nr)
    used = sum(1 for c in per_bitmap if c)
    print("writes completed:           %d" % len(writes))
    print("cuts (transactions):        %d" % n)
    print("transaction time (ms):      median %.2f, max %.2f" %
          (durations[n // 2] / 1e6, durations[-1] / 1e6))
    print("run time (s):               %.2f" % ((reply[-1] - sent[0]) / 1e9))
    print("writes between two cuts:    %d (checked in their bitmap)" % must)
    print("bitmaps with such writes:   %d of %d" % (used, n + 1))
    print("writes in flight at a cut:  %d (checked in the bitmaps around)"
          % inflight)
    print("  of which at several cuts: %d" % multi)
    print("mean dirty fraction:        %.3f" % fill)
    print("missing from their bitmap:  %d" % missing)
    print("in none of the bitmaps around their cuts: %d" % neither)
    print("looked for in the next bitmap instead: %d of %d missing" %
          (shifted_missing, shifted_checked))
    ok = missing == 0 and neither == 0
    if must < 1000 or used < n // 4:
        print("control-cut.py: too few writes checked to mean anything")
        ok = False
    if shifted_missing == 0:
        print("control-cut.py: the check cannot tell the bitmaps apart")
        ok = False
    sys.exit(0 if ok else 1)


if sys.argv[1] == "rotate":
    rotate(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
elif sys.argv[1] == "check":
    check(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5],
          sys.argv[6:])
else:
    fail("usage: control-cut.py rotate|check ...")
