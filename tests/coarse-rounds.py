#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# coarse-rounds.py: simulated power losses of a durability=coarse
# server, round after round (test-dirtybitmap-coarse-reboot*.sh).
#
#   coarse-rounds.py plain|txn|resize ROUNDS SEED
#
# Each round starts nbdkit (the filter in coarse mode over the file
# plugin, with nbdkit's truncate filter below it in "resize") as on a
# new boot of the machine (a boot id of its own, bind-mounted in a
# private mount namespace), checks what the start says and what the
# bitmaps hold, writes at random places (in "txn", a control
# transaction in between), and kills it with SIGKILL.
#
# A power loss may lose every bit set in the page cache since the last
# fdatasync of the bitmap file.  The worst case is simulated: the
# bitmap data is put back as it was at the last point where the test
# knows that everything was synced (after the start's commit, after a
# transaction's reply), keeping the shadows as the kill left them.
# The next start must then find every written granule dirty, and
# exactly the coarse granules written since each bitmap was cleared
# or added (what the shadows allow, never more), and say how many
# bytes that made dirty.
import json
import os
import random
import re
import shutil
import socket
import struct
import subprocess
import sys
import time

import nbd

mode, rounds, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
FILTER = os.environ["FILTER"]
DISK = "disk.img"
BITMAPS = "disk.img.bitmaps"
MIB = 1024 * 1024
CG = MIB                        # coarse-granularity=1M
FULL = 48 * MIB                 # the file's size
G = {"b0": 64 * 1024, "b1": 64 * 1024, "b2": 4096}

failures = 0


def fail(msg):
    global failures
    print("coarse-rounds: FAIL: " + msg, flush=True)
    failures += 1


def coarse_ranges(cset, size):
    """The dirty ranges that the coarse granules cset cover on a disk
    of size bytes, merged, as (offset, length)."""
    out = []
    for c in sorted(cset):
        start, end = c * CG, min((c + 1) * CG, size)
        if start >= end:
            continue
        if out and out[-1][0] + out[-1][1] == start:
            out[-1] = (out[-1][0], end - out[-1][0])
        else:
            out.append((start, end - start))
    return out


def fine_ranges(writes, g, size):
    """The dirty ranges that writes (offset, length) make in a bitmap
    of granularity g on a disk of size bytes, merged."""
    granules = set()
    for off, length in writes:
        granules.update(range(off // g, (off + length - 1) // g + 1))
    out = []
    for i in sorted(granules):
        start, end = i * g, min((i + 1) * g, size)
        if out and out[-1][0] + out[-1][1] == start:
            out[-1] = (out[-1][0], end - out[-1][0])
        else:
            out.append((start, end - start))
    return out


def tool(*args):
    """dirtybitmap on the boot of the last start."""
    return subprocess.run(
        ["unshare", "-m", "--", "sh", "-c",
         'mount --bind "$1" /proc/sys/kernel/random/boot_id && '
         'shift && exec "$@"', "sh", os.path.abspath("boot-id"),
         "dirtybitmap"] + list(args),
        check=True, capture_output=True, text=True).stdout


def dirty_ranges(name):
    """The dirty ranges of bitmap name, as dirtybitmap map shows them."""
    out = []
    for line in tool("map", "-U", BITMAPS, name).splitlines():
        off, length, typ = line.split()[:3]
        if typ == "0":
            out.append((int(off), int(length)))
    return out


def data_regions():
    """(offset, length) of each bitmap's data in the current header
    (the slot with the higher sequence number: no commit is cut here,
    so both slots are whole; FILE FORMAT in the filter's man page)."""
    with open(BITMAPS, "rb") as f:
        buf = f.read()
    seqs = [struct.unpack_from("<Q", buf, s * 4096 + 16)[0]
            if buf[s * 4096:s * 4096 + 8] == b"DIRTYBMP" else 0
            for s in (0, 1)]
    h = 4096 * (seqs[1] > seqs[0])
    off = struct.unpack_from("<Q", buf, h + 40)[0]
    out = []
    for _ in range(struct.unpack_from("<I", buf, h + 52)[0]):
        d_off, d_len = struct.unpack_from("<QQ", buf, off)
        out.append((d_off, d_len))
        n = struct.unpack_from("<H", buf, off + 24)[0]
        off += 32 + (n + 7) // 8 * 8
    return out


def power_loss(snapshot):
    """Put every bitmap's data back as it was in snapshot."""
    regions = data_regions()
    with open(snapshot, "rb") as f:
        old = f.read()
    with open(BITMAPS, "r+b") as f:
        for off, length in regions:
            f.seek(off)
            f.write(old[off:off + length])


boot = 0


def start(size, same_boot=False):
    """nbdkit on a new boot (or the same one as before): returns the
    process, its stderr file and a connected handle."""
    global boot
    if not same_boot:
        boot += 1
    with open("boot-id", "w") as f:
        f.write("0f0f0f0f-1111-4222-8333-%012d\n" % boot)
    sock = os.path.abspath("sock")
    for p in (sock, "control"):
        if os.path.exists(p):
            os.unlink(p)
    cmd = ["nbdkit", "-f", "-U", sock, "--filter=" + FILTER]
    if mode == "resize":
        cmd += ["--filter=truncate"]
    cmd += ["file", DISK, "durability=coarse", "coarse-granularity=1M"]
    if mode == "resize":
        cmd += ["truncate=%d" % size]
    if mode == "txn":
        cmd += ["control=" + os.path.abspath("control")]
    err = open("nbdkit.err", "w+")
    p = subprocess.Popen(
        ["unshare", "-m", "--", "sh", "-c",
         'mount --bind "$1" /proc/sys/kernel/random/boot_id && '
         'shift && exec "$@"', "sh", os.path.abspath("boot-id")] + cmd,
        stderr=err)
    for _ in range(500):
        if os.path.exists(sock) and (mode != "txn" or
                                     os.path.exists("control")):
            break
        if p.poll() is not None:
            err.seek(0)
            sys.exit("coarse-rounds: nbdkit failed: " + err.read())
        time.sleep(0.01)
    else:
        sys.exit("coarse-rounds: nbdkit did not start")
    # A client (the size is now known): the socket may exist a moment
    # before nbdkit listens on it.
    for _ in range(500):
        h = nbd.NBD()
        try:
            h.connect_unix(sock)
            break
        except nbd.Error:
            time.sleep(0.01)
    else:
        sys.exit("coarse-rounds: cannot connect to nbdkit")
    return p, err, h


def kill9(p):
    p.kill()
    if p.wait() != -9:
        fail("nbdkit had ended before the kill")


def control(actions):
    s = socket.socket(socket.AF_UNIX)
    s.connect("control")
    s.sendall((json.dumps({"execute": "transaction",
                           "arguments": {"actions": actions}}) +
               "\n").encode())
    reply = b""
    while not reply.endswith(b"\n"):
        chunk = s.recv(4096)
        if not chunk:
            break
        reply += chunk
    s.close()
    r = json.loads(reply)
    if "return" not in r:
        sys.exit("coarse-rounds: transaction %s: %s" % (actions, r))


# The model: for each bitmap, the coarse granules written since it was
# cleared or added, and the disk size.
model = {"b0": set(), "b1": set()}
size = FULL
with open("boot-id", "w") as f:
    f.write("0f0f0f0f-1111-4222-8333-%012d\n" % 0)
# The disk first: bitmaps trust only a disk that they have seen.
with open(DISK, "wb") as f:
    f.truncate(FULL)
tool("bitmap", "--add", "-g", "64K", "--size", str(FULL), BITMAPS, "b0")
tool("bitmap", "--add", "-g", "64K", BITMAPS, "b1")
expected_recovered = None
fine_written = []


def merge_ranges(ranges):
    out = []
    for start, length in sorted(ranges):
        end = start + length
        if out and out[-1][1] >= start:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(a, b - a) for a, b in out]


def check(err, round_no, cmodel, size, grown):
    """What the start said, and what the bitmaps hold now: the coarse
    granules of cmodel, and the ranges grown since (in granules)."""
    err.seek(0)
    said = err.read()
    got = dict(re.findall(r"bitmap (\w+): (\d+) bytes are dirty because "
                          r"of it", said))
    if expected_recovered is not None:
        for name, n in expected_recovered.items():
            if got.get(name) != str(n):
                fail("round %d: bitmap %s: the start said %s recovered "
                     "bytes, expected %d:\n%s" %
                     (round_no, name, got.get(name), n, said))
    elif got:
        fail("round %d: a start on the same boot recovered: %s" %
             (round_no, said))
    info = json.loads(tool("info", "-U", "--output=json", BITMAPS))
    for b in info["bitmaps"]:
        if not b["consistent"]:
            fail("round %d: bitmap %s is inconsistent" % (round_no, b["name"]))
    for name, cset in cmodel.items():
        if expected_recovered is None:
            # Only the process died: the bits are exact.
            if name != "b0":
                continue
            want = fine_ranges(fine_written, G["b0"], size)
        else:
            want = coarse_ranges(cset, size)
        g = G[name]
        want = merge_ranges(want + [((s // g) * g, size - (s // g) * g)
                                    for s, _ in grown])
        have = dirty_ranges(name)
        if have != want:
            fail("round %d: bitmap %s: dirty %s, expected %s" %
                 (round_no, name, have, want))


p, err, h = start(size)
for r in range(1, rounds + 1):
    new_size = size
    if mode == "resize" and r > 2:
        # Between 24M and 48M, at any 512 byte boundary.
        new_size = rng.randrange(24 * MIB, FULL + 1, 512)
    if r > 1:
        p, err, h = start(new_size, same_boot=(r == 2))
    grown = []
    prev = {k: set(v) for k, v in model.items()}
    if new_size > size:
        # The new area is dirty, from the granule holding the old end;
        # a power loss makes its coarse granules dirty.
        grown = [(size, new_size - size)]
        for m in model.values():
            m.update(range(size // CG, (new_size - 1) // CG + 1))
    elif new_size < size:
        for m in model.values():
            m.intersection_update(range((new_size - 1) // CG + 1))
    check(err, r, prev, new_size, grown)
    size = new_size
    shutil.copyfile(BITMAPS, "synced.bitmaps")
    written = set()
    for i in range(40):
        if mode == "txn" and i == 20:
            t = rng.choice(["clear", "merge", "add", "remove"])
            if t == "clear":
                control([{"action": "clear", "bitmap": "b1"}])
                model["b1"] = set()
            elif t == "merge":
                control([{"action": "merge", "bitmap": "b1",
                          "source": "b0"}])
                model["b1"] |= model["b0"]
            elif t == "add" and "b2" not in model:
                control([{"action": "add", "bitmap": "b2",
                          "granularity": G["b2"]}])
                model["b2"] = set()
            elif "b2" in model:
                control([{"action": "remove", "bitmap": "b2"}])
                del model["b2"]
            shutil.copyfile(BITMAPS, "synced.bitmaps")
        length = rng.choice([1, 512, 4096, 65536, 300000])
        off = rng.randrange(0, size - length + 1)
        h.pwrite(b"w" * length, off)
        if r == 1:
            fine_written.append((off, length))
        first, last = off // CG, (off + length - 1) // CG
        written.update(range(first, last + 1))
        for m in model.values():
            m.update(range(first, last + 1))
    h.shutdown()
    kill9(p)
    if r == 1:
        # The next start is on the same boot: a crash of the process,
        # every bit is in the page cache and exact, nothing recovered.
        expected_recovered = None
        continue
    power_loss("synced.bitmaps")
    # What the shadows add to the bits as they were synced.
    synced = {b["name"]: b["dirty-bytes"] for b in json.loads(
        tool("info", "--output=json", "synced.bitmaps"))["bitmaps"]}
    expected_recovered = {}
    for name, cset in model.items():
        expected_recovered[name] = \
            sum(l for _, l in coarse_ranges(cset, size)) - synced[name]
    print("round %d: %d coarse granules written, recovered %s" %
          (r, len(written), expected_recovered), flush=True)

# The last start recovers, and a clean stop keeps it.
p, err, h = start(size)
check(err, rounds + 1, model, size, [])
h.shutdown()
p.terminate()
p.wait()
info = tool("info", BITMAPS)
if "state: closed cleanly" not in info:
    fail("not closed cleanly:\n" + info)
if failures:
    sys.exit("coarse-rounds: %d failures" % failures)
print("coarse-rounds: %d rounds, every write found, no more than the "
      "coarse granules written" % rounds)
