#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# One bitmap file describes one disk: the export named by export=
# (default ""), which "" also reaches.  A connection for any other name
# is refused and changes nothing: no client can pin another name, or
# lock the real clients out, by connecting first.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

truncate -s 1M disk.img
sock="$PWD/sock"
export sock
# (The pid file appears once nbdkit listens: the first client below
# is the server's first connection.)
start_nbdkit_child -P "$PWD/pid" -U "$sock" --log=stderr --filter="$FILTER" \
                   file disk.img bitmap=b0 action=add export=vm1 \
                   2> nbdkit.err
refused='dirtybitmap: export "other" refused: the bitmaps in '"$PWD"'/disk.img.bitmaps track export "vm1" (export=)'

# A client asking for another name first: refused, and nothing pinned.
# Each refusal must be the filter's (a client that failed to connect
# at all would pass as refused): the message is logged before the
# client hears of it, once per refusal.
if nbdinfo --size "nbd+unix:///other?socket=$sock"; then
    echo "$0: export other was accepted"; exit 1
fi
test "$(grep -cF "$refused" nbdkit.err)" -eq 1
if nbdsh -u "nbd+unix:///other?socket=$sock" -c 'h.pwrite(b"3", 131072)'
then
    echo "$0: a write to export other was accepted"; exit 1
fi
test "$(grep -cF "$refused" nbdkit.err)" -eq 2
# A client refused "other" that stays connected (still negotiating)
# while the real clients connect and write.
nbdsh -c '
import os, subprocess
sock = os.environ["sock"]
h.set_opt_mode(True)
h.set_export_name("other")
h.connect_unix(sock)
try:
    h.opt_go()
    raise SystemExit("export other was accepted")
except nbd.Error as e:
    print("refused:", e)
assert h.aio_is_negotiating()
for name, data, off in (("vm1", "1", 0), ("", "2", 65536)):
    subprocess.run(["nbdsh", "-u", "nbd+unix:///%s?socket=%s" % (name, sock),
                    "-c", "h.pwrite(b\"%s\", %d)" % (data, off)], check=True)
assert h.aio_is_negotiating()
h.opt_abort()
'
cat nbdkit.err
test "$(grep -cF "$refused" nbdkit.err)" -eq 3

# The list names it; "" is it.
nbdinfo --list --json "nbd+unix:///?socket=$sock" > list.json
python3 -c '
import json, sys
d = json.load(open("list.json"))
names = [e["export-name"] for e in d["exports"]]
assert names == ["vm1"], names
'
nbdinfo --map "nbd+unix:///vm1?socket=$sock" > map
expect map <<'EOF2'
         0        4096    0  data
      4096       61440    2  zero
     65536        4096    0  data
     69632       61440    2  zero
    131072      917504    1  hole
EOF2

# Without export=, only the default export, whatever came first.
kill_nbdkit "$(cat pid)"
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 \
       --run 'if nbdinfo --size "nbd+unix:///x?socket=$unixsocket"; then
                  exit 1
              fi
              nbdinfo --size "$uri"' \
       > size
expect size <<'EOF2'
1048576
EOF2
