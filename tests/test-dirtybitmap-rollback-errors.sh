#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap rollback: what it refuses, each with a message naming
# the problem and nothing written (a point that verify found bad among
# them: restore warns of it); and a machine of two disks rolled
# back at once, one of them with its newest checksums damaged (its
# tracking is then not trusted: it is compared by reading it).
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/repo-lib.sh"

size=$((8 * 1024 * 1024))
start_disk a $size
start_disk b $size
start_disk small $((size / 2))
spec () { echo "control=$PWD/$1.ctl,source=$(uri "${2:-$1}"),name=$1"; }
# ctl SOCKET REQUEST: one request on the control socket; its error
# fails the test.
ctl ()
{
    python3 -c '
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
f = s.makefile("rw"); f.write(sys.argv[2] + "\n"); f.flush()
r = json.loads(f.readline())
if "return" not in r: sys.exit("%s" % r["error"]["desc"])' "$@"
}

write_some 1 a b
rbackup mon a b
snapshot a mon
snapshot b mon
write_some 2 a b
rbackup tue a b
write_some 3 a b
cp a.img a.now
cp b.img b.now

# Bad command lines and points: nothing written.
tool_fails -k a.img "expecting DIR[@POINT]" rollback --disk "$(spec a)"
tool_fails -k a.img "--control SOCKET or --disk is required" \
           rollback "$repo@mon"
tool_fails -k a.img "--control and --disk: use one form" \
           rollback "$repo@mon" --disk "$(spec a)" --control a.ctl "$(uri a)"
tool_fails -k a.img "name=NAME (the disk's name in the repository) is required" \
           rollback "$repo@mon" --disk "control=$PWD/a.ctl,source=$(uri a)"
tool_fails -k a.img "has no point sun" \
           rollback "$repo@sun" --disk "$(spec a)"
tool_fails -k a.img "point mon has no disk c" \
           rollback "$repo@mon" --disk "$(spec c a)"
tool_fails -k a.img "point mon has 2 disks: give each with --disk control=SOCKET,source=URI,name=NAME" \
           rollback "$repo@mon" --control "$PWD/a.ctl" "$(uri a)"
tool_fails -k small.img \
           "is 4194304 bytes, but disk a at point mon is 8388608 bytes: a rollback writes a target of the disk's size (nothing was written)" \
           rollback "$repo@mon" --disk "control=$PWD/small.ctl,source=$(uri small),name=a"

# A backup view open on the disk (someone's backup running).
ctl "$PWD/a.ctl" '{"execute": "backup-begin", "arguments": {"name": "other"}}'
tool_fails -k a.img "rollback: disk a: $PWD/a.ctl: a backup is running on it: wait for it to end" \
           rollback "$repo@mon" --disk "$(spec a)"
ctl "$PWD/a.ctl" '{"execute": "backup-end", "arguments": {"name": "other"}}'

# The repository in use by a prune: refused before anything.
exec 9> "$repo/lock"
flock -x 9
tool_fails -k a.img "is in use by another dirtybitmap" \
           rollback "$repo@mon" --disk "$(spec a)"
exec 9>&-
cmp a.img a.now
cmp b.img b.now

# A point that verify found bad: one byte flipped in a data cluster of
# mon's image of a.  Restore says so first, then fails on it; rollback
# refuses before writing.
cp -a R R.good
read -r off host < <(qemu-img map -f qcow2 --output=json R/disks/a/mon.qcow2 |
    python3 -c '
import json, sys
e = [e for e in json.load(sys.stdin) if e["depth"] == 0 and e["data"]]
print(e[0]["start"], e[0]["offset"])')
python3 - R/disks/a/mon.qcow2 $((host + 100)) <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2]))
    b = f.read(1)
    f.seek(int(sys.argv[2]))
    f.write(bytes([b[0] ^ 0xff]))
PY
r=0
dirtybitmap verify "$repo@mon" > /dev/null 2>&1 || r=$?
test $r = 1
tool_fails -k a.img "rollback: point mon, disk a: verify found it bad on " \
           rollback "$repo@mon" --disk "$(spec a)"
grep -F "nothing was written (roll back to another point, or verify this one again)" fails.err
grep -Fx "dirtybitmap: rollback: disk a: bad: offset $off, 65536 bytes" fails.err
tool_fails "restore: disk a: differs: offset $off, 65536 bytes" \
           restore "$repo@mon" --disk a=bad-mon.img
grep -F "restore: point mon, disk a: verify found it bad on " fails.err
rm -rf R
mv R.good R

# Two disks at once; b's checksums of the newest point damaged.
sums_b=$(dirtybitmap list --output=json "$repo" | python3 -c '
import json, sys
for p in json.load(sys.stdin)["points"]:
    if p["name"] == "tue":
        for d in p["disks"]:
            if d["name"] == "b":
                print([f for f in d["files"] if f.endswith(".sums")][0])')
printf 'garbage' | dd of="$sums_b" bs=1 seek=100 conv=notrunc
dirtybitmap rollback "$repo@mon" --disk "$(spec a)" --disk "$(spec b)" \
            > two.out 2> two.err
cat two.out two.err
cmp a.img a.mon
cmp b.img b.mon
grep -F "rollback: disk b: tracking lost (the checksums of point tue: $sums_b" two.err
if grep -F "disk a: tracking lost" two.err; then
    echo "$0: disk a's tracking was intact"
    exit 1
fi
grep -F "a: verified: the " two.out
grep -F "b: verified: the " two.out
