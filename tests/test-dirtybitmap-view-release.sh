#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A trim of a backup view gives the scratch store's space back without
# holding anyone: while its punch is held (pause point), a write that
# must first keep another granule completes, and a read of the view
# gets that granule's old data.  Then the space of the trimmed
# granules is gone from the store, the trimmed range reads as
# released, the rest as it was at the cut.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires python3 -c 'import nbd'

head -c 1M /dev/urandom > disk.img
cp disk.img cut.img
mkfifo scratch-release.reached scratch-release.release
export DIRTYBITMAP_TEST_PAUSE=scratch-release DIRTYBITMAP_TEST_PAUSE_DIR="$PWD"
start_nbdkit -P "$PWD/pid" -U "$PWD/nbd.sock" --filter="$FILTER" \
             file disk.img control="$PWD/ctl.sock"
unset DIRTYBITMAP_TEST_PAUSE DIRTYBITMAP_TEST_PAUSE_DIR

cat > steps.py <<'EOF2'
import nbd, select, sys
sys.path.insert(0, sys.argv[1])
from controllib import Control, fail
from pause import Points, Background

K = 1 << 10
points = Points(".", ["scratch-release"])
cut = open("cut.img", "rb").read()
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

c.ok("backup-begin", {"name": "v"})
view = nbd.NBD()
view.connect_uri("nbd+unix:///v?socket=nbd.sock")
reader = nbd.NBD()
reader.connect_uri("nbd+unix:///v?socket=nbd.sock")
disk.pwrite(b"a" * 4 * K, 0)            # granules 0 and 1 kept
disk.pwrite(b"b" * 4 * K, 64 * K)
if scratch() != 128 * K:
    fail("two granules kept, scratch %d" % scratch())

trim = Background(lambda: view.trim(128 * K, 0))
if points.wait(["scratch-release", trim]) != ["scratch-release"]:
    fail("the trim did not reach its punch")
# Held in the punch: a write that keeps granule 5 first, and a read of
# the view there, complete.
ends(Background(lambda: disk.pwrite(b"c" * 4 * K, 5 * 64 * K)),
     "a write that keeps another granule")
if ends(Background(lambda: reader.pread(64 * K, 5 * 64 * K)),
        "a read of the view") != cut[5 * 64 * K:6 * 64 * K]:
    fail("the view's granule 5 is not the disk at the cut")
points.release("scratch-release")
trim.join()

if scratch() != 64 * K:
    fail("after the trim of granules 0 and 1, scratch %d (granule 5: %d)"
         % (scratch(), 64 * K))
try:
    reader.pread(4 * K, 0)
    fail("a trimmed granule was read")
except nbd.Error:
    pass
if reader.pread(1024 * K - 128 * K, 128 * K) != cut[128 * K:]:
    fail("the view past the trim is not the disk at the cut")
EOF2
python3 steps.py "$abs_top_srcdir/tests"
