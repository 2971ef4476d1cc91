# SPDX-License-Identifier: BSD-3-Clause
# controllib.py: what control-cut.py and control-kill.py share: the
# control socket, the writers' logs (control-writer.py), the bitmaps
# as "dirtybitmap map" reads them, and where a write falls among cuts.
import bisect
import json
import socket
import subprocess
import sys
import time


def fail(msg):
    sys.exit("%s: %s" % (sys.argv[0].rsplit("/", 1)[-1], msg))


class Control:
    """One connection to a control socket."""

    def __init__(self, path, timeout=30):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.buf = b""

    def send(self, obj):
        """Send a request; returns the time just before it was sent."""
        line = json.dumps(obj).encode() + b"\n"
        t = time.monotonic_ns()
        self.s.sendall(line)
        return t

    def reply(self):
        """The next reply, and the time just after it was read."""
        while b"\n" not in self.buf:
            data = self.s.recv(65536)
            if not data:
                fail("the server closed the control socket")
            self.buf += data
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line), time.monotonic_ns()

    def ok(self, cmd, args=None):
        """Send cmd (with args) and return its reply's "return"; a
        refusal fails the test."""
        req = {"execute": cmd}
        if args is not None:
            req["arguments"] = args
        self.send(req)
        r = self.reply()[0]
        if "return" not in r:
            fail("%s: %s" % (cmd, r))
        return r["return"]

    def close(self):
        self.s.close()


def rotation(k, gran, extra=()):
    """The transaction "add b{k}, disable b{k-1}" (and extra actions)."""
    return {"execute": "transaction", "id": k,
            "arguments": {"actions": [
                {"action": "add", "bitmap": "b%d" % k, "granularity": gran},
                {"action": "disable", "bitmap": "b%d" % (k - 1)}]
                + list(extra)}}


def completed_writes(logs):
    """(offset, count, start, end) of every request that completed
    without error, and how many did not."""
    writes, other = [], 0
    for wl in logs:
        for l in open(wl):
            kind, off, count, start, end, err = l.split()
            if int(end) == -1 or int(err) != 0:
                other += 1
            else:
                writes.append((int(off), int(count), int(start), int(end)))
    return writes, other


def info(bmfile):
    return json.loads(subprocess.run(
        ["dirtybitmap", "info", "--output=json", bmfile], check=True,
        capture_output=True).stdout)


def dirty_granules(bmfile, name, gran, nr):
    """A bytearray of nr granules, 1 where bitmap name is dirty."""
    out = subprocess.run(["dirtybitmap", "map", "--output=json", bmfile,
                          name], check=True, capture_output=True).stdout
    dirty = bytearray(nr)
    for e in json.loads(out):
        if e["type"] not in (0, 1, 2):
            fail("%s: bad extent %r" % (name, e))
        if e["type"] == 1:
            continue
        first = e["offset"] // gran
        end = (e["offset"] + e["length"] + gran - 1) // gran
        dirty[first:end] = b"\1" * (end - first)
    return dirty


def is_in(dirty, gran, w):
    """Whether every granule write w touches is dirty."""
    first, last = w[0] // gran, (w[0] + w[1] - 1) // gran
    return all(dirty[first:last + 1])


def place(w, sent, reply):
    """Cuts 1..N (sent[k-1], reply[k-1]) sorted by time: returns (a, b)
    such that the write is after cuts 1..a (it started after their
    reply), before cuts b+1..N (it completed before they were sent),
    and in flight at cuts a+1..b."""
    return bisect.bisect_left(reply, w[2]), bisect.bisect_right(sent, w[3])
