#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Several connections at once (multi-conn), each with many requests in
# flight, share one set of bitmaps: every granule written by any of
# them is dirty, and nothing else is.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

size=$((64 * 1024 * 1024))
truncate -s $size disk.img
sock="$PWD/sock"
start_nbdkit -P "$PWD/pid" -U "$sock" --filter="$FILTER" \
             file disk.img bitmap=b0 action=add granularity=4K
nbdinfo "nbd+unix:///?socket=$sock" > info
grep -F "can_multi_conn: true" info

# Each client: 400 requests of random kind, offset and length, up to
# 64 in flight; it writes the (offset, count) it sent to reqs.N.
cat > client.py <<'EOF2'
import random, sys, nbd
n = int(sys.argv[1])
random.seed(n)
h = nbd.NBD()
h.connect_uri(sys.argv[2])
size = h.get_size()
buf = nbd.Buffer.from_bytearray(bytearray(b"p" * 70000))
with open("reqs.%d" % n, "w") as log:
    for i in range(400):
        while h.aio_in_flight() >= 64:
            h.poll(-1)
        count = random.randrange(1, 70000)
        off = random.randrange(size - count)
        k = random.randrange(3)
        if k == 0:
            h.aio_pwrite(nbd.Buffer.from_bytearray(bytearray(b"p" * count)), off)
        elif k == 1:
            h.aio_zero(count, off)
        else:
            h.aio_trim(count, off)
        print(off, count, file=log)
    while h.aio_in_flight() > 0:
        h.poll(-1)
h.shutdown()
EOF2
pids=
for n in 1 2 3 4; do
    python3 client.py $n "nbd+unix:///?socket=$sock" & pids="$pids $!"
done
for p in $pids; do wait $p; done

oracle="$abs_top_srcdir/tests/dirty-ranges.py"
cat reqs.* | "$oracle" expect $size 4096 > want
nbdinfo --map "nbd+unix:///?socket=$sock" > map
"$oracle" map < map > got
diff -u want got
test "$(wc -l < want)" -gt 100
