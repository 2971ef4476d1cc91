#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A backup of several disks is all or nothing.  Three disks, a full
# backup with checkpoint b1, then incrementals that fail on one disk
# (most after the others began):
#   (a) its server killed (kill -9) while its backup-begin is under
#       way (held at the filter's "freeze" pause point), the other two
#       views open;
#   (b) its server killed during the copy (its copy to a slow target
#       under way);
#   (c) its scratch directory a file: refused by its backup-prepare,
#       before any pause;
#   (d) its target unwritable: /dev/full (no file or device to copy
#       to), and an NBD target whose every write fails with ENOSPC.
# Each time: exit 1, stderr ends with "backup incomplete", no server
# paused, no view and no new checkpoint on any disk, the base bitmap
# intact (recording, consistent, with the same dirty bytes as before)
# on every disk; and the next run (after a restart of the killed
# server) succeeds, and every target equals its disk.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires nbdkit --filter=delay --filter=log --filter=error null --version
requires python3 -c 'import nbd'
source "$abs_top_srcdir/tests/machine-lib.sh"

disks="a b c"
mkfifo freeze.reached freeze.release
start_disk a 8M
start_disk b 8M
DIRTYBITMAP_TEST_PAUSE=freeze DIRTYBITMAP_TEST_PAUSE_DIR="$PWD" \
    start_disk c 8M
cpid=$nbdkit_pid

# args [NAME TARGET [MORE]]: the --disk options of a b c, each into
# its NAME.bak, but disk NAME into TARGET, MORE appended.
args ()
{
    local n
    argv=()
    for n in $disks; do
        if [ "$n" = "${1:-}" ]; then
            argv+=(--disk "$(disk $n "$2" "${3:-}")")
        else
            argv+=(--disk "$(disk $n $n.bak)")
        fi
    done
}

# begun NAME: how many views the server of NAME has begun (its log).
begun ()
{
    grep -c "dirtybitmap: backup view backup begun" "$1.log" || :
}

# json_failed FILE MANIFEST DISK: the JSON summary says the set failed,
# and DISK with an error; so does the manifest (written on failure
# too), and that the other disks are incomplete.
json_failed ()
{
    python3 - "$@" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["result"] == "failed", d
disk = [x for x in d["disks"] if x["name"] == sys.argv[3]]
assert len(disk) == 1, d
assert disk[0]["result"] == "failed", disk
assert isinstance(disk[0]["error"], str) and disk[0]["error"], disk
m = json.load(open(sys.argv[2]))
assert m["result"] == "failed", m
st = {x["name"]: x["status"] for x in m["disks"]}
want = {n: "failed" if n == sys.argv[3] else "incomplete" for n in "abc"}
assert st == want, (st, want)
EOF
}

# after_failure BASE NEW [KILLED]: what every failure must leave: no
# server paused, no view, the bitmaps (BASE only) as they were before.
# A server KILLED with kill -9 (and started again) could not be told
# to remove NEW: it may have it still, for the next run to remove.
after_failure ()
{
    no_leftovers $disks
    states $disks > after
    if [ -n "${3:-}" ]; then
        sed -i "/^$3: /s/ $2([^)]*)\$//" after
    fi
    diff -u before after
    bitmaps_are "$1" $(echo $disks | tr ' ' '\n' | grep -vx "${3:-}")
}

# next_run BASE NEW [KILLED]: the next run succeeds (removing NEW from
# the disk KILLED if it was left there), and the targets equal the
# disks.
next_run ()
{
    local left=
    if [ -n "${3:-}" ] && state $3 | grep -F " $2("; then
        left=yes
    fi
    args
    backup "${argv[@]}" --incremental "$1" --checkpoint "$2" \
           --remove-incremental 2> next.err
    cat next.err
    if [ -n "$left" ]; then
        grep -Fx "dirtybitmap: backup: disk $3: removed checkpoint $2 left by an incomplete backup" next.err
    fi
    same_disks $disks
    no_leftovers $disks
    bitmaps_are "$2" $disks
}

args
backup "${argv[@]}" --checkpoint b1
same_disks $disks
bitmaps_are b1 $disks

# (a) c's server killed while its begin is held, a's and b's views
# open.
write_some a $disks
states $disks > before
args
# (--cut-timeout: the test, not the tool's clock, says when c dies.)
timeout --foreground -k 5 60 dirtybitmap backup "${argv[@]}" --incremental b1 --checkpoint b2 \
            --cut-timeout 30 --output=json --manifest a.manifest \
            > a.out 2> a.err &
job=$!
timeout 30 cat freeze.reached
# The tool has paused every server and begun a's and b's views.
views_begun ()
{
    state a | grep -qF " view=backup " && state b | grep -qF " view=backup "
}
wait_until 10 views_begun || :
state a | grep -F "paused=true view=backup "
state b | grep -F "paused=true view=backup "
kill9 $cpid
r=0
wait $job || r=$?
cat a.out a.err
test $r = 1
incomplete a.err
json_failed a.out a.manifest c
start_disk c 8M
after_failure b1 b2 c
next_run b1 b2 c

# (b) b's server killed while the copy to its slow target is under way.
write_some b $disks
states $disks > before
# (Half a second a write: the copy of b lasts seconds, a's and c's are
# done long before, their views still open.)
slow_target b b.bak 500ms
args b "$(tsock_uri b)"
timeout --foreground -k 5 60 dirtybitmap backup "${argv[@]}" --incremental b2 --checkpoint b3 \
            --requests 1 --connections 1 --output=json \
            --manifest b.manifest > b.out 2> b.err &
job=$!
wait_target_busy b.tlog
state a | grep -F "paused=false view=backup "
state c | grep -F "paused=false view=backup "
kill9 "$(cat b.pid)"
r=0
wait $job || r=$?
cat b.out b.err
test $r = 1
incomplete b.err
json_failed b.out b.manifest b
kill_nbdkit "$(cat b.tpid)"
start_disk b 8M
after_failure b2 b3 b
next_run b2 b3 b

# (c) c's scratch directory is a file: refused by its backup-prepare,
# before any pause, so no view was begun anywhere.
write_some c $disks
states $disks > before
: > notadir
na=$(begun a) nb=$(begun b)
args c c.bak ",scratch=$PWD/notadir"
backup_fails c.err "${argv[@]}" --incremental b3 --checkpoint b4
grep -F "disk c: backup-prepare: scratch $PWD/notadir: not a directory" c.err
test "$(begun a)" -eq $na
test "$(begun b)" -eq $nb
after_failure b3 b4
next_run b3 b4

# (d) c's target cannot be written: /dev/full.
write_some d $disks
states $disks > before
na=$(begun a) nb=$(begun b)
args c /dev/full
backup_fails d.err "${argv[@]}" --incremental b4 --checkpoint b5
test "$(begun a)" -eq $((na + 1))
test "$(begun b)" -eq $((nb + 1))
after_failure b4 b5
next_run b4 b5

# ... and a target that takes no write: a full disk behind NBD.
write_some e $disks
states $disks > before
na=$(begun a) nb=$(begun b)
rm -f full.tsock
start_nbdkit_child -P "$PWD/full.pid" -U "$PWD/full.tsock" --filter=error \
                   file c.bak error=ENOSPC error-pwrite-rate=1 \
                   error-zero-rate=1 error-trim-rate=1
args c "$(tsock_uri full)"
backup_fails e.err "${argv[@]}" --incremental b5 --checkpoint b6
grep -F "No space left on device" e.err
test "$(begun a)" -eq $((na + 1))
test "$(begun b)" -eq $((nb + 1))
kill_nbdkit "$(cat full.pid)"
after_failure b5 b6
next_run b5 b6
