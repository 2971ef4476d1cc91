#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A trim of a backup view gives the scratch store's space back without
# holding anyone: while its punch is held (pause point), a write that
# must first keep another granule completes, and a read of the view
# gets that granule's old data.  Then, on a second view, the space of
# trimmed granules is gone from the store (one punch over kept and
# unkept granules), the trimmed range reads as released, the rest as
# it was at the cut.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires python3 -c 'import nbd'

head -c 1M /dev/urandom > disk.img
mkfifo scratch-release.reached scratch-release.release
export DIRTYBITMAP_TEST_PAUSE=scratch-release
export DIRTYBITMAP_TEST_PAUSE_DIR="$PWD"
start_nbdkit -P "$PWD/pid" -U "$PWD/nbd.sock" --filter="$FILTER" \
             file disk.img control="$PWD/ctl.sock"
unset DIRTYBITMAP_TEST_PAUSE DIRTYBITMAP_TEST_PAUSE_DIR

cat > steps.py <<'EOF2'
import nbd, select, sys
sys.path.insert(0, sys.argv[1])
from controllib import Control, fail
from pause import Points, Background

K = 1 << 10
G = 64 * K
points = Points(".", ["scratch-release"])
disk = nbd.NBD()
disk.connect_uri("nbd+unix:///?socket=nbd.sock")
c = Control("ctl.sock")

def ends(job, what):
    """job ends while the punch is held (else the test fails, naming
    what waited)."""
    if not select.select([job.rfd], [], [], 60)[0]:
        fail("%s waited for the punch" % what)
    return job.join()

def scratch():
    return c.ok("query")["backup"]["scratch-bytes"]

def view(name):
    c.ok("backup-begin", {"name": name})
    h = nbd.NBD()
    h.connect_uri("nbd+unix:///%s?socket=nbd.sock" % name)
    return h

# 1. The punch held.
cut = disk.pread(1024 * K, 0)
v = view("v")
reader = nbd.NBD()
reader.connect_uri("nbd+unix:///v?socket=nbd.sock")
disk.pwrite(b"a" * 4 * K, 0)            # granule 0 kept
trim = Background(lambda: v.trim(G, 0))
if points.wait(["scratch-release", trim]) != ["scratch-release"]:
    fail("the trim did not reach its punch")
ends(Background(lambda: disk.pwrite(b"c" * 4 * K, 5 * G)),
     "a write that keeps another granule")
if ends(Background(lambda: reader.pread(G, 5 * G)),
        "a read of the view") != cut[5 * G:6 * G]:
    fail("the view's granule 5 is not the disk at the cut")
points.release("scratch-release")
trim.join()
c.ok("backup-end", {"name": "v"})

# 2. What a trim gives back, and what it leaves.
cut = disk.pread(1024 * K, 0)
v = view("w")
for i in (0, 1, 3, 5):
    disk.pwrite(b"d" * 4 * K, i * G)
if scratch() != 4 * G:
    fail("four granules kept, scratch %d" % scratch())
v.trim(4 * G, 0)
if scratch() != G:
    fail("after the trim of granules 0 to 3, scratch %d (granule 5: %d)"
         % (scratch(), G))
try:
    v.pread(4 * K, 3 * G)
    fail("a trimmed granule was read")
except nbd.Error:
    pass
if v.pread(1024 * K - 4 * G, 4 * G) != cut[4 * G:]:
    fail("the view past the trim is not the disk at the cut")
EOF2
python3 steps.py "$abs_top_srcdir/tests"
