# SPDX-License-Identifier: BSD-3-Clause
# agent-lib.sh: what the tests of a backup that quiesces the guest
# (dirtybitmap backup --guest-agent, --freeze-command and
# --thaw-command) share, sourced after machine-lib.sh.  A fake guest
# agent (fake-qga.py), or the commands, look at the disks' servers and
# the targets when they are asked to freeze and to thaw.  The order
# must be freeze, pause, begin, resume, thaw, copy: at the freeze no
# server is paused and no view is open; at the thaw no server is
# paused, every view is open with its new checkpoint, and no target
# has been written; each server paused and resumed once (its log).
source "$abs_top_srcdir/tests/machine-lib.sh"

disks="a b"
mkfifo freeze.reached freeze.release hold.fifo
probe_args=(--ctl "$PWD/a.ctl" --ctl "$PWD/b.ctl"
            --target "$PWD/a.bak" --target "$PWD/b.bak")
args=(--disk "$(disk a "$PWD/a.bak")" --disk "$(disk b "$PWD/b.bak")")

# two_disks: disks a and b served and written once.
two_disks ()
{
    start_disk a 8M
    start_disk b 8M
    write_some 1 $disks
}

# after_full: two_disks, a full backup (without freezing: its order is
# test-dirtybitmap-backup-agent-order.sh's) that starts checkpoint c1,
# then more writes: what an incremental from c1 has to copy.
after_full ()
{
    two_disks
    backup "${args[@]}" --checkpoint c1
    same_disks $disks
    write_some 2 $disks
}

# caught_up: nothing was lost on the way: after a failed backup from
# c1, the next one makes the targets equal the disks.
caught_up ()
{
    backup "${args[@]}" --incremental c1 --checkpoint c2 \
           --remove-incremental
    same_disks $disks
    bitmaps_are c2 $disks
}

# counts: how many times each server has paused and resumed (logs).
counts ()
{
    local n
    for n in $disks; do
        echo "$n $(grep -c 'dirtybitmap: paused$' $n.log || :)" \
             "$(grep -c 'dirtybitmap: resumed$' $n.log || :)"
    done
}

# before: the targets and the servers, before a run (before.log,
# before.counts, before.states).
before ()
{
    rm -f before.log
    python3 "$qga" probe before.log before "${probe_args[@]}"
    counts > before.counts
    states $disks > before.states
}

# ordered LOG NEW: in LOG (the agent's, or the commands'), one freeze
# then one thaw, seen as the order requires; each server paused and
# resumed once more than before.
ordered ()
{
    python3 - "$@" <<'EOF2'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
new = sys.argv[2]
before = json.loads(open("before.log").read())
f = [e for e in ev if e["event"] == "freeze"]
t = [e for e in ev if e["event"] == "thaw"]
assert len(f) == 1 and len(t) == 1, ev
f, t = f[0], t[0]
assert f["t"] < t["t"], ev
for s in f["servers"]:
    # Frozen before any pause, any begin.
    assert s["paused"] is False and s["view"] is None, f
    assert new not in s["bitmaps"], f
for s in t["servers"]:
    # Thawed after every begin and every resume.
    assert s["paused"] is False and s["view"] == "backup", t
    assert new in s["bitmaps"], t
# ... and before any copying.
assert t["targets"] == before["targets"], (t["targets"], before["targets"])
req = [e["execute"] for e in ev if e["event"] == "request"]
if req:
    assert req[0] == "guest-sync-delimited", req
    assert req.index("guest-fsfreeze-freeze") < \
        req.index("guest-fsfreeze-thaw"), req
print("freeze, pause, begin, resume, thaw, copy: in order")
EOF2
    counts > after.counts
    diff <(awk '{print $1, $2 + 1, $3 + 1}' before.counts) after.counts
}

# unchanged: after a failure, nothing paused, no view, the bitmaps as
# before.
unchanged ()
{
    no_leftovers $disks
    states $disks > after.states
    diff -u before.states after.states
}

# untouched: after a failure that came before the cut, no server
# paused or resumed since before, and unchanged.
untouched ()
{
    counts > after.counts
    diff before.counts after.counts
    unchanged
}

# commands_ran: the freeze command, then the thaw command, each once
# (each appends its name to cmd.log).
commands_ran ()
{
    cat cmd.log
    test "$(cat cmd.log)" = "$(printf 'freeze\nthaw')"
}

# thawed LOG: the thaw was asked for (the request arrived), after the
# freeze.
thawed ()
{
    python3 - "$1" <<'EOF2'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
req = [e["execute"] for e in ev if e["event"] == "request"] or \
    ["guest-fsfreeze-" + e["event"] for e in ev]
assert "guest-fsfreeze-freeze" in req, req
assert "guest-fsfreeze-thaw" in req[req.index("guest-fsfreeze-freeze"):], req
EOF2
}

# fails_in_time NAME ARGS...: dirtybitmap backup ARGS --freeze-timeout
# 1 fails ("backup incomplete") after that second and within 5
# (timed in NAME.times; stdout and stderr in NAME.out and NAME.err).
fails_in_time ()
{
    local name=$1 r=0 t0 t1
    shift
    python3 "$moracle" run $name.times \
            timeout --foreground -k 5 60 dirtybitmap backup "$@" \
            --freeze-timeout 1 > $name.out 2> $name.err || r=$?
    cat $name.out $name.err
    test $r = 1
    incomplete $name.err
    read -r _ t0 t1 _ < $name.times
    echo "failed after $(( (t1 - t0) / 1000000 )) ms"
    test $(( t1 - t0 )) -ge 1000000000
    test $(( t1 - t0 )) -lt 5000000000
}

# release_hold: let go what waits on hold.fifo.
release_hold () { exec 3<> hold.fifo; exec 3>&-; }
