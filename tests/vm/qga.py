#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# qga.py SOCKET [COMMAND...]: talk to qemu-guest-agent through the host
# side of its virtio-serial channel (qemu's -chardev socket SOCKET):
# guest-sync-delimited first, sent again until the agent answers
# (it may still be starting: up to 60 s), then each COMMAND (a name
# such as guest-fsfreeze-status, without arguments); prints each
# answer's "return" as JSON, one a line.  Exits 1 if the agent never
# answers or returns an error.
import json
import random
import socket
import sys
import time


class Agent:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        self.buf = b""

    def send(self, obj):
        self.s.sendall(json.dumps(obj).encode() + b"\n")

    def line(self, deadline):
        """The next line the agent sends, or None past the deadline."""
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.s.settimeout(left)
            try:
                data = self.s.recv(4096)
            except socket.timeout:
                return None
            if not data:
                sys.exit("qga.py: the agent's socket was closed")
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def sync(self, timeout):
        """guest-sync-delimited until the answer has our id: what the
        agent still had to say from before (stale answers) is skipped
        up to the 0xFF that starts the answer."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            sid = random.randrange(1, 2**31)
            # 0xFF makes the agent drop a half-read request.
            self.s.sendall(b"\xff")
            self.send({"execute": "guest-sync-delimited",
                       "arguments": {"id": sid}})
            try_end = min(end, time.monotonic() + 2)
            while True:
                line = self.line(try_end)
                if line is None:
                    break
                if b"\xff" in line:
                    line = line[line.rindex(b"\xff") + 1:]
                    try:
                        if json.loads(line).get("return") == sid:
                            return
                    except ValueError:
                        pass
        sys.exit("qga.py: no answer to guest-sync-delimited in %d s" % timeout)

    def execute(self, cmd, timeout=30):
        self.send({"execute": cmd})
        line = self.line(time.monotonic() + timeout)
        if line is None:
            sys.exit("qga.py: no answer to %s" % cmd)
        reply = json.loads(line.replace(b"\xff", b""))
        if "return" not in reply:
            sys.exit("qga.py: %s: %s" % (cmd, reply))
        return reply["return"]


def main():
    agent = Agent(sys.argv[1])
    agent.sync(60)
    for cmd in sys.argv[2:]:
        print(json.dumps(agent.execute(cmd)), flush=True)


main()
