#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# backup-oracle.py: the point-in-time oracle of the backup view tests.
#
#   backup-oracle.py write URI FIRST BLOCKS LOG STOPFILE [DEPTH]
#       Write 4K blocks FIRST to FIRST+BLOCKS-1, tagged (block number,
#       version), at random with up to DEPTH (default 16) requests in
#       flight (never two on one block: writers get blocks of their
#       own), until STOPFILE exists; LOG gets a line per write: block
#       version start end (CLOCK_MONOTONIC nanoseconds, before issuing
#       and after the reply).
#   backup-oracle.py cut SOCKET LOG ARGS-JSON
#       Send backup-begin with ARGS-JSON on the control socket; append
#       "cut SEND RECV" to LOG around it; fail if it fails.
#   backup-oracle.py straddled CUTLOG WRITELOG...
#       Exit 0 if a write straddled the last cut (as check requires),
#       1 if none did, 2 if that cannot be told yet: no write started
#       after the cut's reply has completed (those before it may still
#       be in flight).
#   backup-oracle.py check [--window] TARGET BLOCKS CUTLOG WRITELOG...
#       Every block of TARGET must hold a version the last cut allows:
#       no older than the last write to it completed before the cut was
#       sent, and not one whose write started after the reply came
#       back.  Prints what it checked.
#       The test must also have tested something: at least one write
#       must have straddled the cut, started before backup-begin was
#       sent and completed after its reply came, so in flight whenever
#       the server made the cut; else it fails.  With --window the cut
#       is somewhere inside a whole backup command (SEND and RECV are
#       its start and end): then at least one write must have started
#       and completed inside it (the disk changed during the backup).
import json
import os
import random
import socket
import struct
import sys
import time

BLOCK = 4096


def tag(block, version):
    return struct.pack("<QQ", block, version) * (BLOCK // 16)


def untag(data, block):
    if data == bytes(BLOCK):
        return 0
    b, v = struct.unpack_from("<QQ", data)
    if b != block or data != tag(b, v):
        sys.exit("block %d holds something no write wrote (%r...)"
                 % (block, data[:16]))
    return v


def write(uri, first, blocks, log, stopfile, depth):
    import nbd
    h = nbd.NBD()
    h.connect_uri(uri)
    versions = [0] * (first + blocks)
    busy = set()
    out = open(log, "w")
    rng = random.Random(os.getpid())
    inflight = 0

    def done(block, version, start, error):
        nonlocal inflight
        end = time.monotonic_ns()
        if error.value:
            sys.exit("write of block %d failed" % block)
        out.write("%d %d %d %d\n" % (block, version, start, end))
        out.flush()             # the test waits to see writes done
        busy.discard(block)
        inflight -= 1
        return 1

    n = 0
    while not os.path.exists(stopfile) or inflight:
        while inflight < depth and not os.path.exists(stopfile):
            b = first + rng.randrange(blocks)
            if b in busy:
                continue
            busy.add(b)
            versions[b] += 1
            v = versions[b]
            start = time.monotonic_ns()
            h.aio_pwrite(tag(b, v), b * BLOCK,
                         lambda err, b=b, v=v, s=start: done(b, v, s, err))
            inflight += 1
            n += 1
        if inflight:
            h.poll(-1)
    out.close()
    h.shutdown()


def cut(sock, log, args):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    f = s.makefile("rw")
    req = json.dumps({"execute": "backup-begin",
                      "arguments": json.loads(args)})
    send = time.monotonic_ns()
    f.write(req + "\n")
    f.flush()
    reply = json.loads(f.readline())
    recv = time.monotonic_ns()
    if "return" not in reply:
        sys.exit("backup-begin: %r" % reply)
    with open(log, "a") as out:
        out.write("cut %d %d\n" % (send, recv))


def times_of(writelogs):
    return [tuple(int(x) for x in line.split()[2:4])
            for log in writelogs for line in open(log)]


def straddled(cutlog, writelogs):
    send, recv = [int(x) for x in open(cutlog).read().split()[-2:]]
    times = times_of(writelogs)
    if any(s < send and e > recv for s, e in times):
        sys.exit(0)
    sys.exit(1 if any(s > recv for s, e in times) else 2)


def check(target, blocks, cutlog, writelogs, window):
    send, recv = [int(x) for x in open(cutlog).read().split()[-2:]]
    writes = {}
    for log in writelogs:
        for line in open(log):
            b, v, s, e = [int(x) for x in line.split()]
            writes.setdefault(b, {})[v] = (s, e)
    times = [t for w in writes.values() for t in w.values()]
    if window:
        during = sum(1 for s, e in times if s > send and e < recv)
        if during == 0:
            sys.exit("no write started and completed during the backup "
                     "(%.1f ms): the disk did not change while it ran"
                     % ((recv - send) / 1e6))
        print("%d writes started and completed during the backup" % during)
    else:
        straddled = sum(1 for s, e in times if s < send and e > recv)
        if straddled == 0:
            sys.exit("no write straddled the cut (backup-begin took %.1f "
                     "ms): nothing was in flight, nothing was tested"
                     % ((recv - send) / 1e6))
        print("%d writes straddled the cut (in flight from before "
              "backup-begin was sent until after its reply)" % straddled)
    checked = in_flight = 0
    with open(target, "rb") as f:
        for b in range(blocks):
            v = untag(f.read(BLOCK), b)
            w = writes.get(b, {})
            oldest = max([x for x, (s, e) in w.items() if e < send] or [0])
            if v < oldest:
                sys.exit("block %d holds version %d, older than version %d "
                         "that completed before the cut" % (b, v, oldest))
            if v and (v not in w or w[v][0] > recv):
                sys.exit("block %d holds version %d, written after the cut"
                         % (b, v))
            if v and w[v][1] >= send:
                in_flight += 1
            checked += 1
    print("%d blocks checked against the cut: each holds what the cut "
          "allows (%d writes logged; %d blocks hold a write that was in "
          "flight at the cut)"
          % (checked, sum(len(w) for w in writes.values()), in_flight))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "write":
        write(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5],
              sys.argv[6], int(sys.argv[7]) if len(sys.argv) > 7 else 16)
    elif cmd == "cut":
        cut(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "straddled":
        straddled(sys.argv[2], sys.argv[3:])
    elif cmd == "check":
        window = sys.argv[2] == "--window"
        args = sys.argv[3:] if window else sys.argv[2:]
        check(args[0], int(args[1]), args[2], args[3:], window)
    else:
        sys.exit("backup-oracle.py: unknown command " + cmd)
