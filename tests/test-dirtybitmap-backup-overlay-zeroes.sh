#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# An incremental backup into a qcow2 overlay is the disk at its point
# in time, also where what changed now reads as zeroes.  A disk of 64
# MiB of random data gets random writes (4K to 64K), write-zeroes and
# trims, so that most changed granules mix new data and new zeroes; a
# full backup to a raw file, the same again, then an incremental into
# a qcow2 overlay of the full one, served by qemu-nbd with several
# connections (-t -e 16).  No writer runs during the backups.  The
# overlay, read with its backing file through that qemu-nbd, must match
# the checksums of the point (dirtybitmap verify; the disk itself, read
# through its server, matches them), and equal the disk byte for byte
# once converted to raw.  (A zero operation
# beside a write in the same qcow2 cluster, both in flight, let the
# backing file's data show through where the disk reads zeroes.)
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/sums-lib.sh"

head -c $((64 * 1024 * 1024)) /dev/urandom > vda.img
serve vda --threads=16
uri=$(uri vda)

# work SEED: 3000 requests of 1 to 16 blocks of 4K, at random: writes
# of a non-zero byte, write-zeroes, trims (3 to 1 to 1).
work ()
{
    python3 - "$uri" "$1" <<'EOF'
import nbd, random, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
r = random.Random(int(sys.argv[2]))
B = 4096
for _ in range(3000):
    nb = r.randint(1, 16)
    off = r.randrange(0, 16384 - nb) * B
    op = r.choice("wwwzt")
    if op == "w":
        h.pwrite(bytes([r.randrange(1, 256)]) * (nb * B), off)
    elif op == "z":
        h.zero(nb * B, off)
    else:
        h.trim(nb * B, off)
h.flush()
h.shutdown()
EOF
}

work 1
backup vda c1.json "$PWD/full.img" --checkpoint c1
work 2

qemu-img create -q -f qcow2 -b full.img -F raw inc.qcow2
qemu-nbd -t -e 16 -f qcow2 -k "$PWD/inc.sock" --fork \
         --pid-file="$PWD/inc.pid" inc.qcow2
cleanup_fn kill_nbdkit "$(cat inc.pid)"
inc="nbd+unix:///?socket=$PWD/inc.sock"
backup vda c2.json "$inc" --incremental c1 --checkpoint c2
report c2.json result=complete mode=incremental

# Something to test: the disk has zero blocks that were data at c1.
python3 - <<'EOF'
B = 4096
d = open("vda.img", "rb").read()
f = open("full.img", "rb").read()
n = sum(1 for i in range(0, len(d), B)
        if d[i:i + B] == bytes(B) and f[i:i + B] != bytes(B))
print("blocks that became zeroes since c1: %d" % n)
assert n > 1000, n
EOF

dirtybitmap verify "$uri" vda.c2.sums
dirtybitmap verify "$inc" vda.c2.sums
kill_nbdkit "$(cat inc.pid)"
restored inc.qcow2 restored.img
cmp vda.img restored.img
