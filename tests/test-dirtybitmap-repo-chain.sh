#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A backup repository of one disk (dirtybitmap backup --repo DIR, the
# --control form): a chain of three points with writes (and zeroes)
# between them, then
#   - list, text and JSON, field by field: names, times (the
#     manifest's cut.time), bases, sizes, stored-bytes (what qemu-img
#     map says each point's own image holds), files, verified;
#   - restore of each point to a new file (sparse) and over an
#     existing one: byte for byte the disk as it was at that point,
#     each chunk verified;
#   - serve of a point: read with nbdcopy, equal, read-only; SIGTERM
#     ends it and removes the socket;
#   - restore of the first point into the live disk through its
#     server (the filter records the writes): the next backup is an
#     incremental, of the bytes the restore wrote, and restores to
#     the first point's bytes.
source ./functions.sh
set -e
set -x
requires nbdcopy --version
source "$abs_top_srcdir/tests/repo-lib.sh"

size=$((8 * 1024 * 1024))
start_disk a $size

# plain NEW ARGS...: the one-disk form into the repository.
plain ()
{
    local new=$1
    shift
    backup --repo "$repo" --control "$PWD/a.ctl" --checkpoint "$new" \
           --manifest "m-$new.json" --output=json "$@" "$(uri a)" \
           > "b-$new.json"
    cat "b-$new.json"
}

# mode NEW: what the backup of NEW did (its JSON summary).
mode ()
{
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["mode"])' \
            "b-$1.json"
}

# 1. Three points.
write_some 1 a
plain c1
snapshot a c1
test "$(mode c1)" = full
write_some 2 a
zero_write "$(uri a)" 2097152 65536
plain c2
snapshot a c2
test "$(mode c2)" = incremental
write_some 3 a
plain c3
snapshot a c3
test "$(mode c3)" = incremental
# The servers keep the newest point's checkpoint only.
bitmaps_are c3 a
ls -lR R

# Each image's chain: c1 alone, c2 on c1, c3 on c2, by relative names
# and with their format; clusters of 64K.
for p in c1 c2 c3; do
    qemu-img info --output=json -f qcow2 "R/disks/disk0/$p.qcow2" > info-$p.json
done
python3 - <<'EOF2'
import json
for p, base in (("c1", None), ("c2", "c1.qcow2"), ("c3", "c2.qcow2")):
    i = json.load(open("info-%s.json" % p))
    assert i["cluster-size"] == 65536, i
    assert i.get("backing-filename") == base, i
    if base:
        assert i["backing-filename-format"] == "qcow2", i
EOF2

# 2. list, JSON: every field.
dirtybitmap list --output=json "$repo" > list.json
cat list.json
for p in c1 c2 c3; do stored "R/disks/disk0/$p.qcow2"; done > stored
python3 - "$repo" $size <<'EOF2'
import json, sys
repo, size = sys.argv[1], int(sys.argv[2])
l = json.load(open("list.json"))
stored = [int(x) for x in open("stored").read().split()]
assert list(l) == ["points", "stored-bytes"], l
assert l["stored-bytes"] == sum(stored), (l, stored)
pts = l["points"]
assert [p["name"] for p in pts] == ["c1", "c2", "c3"], pts
assert [p["base"] for p in pts] == [None, "c1", "c2"], pts
for i, p in enumerate(pts):
    n = p["name"]
    m = json.load(open("m-%s.json" % n))
    b = json.load(open("b-%s.json" % n))
    assert sorted(p) == ["base", "disks", "name", "time", "verified"], p
    assert p["time"] == m["cut"]["time"], (p, m)
    # The summary and the manifest name the point's image.
    image = "%s/disks/disk0/%s.qcow2" % (repo, n)
    assert b["target"] == image and m["disks"][0]["target"] == image, (b, m)
    assert p["verified"] is None, p
    assert len(p["disks"]) == 1, p
    d = p["disks"][0]
    assert sorted(d) == ["files", "name", "size", "stored-bytes"], d
    assert d["name"] == "disk0" and d["size"] == size, d
    assert d["stored-bytes"] == stored[i], (d, stored)
    assert d["files"] == ["%s/disks/disk0/%s.qcow2" % (repo, n),
                          "%s/sums/disk0.%s.sums" % (repo, n)], d
    # An incremental stores what it copied and zeroed, nothing else.
    if i > 0:
        assert d["stored-bytes"] == b["bytes-copied"] + b["bytes-zeroed"], (d, b)
        assert 0 < d["stored-bytes"] < size, d
assert pts[0]["time"] < pts[1]["time"] < pts[2]["time"], pts
print("list --output=json: every field as expected")
EOF2

# list, text: a header and a line per point and disk.
dirtybitmap list "$repo" > list.txt
cat list.txt
head -n1 list.txt | grep -E '^POINT +TIME +BASE +DISK +SIZE +STORED +VERIFIED$'
test "$(wc -l < list.txt)" -eq 5
tail -n1 list.txt | grep -E '^\(total\) +[0-9.]+ [KM]iB$'
for p in c1:- c2:c1 c3:c2; do
    t=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["cut"]["time"])' "m-${p%:*}.json")
    grep -E "^${p%:*} +$t +${p#*:} +disk0 +8 MiB +[0-9.]+ [KM]iB +-$" list.txt
done

# 3. Restore each point to a new file: the disk as it was, sparse.
for p in c1 c2 c3; do
    restored $p disk0 out-$p.img a
done
# The first point holds 16 writes of 4K: the restored file has no more
# allocated than a few times that.
test "$(stat -c %b out-c1.img)" -le 512
# Over an existing file (c3's): each byte written, zeroes as holes.
dirtybitmap restore --output=json "$repo@c1" out-c3.img > r.json
cat r.json
cmp a.c1 out-c3.img
python3 - "$repo" <<'EOF2'
import json, sys
r = json.load(open("r.json"))
assert r["result"] == "complete" and r["point"] == "c1", r
d, = r["disks"]
assert d["name"] == "disk0" and d["verified"] is True, d
assert d["chunks"] == 128 and d["chunks-differing"] == 0, d
assert d["differing"] == [], d
assert d["source"] == sys.argv[1] + "/disks/disk0/c1.qcow2", d
assert d["bytes-copied"] + d["bytes-zeroed"] == 8 * 1024 * 1024, d
EOF2
test "$(stat -c %b out-c3.img)" -le 512
# DIR without @POINT: the newest.
rm -f out-new.img
dirtybitmap restore "$repo" out-new.img
cmp a.c3 out-new.img

# 4. serve a point: read it whole, then SIGTERM.
dirtybitmap serve "$repo@c2" --socket "$PWD/c2.sock" > serve.out 2> serve.err &
spid=$!
cleanup_fn kill_nbdkit $spid
wait_until 10 [ -S c2.sock ]
nbdcopy "nbd+unix:///?socket=$PWD/c2.sock" served-c2.img
cmp a.c2 served-c2.img
nbdsh -u "nbd+unix:///?socket=$PWD/c2.sock" -c 'assert h.is_read_only()'
kill -TERM $spid
r=0
wait $spid || r=$?
cat serve.out serve.err
test $r = 0
test ! -e c2.sock
grep -F "serving point c2 of disk disk0 ($repo/disks/disk0/c2.qcow2) read-only at nbd+unix:///?socket=$PWD/c2.sock" serve.out

# 5. Restore c1 into the live disk, through its server: recorded.
write_some 4 a
dirtybitmap restore "$repo@c1" "$(uri a)"
cmp a.c1 a.img
plain c4
test "$(mode c4)" = incremental
python3 -c '
import json
b = json.load(open("b-c4.json"))
# The restore wrote every byte, through the filter: all of it is in c3.
assert b["bytes-copied"] + b["bytes-zeroed"] == 8 * 1024 * 1024, b'
snapshot a c4
cmp a.c1 a.c4
restored c4 disk0 out-c4.img a
