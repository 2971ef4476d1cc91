#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap rollback: a live disk served through the filter brought
# back in place to a point of its repository.
#   1. With tracking: the disk written after the newest point, rolled
#      back to an older one: it equals that point byte for byte, and
#      exactly the chunks that the checkpoint's bitmap has dirty or
#      whose checksums differ between the two points were written.
#      The next backup is an incremental of those chunks, and
#      restores to the point.
#   2. Nothing changed: a rollback to the newest point writes nothing.
#   3. With tracking lost (the checkpoint removed from the disk): it
#      says so, reads the disk once, writes only the chunks that
#      differ from the point's checksums; the disk equals the point.
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/repo-lib.sh"

size=$((8 * 1024 * 1024))
chunk=65536
start_disk a $size
spec="control=$PWD/a.ctl,source=$(uri a),name=a"

# field FILE EXPR: a value of the JSON in FILE (j is the object).
field ()
{
    python3 -c "import json, sys; j = json.load(open(sys.argv[1])); print($2)" "$1"
}

# chunks_differing A B...: how many chunks differ between file A and
# any of the files B (the union), in chunks of $chunk.
chunks_differing ()
{
    python3 - "$chunk" "$@" <<'EOF'
import sys
chunk = int(sys.argv[1])
a = open(sys.argv[2], "rb").read()
others = [open(f, "rb").read() for f in sys.argv[3:]]
print(sum(1 for i in range(0, len(a), chunk)
          if any(a[i:i + chunk] != o[i:i + chunk] for o in others)))
EOF
}

write_some 1 a
rbackup mon a
snapshot a mon
write_some 2 a
zero_write "$(uri a)" 2097152 $((3 * chunk))
rbackup tue a
snapshot a tue
write_some 3 a
rbackup wed a
snapshot a wed
# After the newest point: writes, and a zero over a chunk of data (so
# that each chunk written changed).
write_some 4 a
data=$(python3 -c '
import sys
wed = open("a.wed", "rb").read()
print(next(i for i in range(0, len(wed), 65536)
           if any(wed[i:i + 65536])))')
zero_write "$(uri a)" "$data" $chunk
snapshot a now

# 1. Back to tue.  The chunks to write: dirty since wed (where now
# differs from wed: every write changed its chunk) and changed
# between tue and wed.
want=$(chunks_differing a.tue a.now a.wed)
test "$want" -gt 16
dirtybitmap rollback --output=json "$repo@tue" --disk "$spec" > rb1.json
cat rb1.json
cmp a.img a.tue
test "$(field rb1.json 'j["result"]')" = complete
test "$(field rb1.json 'j["point"]')" = tue
test "$(field rb1.json 'j["newest"]')" = wed
test "$(field rb1.json 'j["disks"][0]["tracking"]')" = bitmap
test "$(field rb1.json 'j["disks"][0]["tracking-lost"]')" = None
test "$(field rb1.json 'j["disks"][0]["verified"]')" = True
test "$(field rb1.json 'j["disks"][0]["chunks-written"]')" = "$want"
test "$(field rb1.json 'j["disks"][0]["bytes-copied"] + j["disks"][0]["bytes-zeroed"]')" = $((want * chunk))

# The filter recorded the writes: an incremental of those chunks.
rbackup thu a -- --output=json > b-thu.json
cat b-thu.json
test "$(field b-thu.json 'j["disks"][0]["mode"]')" = incremental
test "$(field b-thu.json 'j["bytes-total"]')" = $((want * chunk))
cp a.tue a.thu
restored thu a thu.img

# 2. At the newest point, nothing changed: nothing is written.
dirtybitmap rollback "$repo@thu" --control "$PWD/a.ctl" "$(uri a)" > rb2.out
cat rb2.out
grep -F "verified: the 0 chunks written match the checksums of point thu" rb2.out
cmp a.img a.tue

# 3. Tracking lost: the checkpoint is gone from the disk.
dirtybitmap bitmap --remove --control "$PWD/a.ctl" thu
write_some 5 a
snapshot a now2
want=$(chunks_differing a.mon a.now2)
dirtybitmap rollback --output=json "$repo@mon" --disk "$spec" \
            > rb3.json 2> rb3.err
cat rb3.json rb3.err
cmp a.img a.mon
grep -F "rollback: disk a: tracking lost (the disk has no bitmap thu): reading the whole disk to compare it with the checksums of point mon" rb3.err
test "$(field rb3.json 'j["disks"][0]["tracking"]')" = checksums
test "$(field rb3.json 'j["disks"][0]["chunks-written"]')" = "$want"
test "$(field rb3.json 'j["disks"][0]["bytes-copied"] + j["disks"][0]["bytes-zeroed"]')" = $((want * chunk))
