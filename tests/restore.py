#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# restore.py: what the restore tests (test-dirtybitmap-restore-*.sh)
# share: writers that log what the server acknowledged, the disk that
# must come of the image and those writes, and the control socket's
# "restore".  Every wait is bounded.
#
#   restore.py write URI LOG SEED N [flush]
#       N writes (pwrite or zero; in part of a granule, across two, or
#       a whole one), the same for the same SEED; LOG gets "begin I"
#       before write I is sent and "done I" once it is acknowledged
#       (with flush, "flushed I" once a flush after write I is).
#   restore.py check DISK IMAGE LOG... [--loose-after-flush]
#       DISK must be IMAGE with every acknowledged write of each LOG
#       applied in order; a write begun but not acknowledged may have
#       landed or not (each byte old or new).  With
#       --loose-after-flush, the same for writes acknowledged after
#       the last flush of their log (a power loss may lose them).
#   restore.py requests SIZE LOG...
#       "OFFSET COUNT" of each write begun (for dirty-ranges.py).
#   restore.py wait CTL
#       poll the query until the restore is complete (waiting for the
#       server to make CTL if need be); print it.
#   restore.py show CTL
#       print the query's "restore" (sorted JSON).
import json
import random
import socket
import sys
import time

GRANULE = 65536
TIMEOUT = 60


def fail(msg):
    sys.exit("restore.py: " + msg)


def op(seed, i, size):
    """Write i of a seed: (kind, offset, data or length)."""
    r = random.Random(seed * 1000003 + i)
    shape = r.choice(["part", "across", "whole", "small"])
    g = r.randrange(size // GRANULE)
    if shape == "part":
        off, n = g * GRANULE + r.randrange(1, GRANULE - 4096), 4096
    elif shape == "across":
        off, n = g * GRANULE + GRANULE - 2048, 4096
    elif shape == "whole":
        off, n = g * GRANULE, GRANULE
    else:
        off, n = g * GRANULE + r.randrange(GRANULE - 100), 100
    n = max(1, min(n, size - off))
    if r.random() < 0.2:
        return "zero", off, n
    return "pwrite", off, r.randbytes(n)


def write(uri, log, seed, n, flush):
    import nbd
    h = nbd.NBD()
    h.connect_uri(uri)
    size = h.get_size()
    with open(log, "a") as f:
        for i in range(n):
            kind, off, data = op(seed, i, size)
            print("begin %d %d" % (seed, i), file=f, flush=True)
            if kind == "zero":
                h.zero(data, off)
            else:
                h.pwrite(data, off)
            print("done %d %d" % (seed, i), file=f, flush=True)
            if flush:
                h.flush()
                print("flushed %d %d" % (seed, i), file=f, flush=True)
    h.shutdown()


def events(log):
    """The writes of a log: (seed, i, acknowledged, flushed after)."""
    out = {}
    order = []
    with open(log) as f:
        for line in f:
            what, seed, i = line.split()
            key = (int(seed), int(i))
            if what == "begin":
                out[key] = [False, False]
                order.append(key)
            elif what == "done":
                out[key][0] = True
            else:
                for k in order[:order.index(key) + 1]:
                    out[k][1] = True
    return [(k[0], k[1], out[k][0], out[k][1]) for k in order]


def check(disk, image, logs, loose_after_flush):
    got = open(disk, "rb").read()
    want = bytearray(open(image, "rb").read())
    if len(got) != len(want):
        fail("%s is %d bytes, %s %d" % (disk, len(got), image, len(want)))
    loose = []                  # (offset, old bytes, new bytes)
    for log in logs:
        for seed, i, acked, flushed in events(log):
            kind, off, data = op(seed, i, len(want))
            new = bytes(data)           # (a zero's: data is its length)
            old = bytes(want[off:off + len(new)])
            if not acked or (loose_after_flush and not flushed):
                loose.append((off, old, new))
            want[off:off + len(new)] = new
    # Bytes of a loose write may be the old or the new ones.
    for off, old, new in loose:
        for k in range(len(new)):
            if got[off + k] in (old[k], new[k]):
                want[off + k] = got[off + k]
    if got != bytes(want):
        bad = next(k for k in range(len(got)) if got[k] != want[k])
        fail("%s differs from the image and the writes at offset %d "
             "(granule %d): %r, expected %r" %
             (disk, bad, bad // GRANULE, got[bad:bad + 8],
              bytes(want[bad:bad + 8])))
    print("restore.py: %s is %s and the acknowledged writes" % (disk, image))


def query(ctl):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(ctl)
    s.sendall(b'{"execute": "query"}\n')
    buf = b""
    while b"\n" not in buf:
        data = s.recv(65536)
        if not data:
            fail("the server closed the control socket")
        buf += data
    s.close()
    return json.loads(buf.partition(b"\n")[0])["return"]["restore"]


def main():
    cmd = sys.argv[1]
    if cmd == "write":
        write(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]),
              sys.argv[6:] == ["flush"])
    elif cmd == "check":
        args = sys.argv[2:]
        loose = "--loose-after-flush" in args
        args = [a for a in args if a != "--loose-after-flush"]
        check(args[0], args[1], args[2:], loose)
    elif cmd == "requests":
        for log in sys.argv[3:]:
            for seed, i, _, _ in events(log):
                _, off, data = op(seed, i, int(sys.argv[2]))
                print(off, len(bytes(data)))
    elif cmd == "wait":
        end = time.monotonic() + TIMEOUT
        while True:
            try:
                r = query(sys.argv[2])
            except (FileNotFoundError, ConnectionRefusedError):
                r = None            # (the server is starting)
            if r and r["complete"]:
                break
            if time.monotonic() > end:
                fail("the restore did not complete in %d s: %r" %
                     (TIMEOUT, r))
            time.sleep(0.1)
        print(json.dumps(r, sort_keys=True))
    elif cmd == "show":
        print(json.dumps(query(sys.argv[2]), sort_keys=True))
    else:
        fail("unknown command " + cmd)


main()
