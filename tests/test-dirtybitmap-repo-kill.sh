#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A backup into a repository killed with SIGKILL (by gdb, at a chosen
# step) leaves no point: list shows the earlier points only, each
# still restores exactly, no qemu-nbd of it is left running, and the
# next backup removes what it left (its files, its checkpoint on the
# servers), says so, and succeeds (an incremental from the newest
# point), its point exact.  The steps: after the cut, before the
# images (the server drops the checkpoint with the view); the images
# made and served, before the copy; the checkpoint committed by the
# servers, before the checksums are put in place; and just before the
# point's record.  Killed once the record is written (before the base
# checkpoint is removed), the point exists and the next backup removes
# the stale checkpoint.
source ./functions.sh
set -e
set -x
requires gdb --version
source "$abs_top_srcdir/tests/repo-lib.sh"

tool=$(command -v dirtybitmap)
start_disk a 8M
start_disk b 8M
write_some 1 a b
rbackup c1 a b
snapshot a c1
snapshot b c1
write_some 2 a b
rbackup c2 a b
snapshot a c2
snapshot b c2

# killed_at FUNCTION NEW: backup --repo of a and b as point NEW,
# killed (SIGKILL) by gdb when the tool reaches FUNCTION.
killed_at ()
{
    local fn=$1 new=$2
    gdb -q -batch -ex "break $fn" -ex run -ex kill \
        --args "$tool" backup --repo "$repo" --checkpoint "$new" \
        --disk "control=$PWD/a.ctl,source=$(uri a),name=a" \
        --disk "control=$PWD/b.ctl,source=$(uri b),name=b" \
        > "gdb-$fn.log" 2>&1 || :
    cat "gdb-$fn.log"
    grep -Eq "Breakpoint 1(\.[0-9]+)?, $fn " "gdb-$fn.log"
}

# intact POINT...: each point restores each disk exactly.
intact ()
{
    local p d
    for p in "$@"; do
        for d in a b; do restored $p $d out.img; done
    done
}

# no_server: no qemu-nbd serves an image of the repository.
no_qemu_nbd ()
{
    if pgrep -f "$repo/disks/" > /dev/null; then
        return 1
    fi
}
no_server ()
{
    wait_until 5 no_qemu_nbd && return 0
    echo "$0: a qemu-nbd of the killed backup still runs"
    pgrep -af "$repo/disks/"
    exit 1
}

points="c1 c2"
n=3
for fn in points_images copies_run checksums_publish repo_point_write; do
    write_some $n a b
    killed_at $fn c$n
    no_server
    ls -lR R
    points_are "$points"
    intact "${points##* }"
    # The next backup, under the same name, cleans up and succeeds.
    rbackup c$n a b -- --output=json > next.json 2> next.err
    cat next.json next.err
    case $fn in
        points_images) ;;       # nothing was left
        *) grep -F "dirtybitmap: backup: $repo: removed the files of point c$n, left by a backup that did not complete" next.err ;;
    esac
    case $fn in
        checksums_publish|repo_point_write)
            # The servers had committed c$n: it was removed, then made again.
            for d in a b; do
                grep -F "dirtybitmap: backup: disk $d: removed checkpoint c$n, left by a backup that did not complete" next.err
            done ;;
    esac
    python3 -c '
import json
j = json.load(open("next.json"))
assert [d["mode"] for d in j["disks"]] == ["incremental"] * 2, j'
    snapshot a c$n
    snapshot b c$n
    points="$points c$n"
    points_are "$points"
    bitmaps_are c$n a b
    intact c$n
    n=$((n + 1))
done

# Killed once the point's record is written: the point is there, and
# its base's checkpoint is still on the servers, until the next backup.
write_some $n a b
killed_at cut_remove_base c$n
no_server
snapshot a c$n
snapshot b c$n
points="$points c$n"
points_are "$points"
bitmaps_are "c$((n - 1)) c$n" a b
write_some $((n + 1)) a b
rbackup c$((n + 1)) a b 2> next.err
cat next.err
for d in a b; do
    grep -F "dirtybitmap: backup: disk $d: removed checkpoint c$((n - 1)), left by a backup that did not complete" next.err
done
bitmaps_are c$((n + 1)) a b
snapshot a c$((n + 1))
snapshot b c$((n + 1))
points="$points c$((n + 1))"
points_are "$points"

# Every point restores exactly.
intact $points
