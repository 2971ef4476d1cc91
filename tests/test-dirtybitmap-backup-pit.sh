#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A backup view is the disk at one point in time, while the disk goes
# on being written.  Two writers write 4K blocks tagged (block,
# version) nonstop and log when each write started and completed; a
# chain of backups (full, then incrementals into the same target) is
# cut and copied meanwhile.  Every block of each backup must hold a
# version the cut allows: no older than the last write completed
# before backup-begin was sent, none started after its reply.  At
# three granularities.
#
# Each cut must also have had writes in flight across it, sent before
# backup-begin and completed after its reply (the oracle fails
# otherwise).  To make that likely, each write takes 50 ms below our
# filter (the delay filter) and each writer keeps 32 requests in
# flight, more than nbdkit's 16 threads per connection: when
# backup-begin comes, some writes are being served (the cut waits for
# them) and others wait in the socket; those wait at the cut and
# complete 50 ms after it, well after the reply.  (The writers run
# niced, so that they do not keep the reply from its reader.)  On a
# loaded machine the writers may still have had nothing in flight at
# a cut: that round is then undone (view ended, its checkpoint
# removed, the target as the round before left it) and cut again, up
# to five times.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires nbdkit --filter=delay null --version
requires python3 -c 'import nbd'

oracle="$abs_top_srcdir/tests/backup-oracle.py"
blocks=8192                                     # 32 MiB
half=$((blocks / 2))
both_running () { [ -s w1.log ] && [ -s w2.log ]; }
# straddle_known: whether a write straddled the last cut can be told
# (backup-oracle.py straddled): 0 (yes) or 1 (no) in $straddle.
straddle_known ()
{
    straddle=0
    python3 "$oracle" straddled cut$round w1.log w2.log || straddle=$?
    [ $straddle != 2 ]
}
end_view ()
{
    printf '{"execute": "backup-end", "arguments": {"name": "view"}}\n' |
        python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(sys.stdin.buffer.read())
r = s.makefile().readline()
assert "return" in r, r
' ctl
}

for g in 4K 64K 1M; do
    rm -f disk.img* backup*.img cut* w*.log stop ctl pid
    truncate -s $((blocks * 4096)) disk.img
    start_nbdkit -P "$PWD/pid" -U "$PWD/sock$g" --filter="$FILTER" \
                 --filter=delay file disk.img wdelay=50ms \
                 bitmap=c0 action=add granularity=$g control="$PWD/ctl"
    uri="nbd+unix:///?socket=$PWD/sock$g"
    view="nbd+unix:///view?socket=$PWD/sock$g"
    nice -n 10 python3 "$oracle" write "$uri" 0 $half w1.log stop 32 &
    w1=$!
    nice -n 10 python3 "$oracle" write "$uri" $half $half w2.log stop 32 &
    w2=$!
    # Both writers running (not merely started: a loaded machine may
    # take seconds to start them) before the first cut.
    wait_until 30 both_running

    # A full backup, then two incrementals into the same target.
    for round in 1 2 3; do
        if [ $round = 1 ]; then
            args='{"name": "view", "checkpoint": "c1"}'
        else
            args="{\"name\": \"view\", \"bitmap\": \"c$((round - 1))\",
                   \"checkpoint\": \"c$round\"}"
        fi
        for (( try = 1; ; ++try )); do
            python3 "$oracle" cut ctl cut$round "$args"
            if [ $round = 1 ]; then
                dirtybitmap copy --full --trim-source "$view" backup.img
            else
                dirtybitmap copy --trim-source "$view" backup.img
            fi
            wait_until 30 straddle_known
            [ $straddle = 0 ] || [ $try = 5 ] && break
            # Nothing was in flight at this cut: undone, cut again.
            end_view
            dirtybitmap bitmap --control ctl --remove c$round
            if [ $round = 1 ]; then rm backup.img
            else cp backup$((round - 1)).img backup.img; fi
        done
        dirtybitmap bitmap --control ctl --remove c$((round - 1))
        end_view
        cp backup.img backup$round.img
        sleep 0.3
    done
    touch stop
    wait $w1
    wait $w2
    for round in 1 2 3; do
        python3 "$oracle" check backup$round.img $blocks cut$round w1.log w2.log
    done
    kill_nbdkit "$(cat pid)"
done
