#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# select names the bitmap that answers block status for connections
# made after it (null: the plugin below answers); a connection keeps
# the bitmap it started with, which cannot be cleared or removed once
# it has read its block status.  query shows the selection, and has the fields the
# contract promises.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

size=$((1024 * 1024))
truncate -s $size disk.img
ctl="$PWD/ctl.sock"
sock="$PWD/nbd.sock"
uri="nbd+unix:///?socket=$sock"
control="$abs_top_srcdir/tests/control.py"
start_nbdkit -P "$PWD/pid" -U "$sock" --filter="$FILTER" \
             file disk.img bitmap=b0 action=add granularity=4K \
             control="$ctl"

# b0 sees two writes, b1 (added between them) the second only.
nbdsh -u "$uri" -c 'h.pwrite(b"a" * 4096, 0)'
python3 "$control" ok "$ctl" '{"execute": "transaction", "arguments": {"actions": [{"action": "add", "bitmap": "b1", "granularity": 4096}]}}'
nbdsh -u "$uri" -c 'h.pwrite(b"b" * 4096, 65536)'

# query: the promised fields, b0 selected.
python3 "$control" send "$ctl" '{"execute": "query"}' > query.json
python3 - query.json <<'EOF2'
import json, sys
q = json.load(open(sys.argv[1]))["return"]
assert q["size"] == 1048576 and q["durability"] == "coarse", q
assert q["backup"] is None, q
assert [set(b) for b in q["bitmaps"]] == \
    [{"name", "granularity", "recording", "consistent", "dirty-bytes",
      "selected"}] * 2, q
assert [(b["name"], b["selected"], b["dirty-bytes"]) for b in q["bitmaps"]] \
    == [("b0", True, 8192), ("b1", False, 4096)], q
EOF2

nbdinfo --map "$uri" > map0
python3 "$control" ok "$ctl" '{"execute": "select", "arguments": {"bitmap": "b1"}}'
nbdinfo --map "$uri" > map1
python3 "$control" ok "$ctl" '{"execute": "select", "arguments": {"bitmap": null}}'
nbdinfo --map "$uri" > mapnone
expect map0 <<'EOF2'
         0        4096    0  data
      4096       61440    1  hole
     65536        4096    0  data
     69632      978944    1  hole
EOF2
expect map1 <<'EOF2'
         0       65536    1  hole
     65536        4096    0  data
     69632      978944    1  hole
EOF2
# The file plugin's own extents, whatever they are, not b0's.
if diff -q map0 mapnone; then
    echo "$0: select null still answers from b0"
    exit 1
fi

# A connection keeps its bitmap; the bitmap it reads cannot go.
python3 "$control" ok "$ctl" '{"execute": "select", "arguments": {"bitmap": "b1"}}'
cat > held.py <<'EOF2'
import subprocess, sys, nbd
uri, ctl, control = sys.argv[1:]
h = nbd.NBD()
h.add_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
h.connect_uri(uri)
def call(*args):
    subprocess.run(["python3", control] + list(args), check=True)
def status():
    h.block_status(1048576, 0, lambda m, o, es, err: print(m, es))
# Its block status comes from b1, which it holds from then on.
status()
call("error", ctl, '{"execute": "transaction", "arguments": {"actions": '
     '[{"action": "remove", "bitmap": "b1"}]}}', "GenericError",
     "action remove on bitmap b1 failed: bitmap b1 is in use: "
     "1 connection reads its block status")
call("ok", ctl, '{"execute": "select", "arguments": {"bitmap": "b0"}}')
status()
h.shutdown()
EOF2
python3 held.py "$uri" "$ctl" "$control" > held.out
cat held.out
# Both times from b1: a hole first, 65536 bytes.
test "$(grep -c -F "base:allocation [65536, 1, 4096, 0, 978944, 1]" held.out)" = 2
# Once it has gone, b1 can go.
python3 "$control" ok "$ctl" '{"execute": "select", "arguments": {"bitmap": null}}'
python3 "$control" ok "$ctl" '{"execute": "transaction", "arguments": {"actions": [{"action": "remove", "bitmap": "b1"}]}}'
