#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# kill -9 of nbdkit in the middle of a write workload, many times, at
# random moments: every granule that differs from a copy taken before
# is dirty, nothing that was never sent is, and nothing is marked
# inconsistent.  ROUNDS=N sets the number of rounds (make soak).
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

rounds=${ROUNDS:-20}
g=4096
size=$((8 * 1024 * 1024))
oracle="$abs_top_srcdir/tests/dirty-ranges.py"

yes | head -c $size > disk.img
cp disk.img orig.img
# b0 is cleared at the start of every round; b1 records all rounds.
dirtybitmap bitmap --add -g $g --size $size disk.img.bitmaps b0
dirtybitmap bitmap --add -g 65536 disk.img.bitmaps b1
: > sent-all

# The client: random pwrite (some FUA), zero and trim requests, up to
# 16 in flight, about one per millisecond, and an occasional flush,
# until the server dies.  Each request is logged ("OFFSET COUNT")
# before it is sent; started.SEED says that the first one is done.
cat > client.py <<'EOF2'
import random, sys, time, nbd
seed, uri = int(sys.argv[1]), sys.argv[2]
random.seed(seed)
h = nbd.NBD()
h.connect_uri(uri)
size = h.get_size()
log = open("sent", "a", buffering=1)
try:
    off = random.randrange(size - 4096)
    print(off, 4096, file=log)
    h.pwrite(random.randbytes(4096), off)
    open("started.%d" % seed, "w").close()
    while True:
        while h.aio_in_flight() >= 16:
            h.poll(-1)
        count = random.choice([1, 512, 4096, 4097, 20000, 65536])
        off = random.randrange(size - count)
        print(off, count, file=log)
        k = random.randrange(10)
        if k < 6:
            buf = nbd.Buffer.from_bytearray(bytearray(random.randbytes(count)))
            h.aio_pwrite(buf, off,
                         flags=nbd.CMD_FLAG_FUA if k == 0 else 0)
        elif k < 8:
            h.aio_zero(count, off)
        elif k < 9:
            h.aio_trim(count, off)
        else:
            h.aio_flush()
        h.poll(0)
        time.sleep(0.001)
except nbd.Error:
    pass                                # the server was killed
EOF2

# check.py BEFORE AFTER G DIRTY SENT: every granule that differs
# between the images is in a DIRTY range, and every DIRTY range lies
# in a SENT range (ranges: "START END" lines).
cat > check.py <<'EOF2'
import sys
before, after, g = sys.argv[1], sys.argv[2], int(sys.argv[3])
a, b = open(before, "rb").read(), open(after, "rb").read()
assert len(a) == len(b)
n = (len(a) + g - 1) // g
def granules(f):
    m = bytearray(n)
    for l in open(f):
        s, e = map(int, l.split())
        m[s // g:(e + g - 1) // g] = b"\1" * ((e + g - 1) // g - s // g)
    return m
dirty, sent = granules(sys.argv[4]), granules(sys.argv[5])
changed = missing = 0
for i in range(n):
    if dirty[i] and not sent[i]:
        sys.exit("granule at %d is dirty but was never written" % (i * g))
    if a[i*g:(i+1)*g] != b[i*g:(i+1)*g]:
        changed += 1
        if not dirty[i]:
            missing += 1
            print("granule at", i * g, "changed but is not dirty")
print("changed", changed, "dirty", sum(dirty), "missing", missing)
sys.exit(1 if missing or not changed else 0)
EOF2

both_started () { [ -f started.$1 ] && [ -f started.$(($1 + 1000)) ]; }

for (( i = 1; i <= rounds; ++i )); do
    cp disk.img before.img
    : > sent
    sock="$PWD/sock$i"
    start_nbdkit_child -P "$PWD/pid$i" -U "$sock" --filter="$FILTER" \
                       file disk.img bitmap=b0 action=clear
    python3 client.py $i "nbd+unix:///?socket=$sock" & c1=$!
    python3 client.py $((i + 1000)) "nbd+unix:///?socket=$sock" & c2=$!
    # A random moment, 0 to 200 ms after both clients have written.
    wait_until -i 0.01 10 both_started $i || :
    sleep "$(printf 0.%03d $(( RANDOM % 200 )))"
    kill9 $nbdkit_pid
    # (One wait each: "wait A B" returns the status of B alone.)
    wait $c1
    wait $c2
    cat sent >> sent-all

    dirtybitmap info disk.img.bitmaps > info
    grep -F "state: not closed cleanly" info
    grep -F "same boot" info
    test "$(grep -c 'consistent: true' info)" -eq 2
    dirtybitmap map disk.img.bitmaps b0 > map
    python3 "$oracle" map < map > dirty
    python3 "$oracle" expect $size $g < sent > sent-ranges
    python3 check.py before.img disk.img $g dirty sent-ranges
done

# b1 covers every round.
dirtybitmap map disk.img.bitmaps b1 > map
python3 "$oracle" map < map > dirty
python3 "$oracle" expect $size 65536 < sent-all > sent-ranges
python3 check.py orig.img disk.img 65536 dirty sent-ranges
