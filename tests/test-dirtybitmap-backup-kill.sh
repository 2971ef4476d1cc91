#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Crashes during a backup lose nothing.  kill -9 of the server while a
# view is open: the next start is clean, the scratch store has left
# nothing behind, and every completed write is in every bitmap that was
# recording.  dirtybitmap backup killed mid-copy (SIGKILL, or SIGINT):
# the view is ended and its checkpoint removed (by the server, for a
# SIGKILL), so the next run starts again from the same bitmap and its
# backup equals the disk.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

# scratch_blocks: the blocks allocated to the scratch store of the
# running server (a file in scratch/, unlinked at once: found through
# /proc).
scratch_blocks () {
    local f
    for f in /proc/$nbdkit_pid/fd/*; do
        case "$(readlink "$f")" in
            "$PWD/scratch/"*) stat -L -c %b "$f"; return 0 ;;
        esac
    done
    echo "$0: the server has no scratch store open" >&2
    return 1
}

# wait_writes LOG: until the target behind the log filter writing LOG
# has completed a write (10 s at most, else the test fails).
wait_writes () {
    wait_until 10 _wrote "$1" && return 0
    echo "$0: the backup wrote nothing to its target in 10 seconds"
    exit 1
}
_wrote () { [ "$(writes_done "$1")" -gt 0 ]; }
writes_done () {
    grep -c '\.\.\.Write .* return=0' "$1" || :
}

query () {
    python3 -c '
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
f = s.makefile("rw"); f.write("{\"execute\": \"query\"}\n"); f.flush()
r = json.loads(f.readline())["return"]
print("backup", r["backup"] and r["backup"]["name"])
print("bitmaps", " ".join(b["name"] for b in r["bitmaps"]))
' ctl
}

# 1. kill -9 of the server with a view open.
head -c 8M /dev/urandom > disk.img
mkdir scratch
start_nbdkit_child -P "$PWD/pid" -U "$PWD/sock" --filter="$FILTER" \
                   file disk.img bitmap=b0 action=add granularity=64K \
                   control="$PWD/ctl"
uri="nbd+unix:///?socket=$PWD/sock"
nbdinfo --size "$uri"
dirtybitmap bitmap --add -g 64K --control ctl other
python3 -c '
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect("ctl")
f = s.makefile("rw")
f.write(json.dumps({"execute": "backup-begin", "arguments": {
    "name": "v", "checkpoint": "c1", "scratch": sys.argv[1]}}) + "\n")
f.flush()
assert "return" in f.readline()
' "$PWD/scratch"
test "$(scratch_blocks)" -eq 0
nbdsh -u "$uri" -c '
for i in range(16):
    h.pwrite(b"w" * 512, i * 300000)
'
# The view kept what the writes overwrote: the scratch store holds
# data when the server dies.
test "$(scratch_blocks)" -gt 0
kill -9 $nbdkit_pid
wait $nbdkit_pid || test $? = 137
test -z "$(ls -A scratch)"
dirtybitmap check disk.img.bitmaps
dirtybitmap info disk.img.bitmaps > info
cat info
if grep -F "consistent: false" info; then exit 1; fi
for b in b0 other c1; do
    dirtybitmap map --output=json disk.img.bitmaps $b > $b.json
    python3 - $b.json <<'EOF2'
import json, sys
dirty = set()
for e in json.load(open(sys.argv[1])):
    if e["type"] == 0:
        dirty.update(range(e["offset"] // 65536,
                           -(-(e["offset"] + e["length"]) // 65536)))
missing = [i for i in range(16)
           if not set(range(i * 300000 // 65536,
                            (i * 300000 + 511) // 65536 + 1)) <= dirty]
assert not missing, missing
EOF2
done

# 2. dirtybitmap backup killed with SIGKILL mid-copy (a slow target:
# 128 writes of 64K, two at a time, 200 ms each; the log filter says
# when one is done).  It is killed once the first one is done, and the
# target must then have got fewer than all.
start_nbdkit -P "$PWD/pid2" -U "$PWD/sock2" --filter="$FILTER" \
             file disk.img bitmap=b0 control="$PWD/ctl"
uri="nbd+unix:///?socket=$PWD/sock2"
start_nbdkit -P "$PWD/tpid" -U "$PWD/tsock" --filter=delay --filter=log \
             memory 8M wdelay=200ms logfile="$PWD/t.log"
dirtybitmap backup --control ctl --checkpoint c2 --requests 2 \
            --connections 1 --request-size 64K \
            "$uri" "nbd+unix:///?socket=$PWD/tsock" &
job=$!
wait_writes t.log
query > q
grep -Fx "backup backup" q
kill -9 $job
wait $job || test $? = 137
view_ended () { query > q; grep -Fx "backup None" q; }
wait_until 10 view_ended || :
cat q
grep -Fx "backup None" q
grep -Fx "bitmaps b0 other c1" q
n=$(writes_done t.log)
echo "the target got $n of 128 writes"
test "$n" -lt 128

# 3. SIGINT mid-copy (once the first write to the target is done,
# and it must not have got them all): the tool ends it and removes the
# checkpoint itself.  (A
# target of its own: the kill -9 above may have left replies of the
# first one in flight, and nbdkit 1.32 can abort then: BUGS in
# nbdkit-dirtybitmap-filter(1).)
start_nbdkit -P "$PWD/tpid3" -U "$PWD/tsock3" --filter=delay --filter=log \
             memory 8M wdelay=200ms logfile="$PWD/t3.log"
# c1 holds the 64K granules of the 16 writes of case 1: one target
# write each for a complete backup.
all=$(python3 -c 'print(len({g for i in range(16)
                              for g in range(i * 300000 // 65536,
                                             (i * 300000 + 511) // 65536 + 1)}))')
dirtybitmap backup --control ctl --incremental c1 --checkpoint c3 \
            --requests 2 --connections 1 --request-size 64K \
            "$uri" "nbd+unix:///?socket=$PWD/tsock3" 2> int.err &
job=$!
wait_writes t3.log
kill -INT $job
r=0
wait $job || r=$?
cat int.err
test $r = 1
grep -F "backup incomplete: the view is ended and the checkpoint c3 removed: the next backup starts again from c1" int.err
n=$(writes_done t3.log)
echo "the target got $n of $all writes"
test "$n" -lt "$all"
query > q
grep -Fx "backup None" q
grep -Fx "bitmaps b0 other c1" q

# The next run, from the same bitmaps, is a complete backup.
dirtybitmap backup --control ctl --checkpoint c4 "$uri" full.img
cmp disk.img full.img
