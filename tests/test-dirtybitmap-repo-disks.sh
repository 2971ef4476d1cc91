#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A repository of a machine's disks (backup --repo --disk ..., the
# guest frozen by its agent: the fake one, fake-qga.py): disks a (16M)
# and b (8M), three points with writes between them, a third disk c
# joining at the third point (its first image a full one, on no
# backing file, while a and b are incrementals).  At each freeze no
# server is paused nor has a view; at each thaw every server has its
# view and the new checkpoint.  Then list (every point's disks and
# sizes), restore of every disk of every point (--disk NAME=TARGET),
# of some disks only, serve of one disk, and the usage errors of a
# point of several disks.
source ./functions.sh
set -e
set -x
requires nbdcopy --version
source "$abs_top_srcdir/tests/repo-lib.sh"

start_disk a 16M
start_disk b 8M
probe_args=(--ctl "$PWD/a.ctl" --ctl "$PWD/b.ctl")

# frozen NEW: the agent froze once and thawed once, in the order of
# the cut (fake-qga.py's log).
frozen ()
{
    python3 - "$1" <<'EOF2'
import json, sys
new = sys.argv[1]
ev = [json.loads(l) for l in open("qga.log")]
f = [e for e in ev if e["event"] == "freeze"]
t = [e for e in ev if e["event"] == "thaw"]
assert len(f) == 1 and len(t) == 1 and f[0]["t"] < t[0]["t"], ev
for s in f[0]["servers"]:
    assert not s["paused"] and s["view"] is None, f
    assert new not in s["bitmaps"], f
for s in t[0]["servers"]:
    assert not s["paused"] and s["view"] == "backup", t
    assert new in s["bitmaps"], t
EOF2
}

# disk_mode JSON NAME: how the backup copied disk NAME.
disk_mode ()
{
    python3 -c '
import json, sys
print([d["mode"] for d in json.load(open(sys.argv[1]))["disks"]
       if d["name"] == sys.argv[2]][0])' "$1" "$2"
}

for p in 1 2; do
    agent
    write_some $p a b
    rbackup c$p a b -- --guest-agent "$PWD/qga.sock" --output=json > b$p.json
    cat qga.log b$p.json
    frozen c$p
    snapshot a c$p
    snapshot b c$p
done
test "$(disk_mode b1.json a)" = full
test "$(disk_mode b1.json b)" = full
test "$(disk_mode b2.json a)" = incremental
test "$(disk_mode b2.json b)" = incremental

# A third disk joins.
start_disk c 12M
probe_args+=(--ctl "$PWD/c.ctl")
agent
write_some 3 a b c
rbackup c3 a b c -- --guest-agent "$PWD/qga.sock" --output=json \
        > b3.json 2> b3.err
cat qga.log b3.json b3.err
frozen c3
for d in a b c; do snapshot $d c3; done
test "$(disk_mode b3.json a)" = incremental
test "$(disk_mode b3.json b)" = incremental
test "$(disk_mode b3.json c)" = full
grep -F "dirtybitmap: backup: disk c: bitmap c2 is missing and there are no usable checksums of the previous backup" b3.err
qemu-img info -f qcow2 R/disks/c/c3.qcow2 > c3.info
cat c3.info
if grep -F "backing file" c3.info; then exit 1; fi
bitmaps_are c3 a b c

# list: each point's disks.
dirtybitmap list --output=json "$repo" > list.json
cat list.json
python3 - <<'EOF2'
import json
pts = json.load(open("list.json"))["points"]
assert [p["name"] for p in pts] == ["c1", "c2", "c3"], pts
assert [p["base"] for p in pts] == [None, "c1", "c2"], pts
M = 1024 * 1024
want = [[("a", 16 * M), ("b", 8 * M)]] * 2 + \
    [[("a", 16 * M), ("b", 8 * M), ("c", 12 * M)]]
for p, w in zip(pts, want):
    assert [(d["name"], d["size"]) for d in p["disks"]] == w, p
EOF2
dirtybitmap list "$repo" > list.txt
cat list.txt
test "$(awk 'NR > 1 { print $1 $4 }' list.txt | tr '\n' ' ')" = \
     "c1a c1b c2a c2b c3a c3b c3c (total) "

# restore: every disk of every point.
for p in c1 c2 c3; do
    disks="a b"
    [ $p != c3 ] || disks="a b c"
    args=()
    for d in $disks; do rm -f out-$d; args+=(--disk "$d=out-$d"); done
    dirtybitmap restore "$repo@$p" "${args[@]}" > r-$p.out
    cat r-$p.out
    for d in $disks; do
        cmp $d.$p out-$d
        grep -F "$d: verified: all " r-$p.out
    done
done
# Some disks only: the rest is not touched.
rm -f out-a out-b out-c
dirtybitmap restore "$repo@c3" --disk c=out-c --disk b=out-b
cmp c.c3 out-c
cmp b.c3 out-b
test ! -e out-a

# The usage errors of a point of several disks.
tool_fails "point c3 has 3 disks: name the target of each with --disk NAME=TARGET" \
    restore "$repo@c3" x.img
tool_fails "disks a and b have one target (x.img, ./x.img): each disk needs a target of its own" \
    restore "$repo@c3" --disk a=x.img --disk b=./x.img
tool_fails "--disk a: given twice" restore "$repo@c3" --disk a=x.img --disk a=y.img
tool_fails "--disk a: must be NAME=TARGET" restore "$repo@c3" --disk a
tool_fails "x.img: with --disk, the targets are in the --disk options" \
    restore "$repo@c3" --disk a=y.img x.img
tool_fails "point c3 has 3 disks: choose one with --disk NAME" \
    serve "$repo@c3" --socket "$PWD/s"
test ! -e x.img
test ! -e y.img
test ! -e s

# serve one disk of a point.
dirtybitmap serve "$repo@c2" --disk b --socket "$PWD/b.c2.sock" > serve.out &
spid=$!
cleanup_fn kill_nbdkit $spid
wait_until 10 [ -S b.c2.sock ]
nbdcopy "nbd+unix:///?socket=$PWD/b.c2.sock" served
cmp b.c2 served
kill -INT $spid
r=0
wait $spid || r=$?
test $r = 0
test ! -e b.c2.sock
