#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A request line longer than 64 KiB (65536 bytes before its newline)
# gets one error reply and is skipped up to its newline, however it
# arrives; the next request on the same connection works.  A line of
# exactly 65536 bytes is a request like any other.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

truncate -s 1M disk.img
ctl="$PWD/ctl.sock"
start_nbdkit -P "$PWD/pid" -U "$PWD/nbd.sock" --filter="$FILTER" \
             file disk.img bitmap=b0 action=add control="$ctl"

cat > long.py <<'EOF2'
import json, socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
f = s.makefile("rb")

def query_of(n):
    """A query of exactly n bytes: its id is padded."""
    head, tail = b'{"execute": "query", "id": "', b'"}'
    return head + b"x" * (n - len(head) - len(tail)) + tail

def reply():
    r = f.readline()
    assert r.endswith(b"\n"), r[:100]
    return json.loads(r)

def expect_too_long():
    r = reply()
    want = {"error": {"class": "GenericError",
                      "desc": "request longer than 65536 bytes"}}
    assert r == want, r
    print("refused, as it must be")

def expect_query(n):
    r = reply()
    assert set(r) == {"return", "id"} and len(r["id"]) == n - 30, \
        str(r)[:200]
    print("a query of %d bytes answered" % n)

# At the limit: served.
s.sendall(query_of(65536) + b"\n")
expect_query(65536)
# One byte over, at once: refused, then the next request is served.
s.sendall(query_of(65537) + b"\n" + b'{"execute": "query", "id": 1}\n')
expect_too_long()
assert reply()["id"] == 1
# 200 KiB, in pieces with pauses: one refusal only.
line = query_of(200 * 1024) + b"\n"
for i in range(0, len(line), 7000):
    s.sendall(line[i:i + 7000])
    time.sleep(0.005)
s.sendall(b'{"execute": "query", "id": 2}\n')
expect_too_long()
r = reply()
assert r["id"] == 2, str(r)[:200]
# Garbage without a newline, 70000 bytes, then its newline, then a
# request: one refusal, and the request.
s.sendall(b"\x00\xff" * 35000)
time.sleep(0.2)
s.sendall(b"\n" + b'{"execute": "query", "id": 3}\n')
expect_too_long()
assert reply()["id"] == 3
# Nothing else came.
s.settimeout(0.5)
try:
    extra = f.peek(1)
except OSError:                 # the timeout: nothing
    extra = b""
assert extra == b"", extra
EOF2
python3 long.py "$ctl"
