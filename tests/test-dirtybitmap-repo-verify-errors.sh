#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# verify DIR[@POINT] refuses bad inputs clearly (exit 1, nothing on
# stdout, a message naming the thing and the problem): the two forms
# of verify mixed up, an operand that is not a repository, an unknown
# point, a repository in use, a damaged "verified" in a record.  A
# point whose image is missing, or whose checksums are damaged, is
# bad as a whole: said, and recorded (list: BAD, the whole disk).
source ./functions.sh
set -e
set -x
requires flock --version
source "$abs_top_srcdir/tests/repo-lib.sh"

start_disk a 8M
write_some 1 a
rbackup c1 a
write_some 2 a
rbackup c2 a

# --- The forms mixed up ----------------------------------------------
tool_fails "dirtybitmap: -f qcow2: a repository's images are qcow2: -f goes with IMAGE_OR_URI SUMS only" \
    verify -f qcow2 "$repo"
tool_fails "dirtybitmap: --resume: it resumes a verify of every point of a repository (verify --resume DIR)" \
    verify --resume a.img R/sums/a.c1.sums
tool_fails "dirtybitmap: --resume: it resumes a verify of every point (DIR, without @POINT)" \
    verify --resume "$repo@c1"
tool_fails "dirtybitmap: expecting DIR[@POINT] (a repository), or IMAGE_OR_URI and SUMS" \
    verify
tool_fails "verify: DIR[@POINT] must be a repository (to verify an image against its checksums, give both: IMAGE SUMS): a.img: not a directory (a repository is one)" \
    verify a.img
tool_fails "verify: DIR[@POINT] must be a repository (to verify an image against its checksums, give both: IMAGE SUMS): nowhere: No such file or directory" \
    verify nowhere
mkdir plain
tool_fails "verify: DIR[@POINT] must be a repository (to verify an image against its checksums, give both: IMAGE SUMS): plain is not a dirtybitmap repository (it has no repository.json: backup --repo makes one)" \
    verify plain

# --- Unknown point, in use -------------------------------------------
tool_fails "verify: $repo has no point c9 (its points: c1, c2)" verify "$repo@c9"
fails -k R/points/c2.json "verify: $repo is in use by another dirtybitmap (a prune): try again once it has ended" \
    flock -x R/lock dirtybitmap verify "$repo"

# --- A damaged "verified" ----------------------------------------------
cp R/points/c1.json c1.json.good
python3 - <<'EOF2'
import json
r = json.load(open("R/points/c1.json"))
r["verified"] = {"time": "yesterday", "ok": True}
json.dump(r, open("R/points/c1.json", "w"))
EOF2
tool_fails "list: $repo/points/c1.json: damaged: \"verified\" is not null or {\"time\", \"ok\"}" \
    list "$repo"
python3 - <<'EOF2'
import json
r = json.load(open("R/points/c1.json"))
r["verified"] = {"time": "2026-12-06T05:00:00.123456Z", "ok": False,
                 "differing": [{"disk": "b", "offset": 0, "length": 1,
                                "in": None}]}
json.dump(r, open("R/points/c1.json", "w"))
EOF2
tool_fails "verify: $repo/points/c1.json: damaged: verified.differing[0] is not {\"disk\", \"offset\", \"length\", \"in\"} of a range of one of its disks" \
    verify "$repo@c1"
cp c1.json.good R/points/c1.json

# --- A missing image: the point is bad whole -------------------------
mv R/disks/a/c2.qcow2 c2.qcow2.good
tool_fails "verify: point c2, disk a: $repo/disks/a/c2.qcow2: No such file or directory" \
    verify "$repo@c2"
grep -E "^dirtybitmap: verify: point c2: BAD, recorded at 20" fails.err
dirtybitmap list --output=json "$repo" > l.json
python3 - <<'EOF2'
import json
p1, p2 = json.load(open("l.json"))["points"]
assert p1["verified"] is None, p1
assert p2["verified"]["ok"] is False, p2
assert p2["verified"]["differing"] == [
    {"disk": "a", "offset": 0, "length": 8 * 1024 * 1024, "in": "c2"}], p2
EOF2
if grep -F "copies what is bad in it again" fails.err; then
    echo "$0: healing promised for an image that cannot be read"
    exit 1
fi
mv c2.qcow2.good R/disks/a/c2.qcow2

# --- Damaged checksums: the same -------------------------------------
cp R/sums/a.c1.sums sums.good
printf '\x55' | dd of=R/sums/a.c1.sums bs=1 seek=5000 conv=notrunc status=none
tool_fails "verify: point c1, disk a: $repo/sums/a.c1.sums" verify "$repo@c1"
dirtybitmap list "$repo" > l.txt
cat l.txt
grep -E '^c1 .* BAD 20' l.txt
cp sums.good R/sums/a.c1.sums
dirtybitmap verify "$repo"
dirtybitmap list "$repo" > l.txt
cat l.txt
test "$(grep -cE ' ok 20[0-9-]{8}T[0-9:.]{15}Z$' l.txt)" = 2
