#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# kill -9 of one server at each step of a machine's cut that does not
# wait for its writers (the filter's pause points hold its control
# thread there, never a sleep):
#   cut-prepared   its backup-prepare done, no server paused yet;
#   cut-commit     the cut made and every server resumed, its
#                  checkpoint not committed yet (before the header);
#   cut-committed  its checkpoint committed, the query not answered.
# Each time the backup fails and says so (exit 1, "backup
# incomplete"), the other disk is left with no view, no pause and no
# new checkpoint; the killed disk, started again, has the checkpoint
# only if it was committed, and the next run (which removes it then)
# succeeds, every target equal to its disk.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires python3 -c 'import nbd'
source "$abs_top_srcdir/tests/machine-lib.sh"

disks="a b"
start_disk a 8M
start_disk b 8M

args ()
{
    local n
    argv=()
    for n in $disks; do argv+=(--disk "$(disk $n $n.bak)"); done
}

args
backup "${argv[@]}" --checkpoint c1
same_disks $disks
base=c1 k=1

for point in cut-prepared cut-commit cut-committed; do
    new=c$((k + 1))
    # b again, with the point armed (it pauses once).
    kill_nbdkit "$(cat b.pid)"
    rm -f $point.reached $point.release
    mkfifo $point.reached $point.release
    DIRTYBITMAP_TEST_PAUSE=$point DIRTYBITMAP_TEST_PAUSE_DIR="$PWD" \
        start_disk b 8M
    bpid=$nbdkit_pid
    write_some $point $disks
    args
    timeout --foreground -k 5 60 dirtybitmap backup "${argv[@]}" \
            --incremental $base --checkpoint $new --cut-timeout 30 \
            > $point.out 2> $point.err &
    job=$!
    timeout 30 cat $point.reached
    case $point in
        cut-prepared) state a | grep "^paused=false view=none " ;;
        *) state a | grep "^paused=false view=backup " ;;
    esac
    kill9 $bpid
    r=0
    wait $job || r=$?
    cat $point.out $point.err
    test $r = 1
    incomplete $point.err
    start_disk b 8M
    no_leftovers $disks
    bitmaps_are $base a
    if [ $point = cut-committed ]; then
        state b | grep -F " $new("
    elif state b | grep -F " $new("; then
        echo "$0: $point: $new is on disk b, whose commit never came"
        exit 1
    fi
    # The next run (it removes the checkpoint left on b).
    args
    backup "${argv[@]}" --incremental $base --checkpoint $new \
           --remove-incremental 2> next.err
    cat next.err
    if [ $point = cut-committed ]; then
        grep -Fx "dirtybitmap: backup: disk b: removed checkpoint $new left by an incomplete backup" next.err
    fi
    same_disks $disks
    no_leftovers $disks
    bitmaps_are $new $disks
    base=$new k=$((k + 1))
done
