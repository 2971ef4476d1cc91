#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Every bad input to the repository's commands is a clear error (exit
# 1, nothing on stdout, a message naming the thing and the problem),
# and changes nothing: a directory that is not a repository, an
# unknown point, a damaged record, a missing image, damaged checksums,
# an image whose data no longer matches its checksums (restore names
# the ranges), a target of the wrong size, a repository in use, and
# backup's own refusals (a point that exists, a base that is not the
# newest, a target given).
source ./functions.sh
set -e
set -x
requires flock --version
source "$abs_top_srcdir/tests/repo-lib.sh"

start_disk a 8M
write_some 1 a
rbackup c1 a
snapshot a c1
write_some 2 a
rbackup c2 a
snapshot a c2

# --- Not a repository ------------------------------------------------
mkdir plain
echo data > plain/file
for cmd in "list plain" "restore plain x.img" "serve plain --socket $PWD/s"; do
    tool_fails "plain is not a dirtybitmap repository (it has no repository.json: backup --repo makes one)" $cmd
done
tool_fails -k plain/lock \
    "plain is not a dirtybitmap repository (it has no repository.json) and is not empty (it holds file): give backup --repo a new or empty directory" \
    backup --repo plain --control "$PWD/a.ctl" --checkpoint c9 "$(uri a)"
test "$(ls plain)" = file
tool_fails "nowhere: No such file or directory" list nowhere
tool_fails "plain/file: not a directory (a repository is one)" list plain/file

# --- Unknown points, bad names ---------------------------------------
tool_fails "$repo has no point c9 (its points: c1, c2)" restore "$repo@c9" x.img
tool_fails "$repo has no point c9 (its points: c1, c2)" \
    serve "$repo@c9" --socket "$PWD/s"
tool_fails 'point "../c1": a name of the repository is made of letters, digits and _ + : - . only' \
    restore "$repo@../c1" x.img
tool_fails "point c2 has no disk b" restore "$repo@c2" --disk b=x.img
tool_fails "point c2 has no disk b" serve "$repo@c2" --disk b --socket "$PWD/s"
test ! -e x.img
test ! -e s

# --- A damaged record ------------------------------------------------
cp R/points/c2.json c2.json.good
echo '{"format": 1, "name": "c2", ' > R/points/c2.json
tool_fails "$repo/points/c2.json: damaged: not a JSON object" list "$repo"
tool_fails "$repo/points/c2.json: damaged: not a JSON object" restore "$repo" x.img
tool_fails -k a.img.bitmaps "$repo/points/c2.json: damaged: not a JSON object" \
    backup --repo "$repo" --control "$PWD/a.ctl" --checkpoint c3 "$(uri a)"
# Another point still restores.
restored c1 a c1.img
# A record that names a file outside its point's.
python3 - <<'EOF2'
import json
r = json.load(open("c2.json.good"))
r["disks"][0]["image"] = "../../../etc/passwd"
json.dump(r, open("R/points/c2.json", "w"))
EOF2
tool_fails "$repo/points/c2.json: damaged: disks[0].image is \"../../../etc/passwd\", not disks/a/c2.qcow2 (a point's record names its own files only)" \
    restore "$repo@c2" x.img
python3 - <<'EOF2'
import json
r = json.load(open("c2.json.good"))
del r["disks"][0]["size"]
json.dump(r, open("R/points/c2.json", "w"))
EOF2
tool_fails "$repo/points/c2.json: damaged: disks[0].size is missing or not a size" \
    list --output=json "$repo"
cp c2.json.good R/points/c2.json
test ! -e x.img

# --- A missing image -------------------------------------------------
mv R/disks/a/c1.qcow2 c1.qcow2.away
tool_fails "point c1, disk a: $repo/disks/a/c1.qcow2: No such file or directory" \
    restore "$repo@c1" x.img
# c2 is backed by c1: its chain is checked before anything is written.
tool_fails "point c2, disk a: $repo/disks/a/c2.qcow2: its backing chain: Could not open '$repo/disks/a/c1.qcow2'" \
    restore "$repo@c2" x.img
tool_fails "point c2, disk a: $repo/disks/a/c2.qcow2: its backing chain: Could not open '$repo/disks/a/c1.qcow2'" \
    serve "$repo@c2" --socket "$PWD/s"
mv c1.qcow2.away R/disks/a/c1.qcow2
test ! -e x.img
test ! -e s

# --- Damaged checksums -----------------------------------------------
cp R/sums/a.c2.sums sums.good
printf '\x55' | dd of=R/sums/a.c2.sums bs=1 seek=5000 conv=notrunc status=none
tool_fails "restore: point c2, disk a: $repo/sums/a.c2.sums" restore "$repo@c2" x.img
test ! -e x.img
cp sums.good R/sums/a.c2.sums

# --- An image whose data no longer matches: the ranges named ----------
# The first data cluster that c2's own image holds, overwritten in the
# file (qemu-img map gives its place in the file).
read -r off host < <(qemu-img map -f qcow2 --output=json R/disks/a/c2.qcow2 |
    python3 -c '
import json, sys
e = [e for e in json.load(sys.stdin) if e["depth"] == 0 and e["data"]][0]
print(e["start"], e["offset"])')
cp R/disks/a/c2.qcow2 c2.qcow2.good
printf 'garbage' | dd of=R/disks/a/c2.qcow2 bs=1 seek=$((host + 100)) conv=notrunc status=none
tool_fails "restore: disk a: x.img does not hold a verified copy of point c2: 1 of 128 chunks read from $repo/disks/a/c2.qcow2 differ from its checksums $repo/sums/a.c2.sums:" \
    restore "$repo@c2" x.img
grep -Fx "dirtybitmap: restore: disk a: differs: offset $off, 65536 bytes" fails.err
r=0
dirtybitmap restore --output=json "$repo@c2" x.img > r.json || r=$?
test $r = 1
python3 - $off <<'EOF2'
import json, sys
r = json.load(open("r.json"))
assert r["result"] == "failed", r
d, = r["disks"]
assert d["verified"] is False and d["chunks-differing"] == 1, d
assert d["differing"] == [{"offset": int(sys.argv[1]), "length": 65536}], d
EOF2
cp c2.qcow2.good R/disks/a/c2.qcow2
restored c2 a x.img

# --- A target of the wrong size ---------------------------------------
truncate -s 4M small.img
tool_fails -k small.img "restore: small.img is 4194304 bytes, but disk a at point c2 is 8388608 bytes: a restore writes a target of the disk's size (nothing was written)" \
    restore "$repo@c2" small.img
nbdkit -U - memory 4M --run "
    dirtybitmap restore '$repo@c2' \"\$uri\" > small.out 2> small.err" || :
cat small.out small.err
test ! -s small.out
grep -F "bytes, but disk a at point c2 is 8388608 bytes" small.err
tool_fails "restore: $repo/disks/a/c1.qcow2: it is inside the repository $repo" \
    restore "$repo@c2" "$repo/disks/a/c1.qcow2"

# --- In use ------------------------------------------------------------
# hold FILE [-s]: flock R/FILE (exclusive, or shared with -s) held by
# a process of this test until release (flock -F: that process is the
# one that holds it, and the one release kills).  R/lock held
# exclusively is what a prune holds; shared, what a reader or a backup
# holds; R/writer.lock, what a backup or a prune holds.
hold ()
{
    local f=$1
    shift
    rm -f held
    flock -F "$@" R/$f sh -c 'touch held; exec sleep 60' &
    holder=$!
    wait_until 10 [ -e held ]
}
release ()
{
    kill $holder
    wait $holder || :
}
busy="$repo is in use by another dirtybitmap"
# A prune: nothing else.
hold lock
for cmd in "list $repo" "restore $repo@c1 x.img" "serve $repo --socket $PWD/s"; do
    tool_fails "$busy (a prune): try again once it has ended" $cmd
done
tool_fails -k a.img.bitmaps "$busy (a prune): try again once it has ended" \
    backup --repo "$repo" --control "$PWD/a.ctl" --checkpoint c3 "$(uri a)"
release
# A backup or a prune: no second writer, but readers read.
hold writer.lock
dirtybitmap list "$repo" > /dev/null
tool_fails -k a.img.bitmaps "$busy (a backup or a prune): try again once it has ended" \
    backup --repo "$repo" --control "$PWD/a.ctl" --checkpoint c3 "$(uri a)"
tool_fails "$busy (a backup or a prune): try again once it has ended" \
    prune --keep-last 1 "$repo"
release
# A reader: a prune is refused (test-dirtybitmap-repo-readers.sh: a
# backup is not).
hold lock -s
tool_fails "$busy (a list, restore, rollback, serve or verify reading it): try again once it has ended" \
    prune --keep-last 1 "$repo"
release
test ! -e s

# --- backup's refusals ------------------------------------------------
ctl="$PWD/a.ctl"
tool_fails -k a.img.bitmaps "backup: --checkpoint c2: $repo has a point c2 already: give the new point another name" \
    backup --repo "$repo" --control "$ctl" --checkpoint c2 "$(uri a)"
tool_fails -k a.img.bitmaps "backup: --incremental c0: $repo has no point c0 (a backup into a repository builds on its newest point, c2: leave --incremental out)" \
    backup --repo "$repo" --control "$ctl" --incremental c0 --checkpoint c3 "$(uri a)"
tool_fails "backup: --incremental c1: $PWD/R2 has no points: its first backup is a full one (leave --incremental out)" \
    backup --repo "$PWD/R2" --control "$ctl" --incremental c1 --checkpoint c3 "$(uri a)"
tool_fails -k a.img.bitmaps "--sums-dir $PWD: not with --repo: a repository keeps its points' checksums" \
    backup --repo "$repo" --control "$ctl" --checkpoint c3 --sums-dir "$PWD" "$(uri a)"
tool_fails "expecting SOURCE_URI (the repository holds the disk's points)" \
    backup --repo "$repo" --control "$ctl" --checkpoint c3 "$(uri a)" x.img
tool_fails "no target= with --repo: the repository holds the disk's points" \
    backup --repo "$repo" --checkpoint c3 --disk "$(disk a x.img)"
tool_fails "name=NAME is required with --repo: it names the disk's points" \
    backup --repo "$repo" --checkpoint c3 --disk "control=$ctl,source=$(uri a)"
tool_fails 'backup: disk "a.b": a name of the repository is made of letters, digits and _ + : - only' \
    backup --repo "$repo" --checkpoint c3 --disk "control=$ctl,source=$(uri a),name=a.b"
tool_fails 'backup: point "c/3": a name of the repository is made of letters, digits and _ + : - . only' \
    backup --repo "$repo" --control "$ctl" --checkpoint c/3 "$(uri a)"
# Nothing changed: the points restore as before, the next backup works.
dirtybitmap list "$repo" | awk 'NR > 1 && $1 != "(total)" { print $1 }' > names
test "$(cat names)" = "$(printf 'c1\nc2')"
restored c1 a x.img
restored c2 a x.img
rbackup c3 a
bitmaps_are c3 a
