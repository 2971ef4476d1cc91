#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# control-hold.py: a control client that pauses the disk and keeps
# its connection, for the pause tests.
#
#   control-hold.py SOCKET DIR
#
# Sends pause and, once the reply came, creates DIR/paused (holding
# the reply).  Then it waits for DIR/resume (sends resume, writes the
# reply to DIR/resumed) or DIR/close (closes the connection without a
# word), and exits after DIR/close.  It gives up after 60 seconds.
import os
import socket
import sys
import time

ctl, d = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX)
s.settimeout(30)
s.connect(ctl)
f = s.makefile("rb")
s.sendall(b'{"execute": "pause"}\n')
r = f.readline()
with open(os.path.join(d, "paused.tmp"), "wb") as out:
    out.write(r)
os.rename(os.path.join(d, "paused.tmp"), os.path.join(d, "paused"))
for _ in range(600):
    if os.path.exists(os.path.join(d, "resume")) and \
       not os.path.exists(os.path.join(d, "resumed")):
        s.sendall(b'{"execute": "resume"}\n')
        r = f.readline()
        with open(os.path.join(d, "resumed.tmp"), "wb") as out:
            out.write(r)
        os.rename(os.path.join(d, "resumed.tmp"),
                  os.path.join(d, "resumed"))
    if os.path.exists(os.path.join(d, "close")):
        break
    time.sleep(0.05)
s.close()
