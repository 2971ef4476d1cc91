#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# fake-qga.py: a guest agent for the tests, the host side of qemu's
# virtio-serial channel: a Unix socket server speaking qemu-guest-agent's
# protocol (JSON requests, 0xFF to resynchronise, guest-sync-delimited,
# guest-fsfreeze-freeze, -thaw, -status, guest-ping).  It freezes
# nothing: at a freeze and at a thaw it looks at the disks' servers and
# targets, and records what it saw.
#
#   fake-qga.py serve SOCKET LOG [--hang-freeze | --hold-freeze FIFO]
#                    [--ctl CTL]... [--target FILE]...
#       Serve until killed; SOCKET.ready appears once it listens.  LOG
#       gets a JSON object per line: {"event": "request", "execute":
#       NAME, "t": NS} for each request as it arrives (read at once,
#       also while an answer is held), and {"event": "freeze" or
#       "thaw", "t": NS, "servers": [{"ctl", "paused", "view"}...],
#       "targets": {FILE: md5 or null}} just before answering a freeze
#       or a thaw (CLOCK_MONOTONIC nanoseconds).  As qemu's chardev
#       and a single-threaded qemu-guest-agent behind it: one client
#       at a time (the next is accepted once the last has gone), and
#       its requests run in order, one at a time, each to its end, also
#       those still queued when their client has gone (their answers
#       are lost).  --hang-freeze: a freeze is never answered (what
#       comes after it is, as if its answer was lost).  --hold-freeze:
#       a freeze ends once FIFO was opened for writing and closed by
#       the test, and until then no request runs (the agent is busy
#       freezing).
#   fake-qga.py probe LOG EVENT [--ctl CTL]... [--target FILE]...
#       Record one EVENT ("freeze" or "thaw") as above, and exit: a
#       --freeze-command or --thaw-command that does what the agent does.
#   fake-qga.py status SOCKET
#       Print what the agent says of the guest ("frozen" or "thawed"),
#       asked as the next client: after everything its earlier clients
#       sent has run.
import hashlib
import json
import os
import queue
import socket
import sys
import threading
import time

lock = threading.Lock()          # the log

def record(log, obj):
    obj["t"] = time.monotonic_ns()
    with lock, open(log, "a") as f:
        f.write(json.dumps(obj) + "\n")


def query(ctl):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(ctl)
    s.sendall(b'{"execute": "query"}\n')
    f = s.makefile("rb")
    r = json.loads(f.readline())["return"]
    s.close()
    return {"ctl": ctl, "paused": r["paused"],
            "view": r["backup"] and r["backup"]["name"],
            "bitmaps": [b["name"] for b in r["bitmaps"]]}


def md5(path):
    try:
        with open(path, "rb") as f:
            return hashlib.md5(f.read()).hexdigest()
    except FileNotFoundError:
        return None


def probe(log, event, ctls, targets):
    record(log, {"event": event, "servers": [query(c) for c in ctls],
                 "targets": {t: md5(t) for t in targets}})


def requests(conn):
    """The requests on conn, as they come: 0xFF bytes and white space
    between them are skipped."""
    dec = json.JSONDecoder()
    buf = ""
    while True:
        data = conn.recv(65536)
        if not data:
            return
        buf += data.replace(b"\xff", b"").decode()
        while True:
            buf = buf.lstrip()
            if not buf:
                break
            try:
                obj, end = dec.raw_decode(buf)
            except ValueError:
                break           # an incomplete object: read more
            buf = buf[end:]
            yield obj


def serve_conn(conn, log, opts):
    """Run the requests of conn in order, to the last one sent before
    it closed."""
    q = queue.Queue()
    gone = False

    def reader():
        try:
            for req in requests(conn):
                record(log, {"event": "request",
                             "execute": req.get("execute")})
                q.put(req)
        except OSError:
            pass
        q.put(None)

    threading.Thread(target=reader, daemon=True).start()
    while True:
        req = q.get()
        if req is None:
            break
        if not answer(conn if not gone else None, req, log, opts):
            gone = True
    conn.close()


frozen = False                   # the guest, as the agent says


def answer(conn, req, log, opts):
    """Run req, and answer it on conn (None: gone); False if conn is
    gone."""
    global frozen
    cmd = req.get("execute")
    args = req.get("arguments") or {}
    prefix = b""
    if cmd == "guest-sync-delimited":
        prefix, ret = b"\xff", args.get("id")
    elif cmd == "guest-sync":
        ret = args.get("id")
    elif cmd == "guest-ping":
        ret = {}
    elif cmd == "guest-fsfreeze-status":
        ret = "frozen" if frozen else "thawed"
    elif cmd == "guest-fsfreeze-freeze":
        if opts["hang"]:
            return True
        if opts["hold"]:
            fd = os.open(opts["hold"], os.O_RDONLY)
            while os.read(fd, 4096):
                pass
            os.close(fd)
        probe(log, "freeze", opts["ctls"], opts["targets"])
        frozen, ret = True, 2
    elif cmd == "guest-fsfreeze-thaw":
        probe(log, "thaw", opts["ctls"], opts["targets"])
        frozen, ret = False, 2
    else:
        ret = None
    if ret is None and cmd not in ("guest-sync-delimited", "guest-sync"):
        reply = {"error": {"class": "CommandNotFound",
                           "desc": "The command %s has not been found"
                           % cmd}}
    else:
        reply = {"return": ret}
    if "id" in req:
        reply["id"] = req["id"]
    if conn is None:
        return False
    try:
        conn.sendall(prefix + json.dumps(reply).encode() + b"\n")
    except OSError:
        return False
    return True


def parse_opts(argv):
    opts = {"hang": False, "hold": None, "ctls": [], "targets": []}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--hang-freeze":
            opts["hang"] = True
        elif a == "--hold-freeze":
            i += 1
            opts["hold"] = argv[i]
        elif a == "--ctl":
            i += 1
            opts["ctls"].append(argv[i])
        elif a == "--target":
            i += 1
            opts["targets"].append(argv[i])
        else:
            sys.exit("fake-qga.py: unknown option " + a)
        i += 1
    return opts


def serve(path, log, opts):
    s = socket.socket(socket.AF_UNIX)
    if os.path.exists(path):
        os.unlink(path)
    s.bind(path)
    s.listen(8)
    open(path + ".ready", "w").close()
    while True:
        conn, _ = s.accept()
        serve_conn(conn, log, opts)


def status(path):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(30)
    s.connect(path)
    s.sendall(b'\xff{"execute": "guest-fsfreeze-status"}\n')
    f = s.makefile("rb")
    while True:
        line = f.readline().replace(b"\xff", b"")
        if not line:
            sys.exit("fake-qga.py: status: the agent did not answer")
        if line.strip():
            print(json.loads(line)["return"])
            return


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], sys.argv[3], parse_opts(sys.argv[4:]))
    elif sys.argv[1] == "status":
        status(sys.argv[2])
    elif sys.argv[1] == "probe":
        o = parse_opts(sys.argv[4:])
        probe(sys.argv[2], sys.argv[3], o["ctls"], o["targets"])
    else:
        sys.exit("fake-qga.py: unknown command " + sys.argv[1])
