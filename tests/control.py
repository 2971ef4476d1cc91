#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# control.py: a control socket client for the tests, one connection
# per call, every wait bounded (10 s).
#
#   control.py send SOCKET LINE...
#       send each LINE, print each reply line as it came.
#   control.py ok SOCKET LINE [ID]
#       the reply must be exactly {"return": {}} (with "id": ID, the
#       JSON value ID, when given); prints it.
#   control.py error SOCKET LINE CLASS TEXT [ID]
#       the reply must be exactly {"error": {"class": CLASS, "desc":
#       D}} (with "id": ID when given, and no "id" otherwise), where D
#       is a string containing TEXT; prints it.
#   control.py query SOCKET
#       print the "return" value of a query, one key per line (sorted
#       JSON), for comparing states.
# Any mismatch prints what was expected and what came, and exits 1.
import json
import socket
import sys


def fail(msg):
    print("control.py: " + msg, file=sys.stderr)
    sys.exit(1)


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(path)
    return s


def read_line(s, buf):
    """One line from s (bytes, without the newline), and what follows."""
    while b"\n" not in buf:
        data = s.recv(65536)
        if not data:
            fail("the server closed the connection without a reply "
                 "(got %r)" % buf)
        buf += data
    line, _, rest = buf.partition(b"\n")
    return line, rest


def call(path, line):
    s = connect(path)
    s.sendall(line.encode() + b"\n")
    reply, _ = read_line(s, b"")
    s.close()
    print(reply.decode())
    return reply


def parse(reply):
    try:
        return json.loads(reply)
    except ValueError as e:
        fail("the reply is not JSON (%s): %r" % (e, reply))


def check_id(obj, want_id):
    if want_id is None:
        if "id" in obj:
            fail("the reply has an id, the request had none: %r" % obj)
    else:
        if obj.get("id", object()) != json.loads(want_id):
            fail("the reply does not echo the id %s: %r" % (want_id, obj))
        del obj["id"]


def main():
    cmd, path = sys.argv[1], sys.argv[2]
    if cmd == "send":
        s = connect(path)
        buf = b""
        for line in sys.argv[3:]:
            s.sendall(line.encode() + b"\n")
            reply, buf = read_line(s, buf)
            print(reply.decode())
        s.close()
    elif cmd == "ok":
        obj = parse(call(path, sys.argv[3]))
        check_id(obj, sys.argv[4] if len(sys.argv) > 4 else None)
        if obj != {"return": {}}:
            fail('expected {"return": {}}, got %r' % obj)
    elif cmd == "error":
        cls, text = sys.argv[4], sys.argv[5]
        obj = parse(call(path, sys.argv[3]))
        check_id(obj, sys.argv[6] if len(sys.argv) > 6 else None)
        if set(obj) != {"error"} or not isinstance(obj["error"], dict) or \
           set(obj["error"]) != {"class", "desc"}:
            fail('expected exactly {"error": {"class", "desc"}}, got %r' % obj)
        if obj["error"]["class"] != cls:
            fail("expected class %s, got %r" % (cls, obj["error"]["class"]))
        desc = obj["error"]["desc"]
        if not isinstance(desc, str) or text not in desc:
            fail("expected a desc containing %r, got %r" % (text, desc))
    elif cmd == "query":
        s = connect(path)
        s.sendall(b'{"execute": "query"}\n')
        reply, _ = read_line(s, b"")
        obj = parse(reply)
        if set(obj) != {"return"}:
            fail("query failed: %r" % obj)
        for k in sorted(obj["return"]):
            print(k, json.dumps(obj["return"][k], sort_keys=True))
    else:
        fail("unknown command " + cmd)


main()
