#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# kill -9 of dirtybitmap backup in the middle of a backup of three
# disks, at points chosen at random (each once, in a random order, and
# then more), every point held by the test, never timed:
#   freeze  the freeze command runs (it waits on a FIFO);
#   cut     the servers are paused and one begin is under way (held at
#           the filter's "freeze" pause point on disk c);
#   thaw    the thaw command runs (on a FIFO): every view open, the
#           new checkpoint on every disk, no server paused;
#   copy    the copies to slow targets are under way.
# After each, the servers end what the dead tool began (no server
# paused, no view), and the same command again either succeeds or
# refuses with the exact remedy; then the remedy runs, and the command
# again must succeed.  The base of every incremental is on every disk
# before it runs, and each target equals its disk after it.  (The
# leftovers of a kill -9, made by hand: test-dirtybitmap-backup-left-*.)
#
# ROUNDS (default 6) rounds; SEED chooses the points (printed).
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires nbdkit --filter=delay --filter=log null --version
requires python3 -c 'import nbd'
source "$abs_top_srcdir/tests/machine-lib.sh"

disks="a b c"
mkfifo freeze.reached freeze.release hold.fifo

# release_hold: let a freeze or thaw command that waits on hold.fifo
# go (opened read-write, this never waits for a reader; closed, the
# reader sees its end).
release_hold ()
{
    exec 3<> hold.fifo
    exec 3>&-
}

# At exit (first: before the servers stop), a backup the test did not
# get to kill, and a command it holds.
job=
kill_job ()
{
    if [ -n "$job" ]; then kill -9 $job 2>/dev/null || :; fi
    release_hold
}
cleanup_fn kill_job

for n in $disks; do start_disk $n 8M; done

# args [slow]: the --disk options, each disk into NAME.bak, or into
# the slow target serving it.
args ()
{
    local n
    argv=()
    for n in $disks; do
        if [ "${1:-}" = slow ]; then
            argv+=(--disk "$(disk $n "$(tsock_uri $n)")")
        else
            argv+=(--disk "$(disk $n $n.bak)")
        fi
    done
}

# wait_file FILE: wait (up to 30 s) until FILE exists.
wait_file ()
{
    wait_until 30 [ -e "$1" ] && return 0
    echo "$0: $1 did not appear in 30 s"
    exit 1
}

_all_clean ()
{
    states $disks > clean
    [ "$(grep -c ': paused=false view=none ' clean)" -eq 3 ]
}

# servers_clean: wait (up to 10 s) until no server is paused or has a
# view: the servers end what a dead control client began.
servers_clean ()
{
    wait_until 10 _all_clean && return 0
    cat clean
    echo "$0: a server is still paused, or has a view, 10 s after the" \
         "backup was killed"
    exit 1
}

# on_every_disk BITMAP: BITMAP is on every disk.
on_every_disk ()
{
    states $disks > every
    if [ "$(grep -c " bitmaps=\(.* \)\?$1(" every)" -ne 3 ]; then
        cat every
        echo "$0: bitmap $1 is not on every disk"
        exit 1
    fi
}

# again BASE NEW: the same backup again after a kill: it succeeds, or
# refuses with the remedy (nothing changed), which is run, and then it
# succeeds.
again ()
{
    local r=0
    on_every_disk "$1"
    states $disks > before
    args
    backup "${argv[@]}" --incremental "$1" --checkpoint "$2" \
                --remove-incremental --output=json > again.out 2> again.err ||
        r=$?
    cat again.out again.err
    if [ $r -ne 0 ]; then
        test $r = 1
        states $disks > after
        diff -u before after
        remedy again.err "$2"
        on_every_disk "$1"
        backup "${argv[@]}" --incremental "$1" \
                    --checkpoint "$2" --remove-incremental --output=json \
                    > again.out
    fi
    python3 - "$1" <<'EOF'
import json, sys
d = json.load(open("again.out"))
assert d["result"] == "complete", d
assert d["incremental"] == sys.argv[1], d
assert all(x["mode"] == "incremental" for x in d["disks"]), d
EOF
    no_leftovers $disks
    bitmaps_are "$2" $disks
}

args
backup "${argv[@]}" --checkpoint c1
same_disks $disks
base=c1 k=1

seed=${SEED:-$RANDOM}
echo "SEED=$seed"
RANDOM=$seed
points=(freeze cut thaw copy)
order=()
for p in $(printf '%s\n' "${points[@]}" | shuf --random-source=<(yes $seed)); do
    order+=($p)
done
for (( i = ${#order[@]}; i < ${ROUNDS:-6}; ++i )); do
    order+=(${points[RANDOM % 4]})
done
echo "points: ${order[*]}"

for point in "${order[@]}"; do
    new=c$((k + 1))
    write_some "$point$k" $disks
    rm -f frozen thawing
    extra=()
    args
    case $point in
        freeze)
            extra=(--freeze-command "touch $PWD/frozen; exec cat $PWD/hold.fifo"
                   --thaw-command true) ;;
        cut)
            # c again with the pause point armed (it pauses once); the
            # test, not the tool's clock, ends the cut.
            kill_nbdkit "$(cat c.pid)"
            DIRTYBITMAP_TEST_PAUSE=freeze DIRTYBITMAP_TEST_PAUSE_DIR="$PWD" \
                start_disk c 8M
            extra=(--cut-timeout 30) ;;
        thaw)
            extra=(--freeze-command true
                   --thaw-command "touch $PWD/thawing; exec cat $PWD/hold.fifo") ;;
        copy)
            for n in $disks; do slow_target $n $n.bak 300ms; done
            args slow
            extra=(--requests 1 --connections 1) ;;
    esac
    dirtybitmap backup "${argv[@]}" --incremental $base --checkpoint $new \
                --remove-incremental "${extra[@]}" &
    job=$!
    case $point in
        freeze)
            wait_file frozen
            # Frozen, and nothing paused yet.
            no_leftovers $disks ;;
        cut)
            timeout 30 cat freeze.reached
            state a | grep "^paused=true " ;;
        thaw)
            wait_file thawing
            states $disks > thaw.states
            cat thaw.states
            test "$(grep -c ": paused=false view=backup .* $new(" thaw.states)" -eq 3 ;;
        copy)
            wait_target_busy a.tlog ;;
    esac
    kill9 $job
    job=
    case $point in
        freeze|thaw) release_hold ;;
        cut) timeout 30 sh -c ': > freeze.release' ;;
        copy) for n in $disks; do kill_nbdkit "$(cat $n.tpid)"; done ;;
    esac
    servers_clean
    again $base $new
    same_disks $disks
    base=$new k=$((k + 1))
done
