#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Idle control clients cannot lock the others out: with 64 clients
# connected, a new one takes the place of the one that has sent
# nothing for the longest, which gets an error saying so and is
# disconnected; a client that holds a pause is never the one dropped,
# and one that spoke recently is not either.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

truncate -s 1M disk.img
ctl="$PWD/ctl.sock"
start_nbdkit -P "$PWD/pid" -U "$PWD/nbd.sock" --filter="$FILTER" \
             file disk.img bitmap=b0 action=add control="$ctl"

cat > idle.py <<'EOF'
import json, socket, sys

ctl = sys.argv[1]
DROPPED = ("dropped: the server has too many control clients and this "
           "one was idle the longest")


class Client:
    def __init__(self):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(ctl)     # (blocking: waits while the backlog is full)
        self.s.settimeout(10)
        self.buf = b""

    def line(self):
        while b"\n" not in self.buf:
            data = self.s.recv(4096)
            if not data:
                return None
            self.buf += data
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line)

    def call(self, cmd):
        self.s.sendall(json.dumps({"execute": cmd}).encode() + b"\n")
        r = self.line()
        if r is None or "return" not in r:
            sys.exit("%s: %r" % (cmd, r))
        return r["return"]

    def dropped(self):
        r = self.line()
        if r != {"error": {"class": "GenericError", "desc": DROPPED}}:
            sys.exit("expected the drop error, got %r" % (r,))
        if self.line() is not None:
            sys.exit("still connected after the drop error")


# The oldest client holds a pause; 63 more are idle: 64.
pauser = Client()
pauser.call("pause")
idle = [Client() for _ in range(63)]
# A newcomer is served; the oldest idle one (not the pauser) goes.
new = Client()
if new.call("query")["paused"] is not True:
    sys.exit("the pause did not hold")
idle[0].dropped()
# The next oldest speaks: then the one after it is the idlest.
idle[1].call("query")
newer = Client()
newer.call("query")
idle[2].dropped()
# Every other client is still served, the pauser first.
pauser.call("resume")
for c in [idle[1]] + idle[3:] + [new, newer]:
    c.call("query")
print("ok")
EOF
python3 idle.py "$ctl" > out
expect out <<'EOF'
ok
EOF
