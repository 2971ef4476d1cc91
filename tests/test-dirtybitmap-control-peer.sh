#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Only the server's user (or root) may control it: a peer with another
# uid, even one that could reach the socket (here it is made
# world-writable on purpose), gets an error reply and the connection
# closes; what it sent is never run.  Run as root, as "nobody".  The
# socket and the peer's script are in a directory of their own under
# /tmp, which nobody can reach wherever the build tree is (a private
# home, a mktemp -d of mode 0700).
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires test "$(id -u)" = 0
requires setpriv --version
requires setpriv --reuid=nobody --regid=nogroup --clear-groups true

# (Created before the server, removed after it is stopped below.)
peer=$(mktemp -d /tmp/dirtybitmap-peer.XXXXXX)
cleanup_fn rm -rf "$peer"
chmod 755 "$peer"
if ! setpriv --reuid=nobody --regid=nogroup --clear-groups test -x "$peer"
then
    echo "$0: SKIP: nobody cannot reach $peer (is /tmp private?)"
    exit 77
fi

truncate -s 1M disk.img
ctl="$peer/ctl.sock"
control="$abs_top_srcdir/tests/control.py"
start_nbdkit_child -P "$PWD/pid" -U "$PWD/nbd.sock" --filter="$FILTER" \
                   file disk.img bitmap=b0 action=add control="$ctl" \
                   2> nbdkit.err
test "$(stat -c %a "$ctl")" = 600
chmod 666 "$ctl"
python3 "$control" query "$ctl" > before

cat > "$peer/peer.py" <<'EOF2'
import json, socket, sys
def refused(send):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(sys.argv[1])
    if send:
        try:
            s.sendall(send)
        except OSError:
            pass                # it may have closed already
    data = b""
    while True:
        try:
            d = s.recv(65536)
        except ConnectionResetError:
            break               # closed with what we sent unread
        if not d:
            break
        data += d
    lines = data.split(b"\n")
    assert len(lines) == 2 and lines[1] == b"", data
    r = json.loads(lines[0])
    assert r == {"error": {"class": "GenericError", "desc":
                           "permission denied: only this server's user or "
                           "root may control it"}}, r
    print("refused, then closed:", lines[0].decode())
refused(None)
refused(b'{"execute": "transaction", "arguments": {"actions": '
        b'[{"action": "add", "bitmap": "intruder"}]}}\n'
        b'{"execute": "pause"}\n')
EOF2
(cd "$peer" &&
     setpriv --reuid=nobody --regid=nogroup --clear-groups \
             python3 peer.py "$ctl")

# Nothing changed, nothing is paused, and the server said who it was.
python3 "$control" query "$ctl" > after
diff -u before after
grep -Fx "paused false" after
kill_nbdkit "$nbdkit_pid"
grep -F "dirtybitmap: control: a client with uid $(id -u nobody) refused" \
     nbdkit.err
