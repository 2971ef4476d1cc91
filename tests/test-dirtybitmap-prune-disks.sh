#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap prune over a repository whose points do not all have the
# same disks: disk a in every point, b joining at c3 (its first image
# stands alone while c3 has a base), c leaving after c3.  --keep-daily
# 2 removes c3 (a folded into c4's image by a rebase; b's image alone,
# so c4's b takes it, as a chain's first; c's image has no successor
# and goes) and c1 (a and c folded into c2's images, which take c1's
# files).  Then each point kept restores each of its disks exactly,
# and the repository is sound.
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/repo-lib.sh"
source "$abs_top_srcdir/tests/prune-lib.sh"

start_disk a 8M
start_disk b 8M
start_disk c 8M
# disks N DISK...: write to the disks, back them up as point cN, and
# keep what each was.
disks ()
{
    local n=$1 d
    shift
    write_some $n "$@"
    rbackup c$n "$@"
    for d in "$@"; do snapshot $d c$n; done
}
disks 1 a c
disks 2 a c
disks 3 a b c
disks 4 a b
retime c1=2026-03-01T08:00:00Z c2=2026-03-01T20:00:00Z \
       c3=2026-03-02T08:00:00Z c4=2026-03-02T20:00:00Z
sound a b c
qemu-img info --output=json -f qcow2 R/disks/b/c3.qcow2 > b3.json
python3 -c 'import json; assert "backing-filename" not in json.load(open("b3.json"))'

dirtybitmap prune --keep-daily 2 --output=json "$repo" > p.json
cat p.json
python3 - <<'EOF2'
import json
j = json.load(open("p.json"))
assert [(p["name"], p["keep"]) for p in j["points"]] == \
    [("c1", False), ("c2", True), ("c3", False), ("c4", True)], j
assert j["removed"] == 2, j
EOF2
points_are "c2 c4"
sound a b c
dirtybitmap list --output=json "$repo" > list.json
python3 - <<'EOF2'
import json
pts = json.load(open("list.json"))["points"]
assert [[d["name"] for d in p["disks"]] for p in pts] == [["a", "c"], ["a", "b"]], pts
EOF2
test ! -e R/disks/c/c3.qcow2
rm -f out-*
dirtybitmap restore "$repo@c2" --disk a=out-a --disk c=out-c
cmp a.c2 out-a
cmp c.c2 out-c
rm -f out-*
dirtybitmap restore "$repo@c4" --disk a=out-a --disk b=out-b
cmp a.c4 out-a
cmp b.c4 out-b
