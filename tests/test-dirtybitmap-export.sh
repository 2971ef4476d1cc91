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
nbdkit -U "$sock" --log=stderr -f --filter="$FILTER" \
       file disk.img bitmap=b0 action=add export=vm1 2> nbdkit.err &
echo $! > pid
cleanup_fn kill_nbdkit $!
for (( i = 0; i < 100; ++i )); do test -S "$sock" && break; sleep 0.1; done

# A client asking for another name first: refused, and nothing pinned.
if nbdinfo --size "nbd+unix:///other?socket=$sock"; then
    echo "$0: export other was accepted"; exit 1
fi
if nbdsh -u "nbd+unix:///other?socket=$sock" -c 'h.pwrite(b"3", 131072)'
then
    echo "$0: a write to export other was accepted"; exit 1
fi
nbdsh -u "nbd+unix:///vm1?socket=$sock" -c 'h.pwrite(b"1", 0)'
nbdsh -u "nbd+unix:///?socket=$sock" -c 'h.pwrite(b"2", 65536)'
sleep 0.5
cat nbdkit.err
grep -F 'dirtybitmap: export "other" refused: the bitmaps in '"$PWD"'/disk.img.bitmaps track export "vm1" (export=)' nbdkit.err

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
