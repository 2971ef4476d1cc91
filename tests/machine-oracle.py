#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# machine-oracle.py: the point-in-time oracle of a set of disks (a
# machine), for the multi-disk backup tests.  The blocks are those of
# backup-oracle.py (4K, tagged (block, version)); here one process
# writes every disk, with one clock, and its writes are chained across
# the disks.
#
#   machine-oracle.py write LOG STOPFILE CHAINS BLOCKS URI...
#       Disk i is URI number i (from 0), BLOCKS 4K blocks each.  CHAINS
#       chains of writes run at once; chain c writes disk c mod N, and
#       once that write has completed, the next disk (c+1 mod N), and
#       so on round robin: each write starts only after the one before
#       it in its chain completed, on another disk.  Never two writes
#       in flight on one block.  Until STOPFILE exists; LOG gets a line
#       per completed write: "disk block version start end"
#       (CLOCK_MONOTONIC nanoseconds, before issuing, after the reply).
#   machine-oracle.py run TIMES CMD [ARGS...]
#       Run CMD; write "run START END OFFSET" to TIMES: CLOCK_MONOTONIC
#       before it started and after it ended, and CLOCK_REALTIME minus
#       CLOCK_MONOTONIC (to place the wall clock time of a manifest).
#       Exits with CMD's status.
#   machine-oracle.py naive TIMES WRITELOG CTL...
#       A naive cut, for the self-test of check: backup-begin (view
#       "naive", full, no checkpoint) on each control socket in turn,
#       without pause; between disk i-1 and disk i it waits until a
#       write on disk i-1 that started after the begin there came back
#       has completed, and then the write that follows it in its chain,
#       on disk i, has completed too.  Such a cut is torn: disk i-1 is
#       before the first write, disk i after the second.  TIMES as for
#       run, around the whole cut.
#   machine-oracle.py check [--manifest FILE] TIMES WRITELOG TARGET...
#       TARGET i is a backup of disk i.  For each disk, the instants
#       that explain its image: t such that every block holds the
#       version that was on the disk at t (a write in flight at t may
#       be in or not): after the start of the write of the version it
#       holds, before the completion of the next one.  That is an
#       interval per block, and per disk their intersection.  The
#       disks' intervals must intersect, and within the command's run
#       (TIMES); with --manifest, also within the cut the manifest
#       reports (its wall clock time and length, 1 ms of slack for
#       their rounding).  Also, something must have been tested: on
#       every disk a write must have started and completed during the
#       run.  Prints the intervals, relative to the run's start.
#   machine-oracle.py state CTL...
#       A line per server: whether it is paused, its view, its bitmaps
#       (name, recording, consistent, dirty bytes), for comparing.
import datetime
import importlib.util
import json
import os
import random
import select
import socket
import subprocess
import sys
import time

_spec = importlib.util.spec_from_file_location(
    "backup_oracle", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                  "backup-oracle.py"))
backup_oracle = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(backup_oracle)
BLOCK = backup_oracle.BLOCK
tag = backup_oracle.tag
untag = backup_oracle.untag


def fail(msg):
    sys.exit("machine-oracle.py: " + msg)


def write(log, stopfile, chains, blocks, uris):
    import nbd
    n = len(uris)
    hs = []
    for u in uris:
        h = nbd.NBD()
        h.set_debug(False)      # (make check sets LIBNBD_DEBUG=1)
        h.connect_uri(u)
        hs.append(h)
    versions = [[0] * blocks for _ in range(n)]
    busy = [set() for _ in range(n)]
    rng = random.Random(os.getpid())
    out = open(log, "w")
    pending = [(c, c % n) for c in range(chains)]  # (chain, disk)
    inflight = 0

    def done(chain, d, b, v, start, error):
        nonlocal inflight
        end = time.monotonic_ns()
        if error.value:
            fail("write of block %d of disk %d failed" % (b, d))
        out.write("%d %d %d %d %d\n" % (d, b, v, start, end))
        busy[d].discard(b)
        inflight -= 1
        # The next write of the chain, on the next disk, is issued by
        # the loop below: it starts after this completion.
        pending.append((chain, (d + 1) % n))
        return 1

    def issue(chain, d):
        nonlocal inflight
        while True:
            b = rng.randrange(blocks)
            if b not in busy[d]:
                break
        busy[d].add(b)
        versions[d][b] += 1
        v = versions[d][b]
        start = time.monotonic_ns()
        hs[d].aio_pwrite(tag(b, v), b * BLOCK,
                         lambda err, c=chain, d=d, b=b, v=v, s=start:
                         done(c, d, b, v, s, err))
        inflight += 1

    stop = False
    while True:
        stop = stop or os.path.exists(stopfile)
        if stop:
            pending.clear()
        while pending:
            issue(*pending.pop(0))
        if stop and inflight == 0:
            break
        p = select.poll()
        fds = {}
        for h in hs:
            d = h.aio_get_direction()
            ev = (select.POLLIN if d & nbd.AIO_DIRECTION_READ else 0) | \
                 (select.POLLOUT if d & nbd.AIO_DIRECTION_WRITE else 0)
            if ev:
                fds[h.aio_get_fd()] = h
                p.register(h.aio_get_fd(), ev)
        for fd, ev in p.poll(100):
            h = fds[fd]
            if ev & (select.POLLIN | select.POLLHUP | select.POLLERR):
                h.aio_notify_read()
            if ev & select.POLLOUT:
                h.aio_notify_write()
        # Those who wait for writes (the naive cut) see them at once.
        out.flush()
    out.close()
    for h in hs:
        h.shutdown()


def run(times, cmd):
    offset = time.time_ns() - time.monotonic_ns()
    start = time.monotonic_ns()
    r = subprocess.call(cmd)
    end = time.monotonic_ns()
    with open(times, "w") as f:
        f.write("run %d %d %d\n" % (start, end, offset))
    sys.exit(r)


class Control:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.settimeout(30)
        self.s.connect(path)
        self.f = self.s.makefile("rw")

    def call(self, execute, args=None):
        req = {"execute": execute}
        if args is not None:
            req["arguments"] = args
        self.f.write(json.dumps(req) + "\n")
        self.f.flush()
        line = self.f.readline()
        if not line:
            fail("the server closed the control socket")
        reply = json.loads(line)
        if "return" not in reply:
            fail("%s: %r" % (execute, reply))
        return reply["return"]


def read_writes(f, carry):
    """The complete lines that f has now, as tuples of ints."""
    data = carry[0] + f.read()
    lines = data.split("\n")
    carry[0] = lines.pop()
    return [tuple(int(x) for x in l.split()) for l in lines if l]


def naive(times, writelog, ctls):
    offset = time.time_ns() - time.monotonic_ns()
    start = time.monotonic_ns()
    f = open(writelog)
    carry = [""]
    for i, ctl in enumerate(ctls):
        if i > 0:
            # Wait for a write w1 on disk i-1 that started after the
            # begin there came back, then for a write on disk i that
            # started after w1 completed (its successor in the chain,
            # or any later one) and has completed.
            w1_end = None
            deadline = time.monotonic() + 30
            while True:
                for d, b, v, s, e in read_writes(f, carry):
                    if w1_end is None and d == i - 1 and s > recv:
                        w1_end = e
                    elif w1_end is not None and d == i and s > w1_end:
                        break
                else:
                    if time.monotonic() > deadline:
                        fail("naive cut: no chained pair of writes from "
                             "disk %d to disk %d in 30 s" % (i - 1, i))
                    time.sleep(0.001)   # polling the writer's log
                    continue
                break
            print("naive cut: disk %d: a write started %.3f ms after the "
                  "begin on disk %d came back, completed, and a write on "
                  "disk %d started after it and completed, before this "
                  "begin" % (i, (s - recv) / 1e6, i - 1, i))
        c = Control(ctl)
        c.call("backup-begin", {"name": "naive"})
        recv = time.monotonic_ns()
    end = time.monotonic_ns()
    with open(times, "w") as out:
        out.write("run %d %d %d\n" % (start, end, offset))


def manifest_window(path, offset):
    m = json.load(open(path))
    t = m["cut"]["time"]
    if not t.endswith("Z"):
        fail("%s: the cut's time %r is not UTC (no Z)" % (path, t))
    dt = datetime.datetime.fromisoformat(t[:-1]).replace(
        tzinfo=datetime.timezone.utc)
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    real = (dt - epoch) // datetime.timedelta(microseconds=1) * 1000
    lo = real - offset
    return lo, lo + int(m["cut"]["ms"] * 1e6)


def check(times, writelog, targets, manifest):
    _, start, end, offset = open(times).read().split()
    start, end, offset = int(start), int(end), int(offset)
    writes = {}
    during = [0] * len(targets)
    for line in open(writelog):
        d, b, v, s, e = [int(x) for x in line.split()]
        writes.setdefault((d, b), {})[v] = (s, e)
        if d < len(targets) and s > start and e < end:
            during[d] += 1

    def rel(t):
        if t in (None, float("inf"), float("-inf")):
            return "%s" % t
        return "%+.3f ms" % ((t - start) / 1e6)

    lo, hi = start, end
    print("the run: from 0 to %s" % rel(end))
    for d, target in enumerate(targets):
        if during[d] == 0:
            fail("disk %d: no write started and completed during the run: "
                 "the disk did not change while it ran, nothing tested" % d)
        dlo, dhi = float("-inf"), float("inf")
        why_lo = why_hi = None
        with open(target, "rb") as f:
            b = 0
            while True:
                data = f.read(BLOCK)
                if not data:
                    break
                v = untag(data, b)
                w = writes.get((d, b), {})
                if v and v not in w:
                    fail("disk %d block %d holds version %d, which no "
                         "completed write wrote" % (d, b, v))
                if v and w[v][0] > dlo:
                    dlo, why_lo = w[v][0], (b, v)
                if v + 1 in w and w[v + 1][1] < dhi:
                    dhi, why_hi = w[v + 1][1], (b, v + 1)
                b += 1
        print("disk %d (%s): the instants in (%s, %s): after the start of "
              "block %s version %s, before the completion of block %s "
              "version %s; %d writes started and completed during the run"
              % (d, target, rel(dlo), rel(dhi), why_lo and why_lo[0],
                 why_lo and why_lo[1], why_hi and why_hi[0],
                 why_hi and why_hi[1], during[d]))
        if dlo >= dhi:
            fail("disk %d is not the disk at any one instant: it holds "
                 "block %d version %d, started at %s, and not block %d "
                 "version %d, completed at %s"
                 % (d, why_lo[0], why_lo[1], rel(dlo), why_hi[0],
                    why_hi[1], rel(dhi)))
        lo, hi = max(lo, dlo), min(hi, dhi)
        if lo >= hi:
            fail("the disks' instants do not intersect within the run: "
                 "disks 0 to %d are not the machine at one instant "
                 "(common so far: (%s, %s))" % (d, rel(lo), rel(hi)))
    print("all disks: the instants in (%s, %s), %.3f ms wide: one instant "
          "explains every disk" % (rel(lo), rel(hi), (hi - lo) / 1e6))
    if manifest:
        mlo, mhi = manifest_window(manifest, offset)
        slack = 1000000
        print("the manifest's cut: (%s, %s)" % (rel(mlo), rel(mhi)))
        if max(lo, mlo - slack) >= min(hi, mhi + slack):
            fail("the instants that explain the disks, (%s, %s), are not "
                 "in the cut the manifest reports, (%s, %s)"
                 % (rel(lo), rel(hi), rel(mlo), rel(mhi)))


def state(ctl):
    c = Control(ctl)
    r = c.call("query")
    c.s.close()
    view = r["backup"] and r["backup"]["name"]
    bitmaps = " ".join("%s(%s,%s,%d)" % (
        b["name"], "recording" if b["recording"] else "disabled",
        "consistent" if b["consistent"] else "inconsistent",
        b["dirty-bytes"]) for b in r["bitmaps"])
    print("paused=%s view=%s bitmaps=%s"
          % (str(r["paused"]).lower(), view or "none", bitmaps or "none"))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "write":
        write(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]),
              sys.argv[6:])
    elif cmd == "run":
        run(sys.argv[2], sys.argv[3:])
    elif cmd == "naive":
        naive(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif cmd == "check":
        args = sys.argv[2:]
        manifest = None
        if args[0] == "--manifest":
            manifest = args[1]
            args = args[2:]
        check(args[0], args[1], args[2:], manifest)
    elif cmd == "state":
        for ctl in sys.argv[2:]:
            state(ctl)
    else:
        fail("unknown command " + cmd)
