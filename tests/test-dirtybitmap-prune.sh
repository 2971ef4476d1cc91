#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap prune removes the points its keep options do not keep,
# and every point kept restores exactly what it did: two disks, six
# points over three days (two a day); --keep-daily 3 keeps the newest
# of each day, removing the first point (its images folded into the
# next, which becomes the first of its chain) and two in the middle
# (folded into the next, which then builds on the one before).  Then
# a backup builds on the newest point, and --keep-last 1 folds the
# whole chain into it.  After each: list (names, bases, stored-bytes),
# each image's chain and qemu-img check, no file left of a removed
# point, each kept point restored equal to the disks as they were;
# and what the prune said (the table, the JSON, what it freed).
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/repo-lib.sh"
source "$abs_top_srcdir/tests/prune-lib.sh"

start_disk a 8M
start_disk b 8M
for n in 1 2 3 4 5 6; do
    write_some $n a b
    zero_write "$(uri a)" $((n * 65536)) 65536
    rbackup c$n a b
    snapshot a c$n
    snapshot b c$n
done
retime c1=2026-03-01T08:00:00Z c2=2026-03-01T20:00:00Z \
       c3=2026-03-02T08:00:00Z c4=2026-03-02T20:00:00Z \
       c5=2026-03-03T08:00:00Z c6=2026-03-03T20:00:00Z


# No keep option: nothing is removed.
dirtybitmap prune "$repo" > none.out
cat none.out
test "$(grep -c ' keep  *no keep option$' none.out)" = 6
points_are "c1 c2 c3 c4 c5 c6"

# A dry run says what a prune would do, and changes nothing.
ls -lR R > before.ls
dirtybitmap prune --dry-run --keep-daily 3 "$repo" > dry.out
cat dry.out
dirtybitmap prune --dry-run --keep-daily 3 --output=json "$repo" > dry.json
cat dry.json
python3 - <<'EOF2'
import json
j = json.load(open("dry.json"))
got = [(p["name"], p["time"], p["keep"], p["reason"]) for p in j["points"]]
want = [("c1", "2026-03-01T08:00:00.000000Z", False, None),
        ("c2", "2026-03-01T20:00:00.000000Z", True, "keep-daily"),
        ("c3", "2026-03-02T08:00:00.000000Z", False, None),
        ("c4", "2026-03-02T20:00:00.000000Z", True, "keep-daily"),
        ("c5", "2026-03-03T08:00:00.000000Z", False, None),
        ("c6", "2026-03-03T20:00:00.000000Z", True, "keep-daily")]
assert got == want, got
assert j["dry-run"] is True and "freed-bytes" not in j, j
EOF2
grep -E '^c1  +2026-03-01T08:00:00.000000Z  remove   -$' dry.out
grep -E '^c2  +2026-03-01T20:00:00.000000Z  keep     keep-daily$' dry.out
ls -lR R > after.ls
diff -u before.ls after.ls
sound a b

# The prune.
du_before=$(du -s --block-size=1 R | cut -f1)
dirtybitmap prune --keep-daily 3 --output=json "$repo" > p1.json
cat p1.json
du_after=$(du -s --block-size=1 R | cut -f1)
points_are "c2 c4 c6"
sound a b
intact c2 c4 c6
python3 - $du_before $du_after <<'EOF2'
import json, sys
j = json.load(open("p1.json"))
assert [p["name"] for p in j["points"] if not p["keep"]] == ["c1", "c3", "c5"], j
assert j["removed"] == 3 and j["dry-run"] is False, j
# What it freed is what the repository's files no longer take (the
# records, a few hundred bytes each, are not counted).
freed = int(sys.argv[1]) - int(sys.argv[2])
assert abs(j["freed-bytes"] - freed) <= 3 * 4096, (j["freed-bytes"], freed)
assert j["freed-bytes"] > 0 and j["written-bytes"] > 0, j
EOF2

# A backup builds on the newest point; then the whole chain folds
# into it.
write_some 7 a b
rbackup c7 a b
snapshot a c7
snapshot b c7
points_are "c2 c4 c6 c7"
dirtybitmap prune --keep-last 1 "$repo" > p2.out
cat p2.out
grep -E '^c7  +[-0-9T:.Z]+  keep     keep-last$' p2.out
grep -E '^c2  +[-0-9T:.Z]+  removed  -$' p2.out
grep -E '^removed 3 of 4 points: freed [0-9.]+ [KM]iB; wrote [0-9.]+ [KM]iB into the points that built on them \(the increments folded: [0-9.]+ [KM]iB\)$' p2.out
points_are "c7"
sound a b
intact c7
write_some 8 a b
rbackup c8 a b
snapshot a c8
snapshot b c8
sound a b
intact c7 c8
