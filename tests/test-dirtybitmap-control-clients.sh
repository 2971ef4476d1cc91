#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Control clients that misbehave hold up nobody: with one that sends
# nothing, one that sent half a line, one that sent garbage without a
# newline, and one that sends requests but never reads the replies
# (it is dropped once its unread replies pile up), another client's
# commands are answered at once, and the disk serves reads and writes.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires timeout --version

truncate -s 1M disk.img
ctl="$PWD/ctl.sock"
sock="$PWD/nbd.sock"
start_nbdkit -P "$PWD/pid" -U "$sock" --filter="$FILTER" \
             file disk.img bitmap=b0 action=add granularity=4K \
             control="$ctl"

cat > bad-clients.py <<'EOF2'
import os, socket, sys, time
ctl = sys.argv[1]
def conn():
    s = socket.socket(socket.AF_UNIX)
    s.connect(ctl)
    return s
silent = conn()
half = conn()
half.sendall(b'{"execute": "transaction", "arguments": {"act')
garbage = conn()
garbage.sendall(os.urandom(60000).replace(b"\n", b"x"))
deaf = conn()
deaf.settimeout(20)
open("ready", "w").close()
# The deaf client: requests, never a read, until the server drops it.
try:
    while True:
        deaf.sendall(b'{"execute": "query"}\n' * 1000)
except OSError as e:
    print("deaf client dropped:", e)
    open("dropped", "w").close()
# The others stay until the test is done.
for _ in range(600):
    if os.path.exists("done"):
        break
    time.sleep(0.1)
EOF2
python3 bad-clients.py "$ctl" &
bad=$!
cleanup_fn touch "$PWD/done"
wait_until 10 [ -e ready ]

# Another client's commands, and the disk.
timeout 10 python3 "$abs_top_srcdir/tests/control.py" ok "$ctl" \
        '{"execute": "transaction", "arguments": {"actions": [{"action": "add", "bitmap": "b1", "granularity": 4096}]}}'
timeout 10 nbdsh -u "nbd+unix:///?socket=$sock" \
        -c 'h.pwrite(b"z" * 4096, 8192)' \
        -c 'assert h.pread(4096, 8192) == b"z" * 4096'
timeout 10 python3 "$abs_top_srcdir/tests/control.py" query "$ctl" > query
cat query
grep -F '{"consistent": true, "dirty-bytes": 4096, "granularity": 4096, "name": "b1", "recording": true, "selected": false}' query

# The deaf client was dropped, and nobody waited for it.
wait_until 10 [ -e dropped ]
timeout 10 python3 "$abs_top_srcdir/tests/control.py" query "$ctl" > query2
touch done
wait $bad
