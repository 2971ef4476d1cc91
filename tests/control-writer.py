#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# control-writer.py: a writer for the control tests.
#
#   control-writer.py URI SEED LOG STOP [DEPTH]
#
# One connection, DEPTH (default 8) requests in flight: random pwrite,
# zero and trim of random lengths at unaligned offsets, nonstop, until
# the file STOP exists or the server goes away.  Each request is timed
# on CLOCK_MONOTONIC (shared by every process): its start just before
# it is issued, its end in its completion callback, that is after its
# reply came.  LOG gets one line per request:
#
#   KIND OFFSET COUNT START_NS END_NS ERROR
#
# KIND is w, z or t; END_NS is -1 for a request that never completed
# (the server died).  LOG is written at the end; LOG.ready appears once
# the first request has completed.
import os
import random
import sys
import time

import nbd

uri, seed, logname, stop = sys.argv[1], int(sys.argv[2]), sys.argv[3], \
    sys.argv[4]
depth = int(sys.argv[5]) if len(sys.argv) > 5 else 8
random.seed(seed)

h = nbd.NBD()
h.set_debug(False)              # LIBNBD_DEBUG=1 would log every request
h.connect_uri(uri)
size = h.get_size()

# Mostly small, so that a bitmap that records for a few milliseconds
# is far from full.
counts = [1, 512, 1000, 4095, 4096, 4097, 8192, 12345, 65536]
weights = [4, 4, 4, 4, 4, 4, 2, 2, 1]
bufs = {c: nbd.Buffer.from_bytearray(bytearray(os.urandom(c)))
        for c in counts}
reqs = []                       # [kind, offset, count, start, end, error]
ready = False


def completion(req):
    def cb(err):
        req[4] = time.monotonic_ns()
        req[5] = err.value
        return 1
    return cb


try:
    n = 0
    while True:
        while h.aio_in_flight() >= depth:
            h.poll(-1)
        if not ready and any(r[4] != -1 for r in reqs):
            ready = True
            open(logname + ".ready", "w").close()
        n += 1
        if n % 64 == 0 and os.path.exists(stop):
            break
        count = random.choices(counts, weights)[0]
        off = random.randrange(size - count + 1)
        kind = random.choice("wwwwzt")
        req = [kind, off, count, 0, -1, 0]
        reqs.append(req)
        req[3] = time.monotonic_ns()
        if kind == "w":
            h.aio_pwrite(bufs[count], off, completion=completion(req))
        elif kind == "z":
            h.aio_zero(count, off, completion=completion(req))
        else:
            h.aio_trim(count, off, completion=completion(req))
    while h.aio_in_flight() > 0:
        h.poll(-1)
    h.shutdown()
except nbd.Error:
    pass                        # the server has gone (kill -9)

with open(logname, "w") as log:
    for r in reqs:
        print(*r, file=log)
