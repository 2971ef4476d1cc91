#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Backups of three disks under load, the incremental into qcow2
# overlays, restore to the disks at the cut.  Three disks of 64 MiB of
# random data, each served with --threads=16 through the filter, are
# written nonstop by one process (writes of 4K to 64K, some with FUA,
# write-zeroes, trims, flushes, several in flight on each disk) while
# dirtybitmap backup takes the three at once: a full backup to raw
# files, then an incremental into a qcow2 overlay of each (backing
# file the full one), served by qemu-nbd -t -e 16.  The disk at the
# cut is what the checksums of the backup describe: the digests of
# what it read from its view (which is the disk at the cut, as
# test-dirtybitmap-backup-machine.sh and test-dirtybitmap-backup-pit.sh
# show).  Each overlay, read through its qemu-nbd, must match them
# (dirtybitmap verify), and so must each chain restored with qemu-img
# convert (sums.py's own hash, as must the full backup for its own).
# The writers' log shows that the disks changed during each backup, and
# the restored images that blocks of data at the full backup read as
# zeroes at the incremental (where an overlay would show its backing
# file's data through).
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/sums-lib.sh"

moracle="$abs_top_srcdir/tests/machine-oracle.py"
size=$((64 * 1024 * 1024))
disks="a b c"

# The writer stops before the servers do (hooks run in order).
writer=
stop_writer ()
{
    touch "$PWD/stop"
    [ -z "$writer" ] || wait $writer || :
}
cleanup_fn stop_writer
for n in $disks; do
    head -c $size /dev/urandom > $n.img
    serve $n --threads=16
done

# The writer: on each disk 8 requests in flight, at random 4K blocks,
# of 1 to 16 blocks: writes of a non-zero byte (w), the same with FUA
# (f), write-zeroes (z), trims (t), and now and then a flush (F); until
# the file stop exists.  Each completed request is a line of w.log:
# "disk op start end" (CLOCK_MONOTONIC nanoseconds, before issuing and
# after the reply).  A request that fails ends it with status 1.
python3 - stop w.log $size $(uri a) $(uri b) $(uri c) <<'EOF' &
import nbd, os, random, select, sys, time
stop, log, size, uris = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
B, DEPTH = 4096, 8
out = open(log, "w")
rng = random.Random(os.getpid())
hs = []
for u in uris:
    h = nbd.NBD()
    h.set_debug(False)          # (make check sets LIBNBD_DEBUG=1)
    h.connect_uri(u)
    hs.append(h)
inflight = [0] * len(hs)
failed = []

def done(d, op, start, err):
    if err.value:
        failed.append("%s on disk %d: errno %d" % (op, d, err.value))
    out.write("%d %s %d %d\n" % (d, op, start, time.monotonic_ns()))
    inflight[d] -= 1
    return 1

def issue(d):
    h = hs[d]
    nb = rng.randint(1, 16)
    off = rng.randrange(0, size // B - nb) * B
    op = rng.choices("wfztF", weights=[40, 10, 20, 10, 1])[0]
    start = time.monotonic_ns()
    cb = lambda err, d=d, op=op, s=start: done(d, op, s, err)
    if op in "wf":
        h.aio_pwrite(bytes([rng.randrange(1, 256)]) * (nb * B), off, cb,
                     nbd.CMD_FLAG_FUA if op == "f" else 0)
    elif op == "z":
        h.aio_zero(nb * B, off, cb)
    elif op == "t":
        h.aio_trim(nb * B, off, cb)
    else:
        h.aio_flush(cb)
    inflight[d] += 1

while True:
    stopping = os.path.exists(stop) or failed
    if stopping and sum(inflight) == 0:
        break
    for d in range(len(hs)):
        while not stopping and inflight[d] < DEPTH:
            issue(d)
    p = select.poll()
    fds = {}
    for h in hs:
        dr = h.aio_get_direction()
        ev = (select.POLLIN if dr & nbd.AIO_DIRECTION_READ else 0) | \
             (select.POLLOUT if dr & nbd.AIO_DIRECTION_WRITE else 0)
        if ev:
            fds[h.aio_get_fd()] = h
            p.register(h.aio_get_fd(), ev)
    for fd, ev in p.poll(100):
        h = fds[fd]
        if ev & (select.POLLIN | select.POLLHUP | select.POLLERR):
            h.aio_notify_read()
        if ev & select.POLLOUT:
            h.aio_notify_write()
out.close()
if failed:
    sys.exit("writer: failed: " + ", ".join(failed))
for h in hs:
    h.flush()
    h.shutdown()
EOF
writer=$!
# Every disk written to (the writer running, not merely started)
# before the first backup.
all_written () { [ "$(cut -d' ' -f1 w.log | sort -u | tr -d '\n')" = 012 ]; }
wait_until 30 all_written

# disk_args TARGET-PATTERN: the three --disk options into args, X in
# the pattern replaced by the disk's name.
disk_args ()
{
    local n
    args=()
    for n in $disks; do
        args+=(--disk "control=$PWD/$n.ctl,source=$(uri $n),target=${1//X/$n},name=$n")
    done
}

# 1. The full backup, to raw files.
disk_args "$PWD/full-X.img"
python3 "$moracle" run t1 timeout --foreground -k 5 60 \
        dirtybitmap backup "${args[@]}" --checkpoint c1 > out1
cat out1

# 2. The incremental, into an overlay of each full backup.
for n in $disks; do
    qemu-img create -q -f qcow2 -b full-$n.img -F raw inc-$n.qcow2
    qemu-nbd -t -e 16 -f qcow2 -k "$PWD/inc-$n.sock" --fork \
             --pid-file="$PWD/inc-$n.pid" inc-$n.qcow2
    cleanup_fn kill_nbdkit "$(cat inc-$n.pid)"
done
disk_args "nbd+unix:///?socket=$PWD/inc-X.sock"
python3 "$moracle" run t2 timeout --foreground -k 5 60 \
        dirtybitmap backup "${args[@]}" --incremental c1 --checkpoint c2 > out2
cat out2
touch stop
wait $writer
writer=
for n in $disks; do
    dirtybitmap verify "nbd+unix:///?socket=$PWD/inc-$n.sock" $n.c2.sums
    kill_nbdkit "$(cat inc-$n.pid)"
done

# The disks changed during each backup: on every disk, a write, a
# write-zeroes and a trim started and completed within each run.
python3 - w.log t1 t2 <<'EOF'
import sys
ops = [l.split() for l in open(sys.argv[1])]
for t in sys.argv[2:]:
    _, start, end, _ = open(t).read().split()
    for d in "012":
        seen = {op for dd, op, s, e in ops
                if dd == d and int(start) < int(s) and int(e) < int(end)}
        print("%s: disk %s: %s" % (t, d, " ".join(sorted(seen))))
        assert {"w", "z", "t"} <= seen, (t, d, seen)
EOF

# Each chain restored is its disk at its cut.
for n in $disks; do
    restored inc-$n.qcow2 restored-$n.img
    python3 "$sums_py" check $n.c1.sums full-$n.img c1 "$(uri $n)" \
            $n.c2.sums restored-$n.img c2 "$(uri $n)"
done

# Something to test: in each disk at c2, blocks that were data at c1
# read as zeroes.
python3 - $disks <<'EOF'
import sys
B = 4096
for n in sys.argv[1:]:
    r = open("restored-%s.img" % n, "rb").read()
    f = open("full-%s.img" % n, "rb").read()
    z = sum(1 for i in range(0, len(r), B)
            if r[i:i + B] == bytes(B) and f[i:i + B] != bytes(B))
    print("disk %s: %d blocks became zeroes between c1 and c2" % (n, z))
    assert z > 100, (n, z)
EOF
