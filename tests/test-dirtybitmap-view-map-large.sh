#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The map of an incremental backup view of a large disk: 64 TiB, three
# writes (at its start, in its middle, at its end).  The map shows
# exactly those granules changed, and comes in seconds: a request
# searches the frozen bits up to 4G past its end, not to the end of the
# disk (a search to the end made the map of this disk cost the square
# of its size: about 100 s of the server's time here, for 16384
# requests).
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires timeout --version

ctl="$PWD/ctl.sock"
control="$abs_top_srcdir/tests/control.py"
T=$((64 << 40))
start_nbdkit -P "$PWD/pid" -U "$PWD/nbd.sock" --filter="$FILTER" \
             null 64T bitmap-file="$PWD/bm" bitmap=c0 action=add \
             control="$ctl"
uri="nbd+unix:///?socket=$PWD/nbd.sock"
nbdsh -u "$uri" -c 'h.pwrite(b"a" * 4096, 4096)' \
                -c "h.pwrite(b\"b\" * 4096, $((T / 2 + 65536)))" \
                -c "h.pwrite(b\"c\" * 4096, $((T - 4096)))"
python3 "$control" ok "$ctl" '{"execute": "backup-begin", "arguments": {"name": "v", "bitmap": "c0"}}'

# The changed granules (64K), and the rest as holes: 16384 requests.
timeout 60 nbdinfo --map "nbd+unix:///v?socket=$PWD/nbd.sock" > map
awk '$3 != 3 && $3 != 1 { print $1, $2, $3 }' map > changed
expect changed <<EOF
0 65536 0
$((T / 2 + 65536)) 65536 0
$((T - 65536)) 65536 0
EOF
awk '{ n += $2 } END { printf "%.0f\n", n }' map > total
echo $T | expect total
