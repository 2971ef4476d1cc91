#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# An incremental view prepared (backup-prepare) while writes go on:
# the preparation copies B's bits then, and the cut copies again only
# the pages of them changed since.  The view's map is B at the cut:
# a write before the prepare, two while its copy is held just after
# it copied every page (one to a page that had bits already, one to a
# clean page), one between the prepare and the cut; not one after the
# cut.  B's bits span four pages (8G at 64K).
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires python3 -c 'import nbd'

mkfifo base-copied.reached base-copied.release
export DIRTYBITMAP_TEST_PAUSE=base-copied DIRTYBITMAP_TEST_PAUSE_DIR="$PWD"
start_nbdkit -P "$PWD/pid" -U "$PWD/nbd.sock" --filter="$FILTER" \
             null 8G bitmap-file="$PWD/bm" bitmap=b0 action=add \
             control="$PWD/ctl.sock"
unset DIRTYBITMAP_TEST_PAUSE DIRTYBITMAP_TEST_PAUSE_DIR

cat > steps.py <<'EOF'
import nbd, sys
sys.path.insert(0, sys.argv[1])
from controllib import Control, fail
from pause import Points, Background

K, G = 1 << 10, 1 << 30
points = Points(".", ["base-copied"])
h = nbd.NBD()
h.connect_unix(sys.argv[2])
c = Control(sys.argv[3])

h.pwrite(b"a" * 4096, 0)
view = {"name": "view", "bitmap": "b0", "checkpoint": "b1"}
job = Background(lambda: c.ok("backup-prepare", view))
if points.wait(["base-copied", job]) != ["base-copied"]:
    fail("the prepare did not reach its copy of b0")
h.pwrite(b"b" * 4096, 3 * 2 * G + 64 * K)
h.pwrite(b"c" * 4096, 128 * K)
points.release("base-copied")
job.join()
h.pwrite(b"d" * 4096, 2 * G + 192 * K)
c.ok("pause", {"sync": False})
c.ok("backup-begin", view)
c.ok("resume")
h.pwrite(b"e" * 4096, 2 * 2 * G)
h.shutdown()
EOF
python3 steps.py "$abs_top_srcdir/tests" "$PWD/nbd.sock" "$PWD/ctl.sock"

nbdinfo --map "nbd+unix:///view?socket=$PWD/nbd.sock" |
    awk '$3 != 3 && $3 != 1 { print $1, $2, $3 }' > changed
G=$((1 << 30))
expect changed <<EOF
0 65536 0
131072 65536 0
$((2 * G + 196608)) 65536 0
$((6 * G + 65536)) 65536 0
EOF
