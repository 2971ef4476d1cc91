#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap backup --guest-agent, against a fake guest agent
# (fake-qga.py) that looks at the disks' servers and the targets when
# it is asked to freeze and to thaw.  The order must be freeze, pause,
# begin, resume, thaw, copy: at the freeze no server is paused and no
# view is open; at the thaw no server is paused, every view is open
# with its new checkpoint, and no target has been written; each
# server paused and resumed once (its log).  A full backup and an
# incremental, then:
#   - a freeze that never answers: thawed (the agent gets the thaw),
#     the backup fails within --freeze-timeout 1 (under 5 s), nothing
#     paused, nothing changed;
#   - SIGTERM while the freeze answer is held, and a second one while
#     the thaw waits for the agent: thawed, nothing paused, nothing
#     changed (from the freeze to the thaw, dirtybitmap(1) says, a
#     second signal, what timeout(1) or a double Ctrl-C sends, is
#     caught like the first);
#   - SIGTERM twice during the cut (every server paused, a begin held
#     at the filter's "freeze" pause point): resumed, thawed, no view,
#     no new checkpoint;
#   - --freeze-command and --thaw-command: the same order; a freeze
#     command that fails, and one that hangs (killed past
#     --freeze-timeout), each followed by the thaw command, and the
#     backup fails.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires python3 -c 'import nbd'
source "$abs_top_srcdir/tests/machine-lib.sh"

disks="a b"
mkfifo freeze.reached freeze.release hold.fifo
start_disk a 8M
start_disk b 8M
write_some 1 $disks
probe_args=(--ctl "$PWD/a.ctl" --ctl "$PWD/b.ctl"
            --target "$PWD/a.bak" --target "$PWD/b.bak")
args=(--disk "$(disk a "$PWD/a.bak")" --disk "$(disk b "$PWD/b.bak")")

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
    python3 - "$@" <<'EOF'
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
EOF
    counts > after.counts
    diff <(awk '{print $1, $2 + 1, $3 + 1}' before.counts) after.counts
}

# unchanged: after a failure, nothing paused, no view, the bitmaps as
# before, and the agent (or the commands) got a thaw after the freeze
# request.
unchanged ()
{
    no_leftovers $disks
    states $disks > after.states
    diff -u before.states after.states
}

# thawed LOG: the thaw was asked for (the request arrived), after the
# freeze.
thawed ()
{
    python3 - "$1" <<'EOF'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
req = [e["execute"] for e in ev if e["event"] == "request"] or \
    ["guest-fsfreeze-" + e["event"] for e in ev]
assert "guest-fsfreeze-freeze" in req, req
assert "guest-fsfreeze-thaw" in req[req.index("guest-fsfreeze-freeze"):], req
EOF
}

# 1. A full backup, then an incremental, frozen by the agent.
agent
before
backup "${args[@]}" --guest-agent "$PWD/qga.sock" \
            --checkpoint c1 --output=json --manifest m1.json > out1.json
cat qga.log out1.json m1.json
ordered qga.log c1
python3 -c '
import json
d = json.load(open("out1.json")); m = json.load(open("m1.json"))
assert d["result"] == "complete" and d["frozen-ms"] > 0, d
assert m["result"] == "complete" and m["cut"]["frozen"] is True, m'
same_disks $disks

write_some 2 $disks
agent
before
backup "${args[@]}" --guest-agent "$PWD/qga.sock" \
            --incremental c1 --checkpoint c2 --remove-incremental > out2
cat qga.log out2
ordered qga.log c2
grep -E '^cut: [0-9.]+ ms \(first pause to last resume\), guest frozen [0-9.]+ ms$' out2
same_disks $disks
bitmaps_are c2 $disks

# 2. A freeze that never answers: thawed, and failed in time.
write_some 3 $disks
agent --hang-freeze
before
r=0
python3 "$moracle" run hang.times \
        timeout --foreground -k 5 60 dirtybitmap backup "${args[@]}" \
        --guest-agent "$PWD/qga.sock" --freeze-timeout 1 \
        --incremental c2 --checkpoint c3 > hang.out 2> hang.err || r=$?
cat qga.log hang.out hang.err
test $r = 1
incomplete hang.err
read -r _ t0 t1 _ < hang.times
echo "failed after $(( (t1 - t0) / 1000000 )) ms"
test $(( t1 - t0 )) -ge 1000000000
test $(( t1 - t0 )) -lt 5000000000
thawed qga.log
counts > after.counts
diff before.counts after.counts
unchanged

# 3. SIGTERM while the agent holds its answer to the freeze: the
# freeze is given up, and the thaw sent at once behind it, on its
# connection (the agent, busy freezing, runs it after the freeze);
# then a second SIGTERM, while the thaw awaits its answer, which must
# not end the backup; then the agent is let go, and must run the thaw.
agent --hold-freeze "$PWD/hold.fifo"
before
timeout --foreground -k 5 60 dirtybitmap backup "${args[@]}" \
        --guest-agent "$PWD/qga.sock" --freeze-timeout 10 \
        --incremental c2 --checkpoint c3 > term1.out 2> term1.err &
job=$!
wait_for_log qga.log '"execute": "guest-fsfreeze-freeze"'
kill -TERM $job
wait_for_log qga.log '"execute": "guest-fsfreeze-thaw"'
kill -TERM $job
release_hold () { exec 3<> hold.fifo; exec 3>&-; }
release_hold
r=0
wait $job || r=$?
cat qga.log term1.out term1.err
test $r = 1
incomplete term1.err
thawed qga.log
test "$(python3 "$qga" status "$PWD/qga.sock")" = thawed
counts > after.counts
diff before.counts after.counts
unchanged

# 4. SIGTERM during the cut: b's begin held at the pause point, both
# servers paused.
kill_nbdkit "$(cat b.pid)"
DIRTYBITMAP_TEST_PAUSE=freeze DIRTYBITMAP_TEST_PAUSE_DIR="$PWD" \
    start_disk b 8M
agent
before
timeout --foreground -k 5 60 dirtybitmap backup "${args[@]}" --guest-agent "$PWD/qga.sock" \
            --cut-timeout 30 --incremental c2 --checkpoint c3 \
            > term2.out 2> term2.err &
job=$!
timeout 30 cat freeze.reached
state a | grep '^paused=true '
kill -TERM $job
kill -TERM $job
timeout 30 sh -c ': > freeze.release'
r=0
wait $job || r=$?
cat qga.log term2.out term2.err
test $r = 1
incomplete term2.err
thawed qga.log
# Each server paused once, and resumed.
counts > after.counts
diff <(awk '{print $1, $2 + 1, $3 + 1}' before.counts) after.counts
unchanged
# The disks are written again.
write_some 4 $disks

# 5. --freeze-command and --thaw-command, in the same order.
probe="python3 $qga probe $PWD/cmd.log"
rm -f cmd.log
before
backup "${args[@]}" \
            --freeze-command "$probe freeze ${probe_args[*]}" \
            --thaw-command "$probe thaw ${probe_args[*]}" \
            --incremental c2 --checkpoint c3 --remove-incremental \
            --output=json > cmd.json
cat cmd.log cmd.json
ordered cmd.log c3
python3 -c '
import json
d = json.load(open("cmd.json"))
assert d["result"] == "complete" and d["frozen-ms"] > 0, d'
same_disks $disks

# A freeze command that fails: thaw command, failure, nothing paused.
write_some 5 $disks
rm -f cmd.log
before
backup_fails fcmd.err "${args[@]}" \
             --freeze-command "echo freeze >> $PWD/cmd.log; exit 3" \
             --thaw-command "echo thaw >> $PWD/cmd.log" \
             --incremental c3 --checkpoint c4
cat cmd.log
test "$(cat cmd.log)" = "$(printf 'freeze\nthaw')"
counts > after.counts
diff before.counts after.counts
unchanged

# A freeze command that hangs: killed past --freeze-timeout, thaw
# command, failure in time.
rm -f cmd.log
before
r=0
python3 "$moracle" run hcmd.times \
        timeout --foreground -k 5 60 dirtybitmap backup "${args[@]}" \
        --freeze-command "echo freeze >> $PWD/cmd.log; exec cat $PWD/hold.fifo" \
        --thaw-command "echo thaw >> $PWD/cmd.log" --freeze-timeout 1 \
        --incremental c3 --checkpoint c4 > hcmd.out 2> hcmd.err || r=$?
release_hold
cat cmd.log hcmd.out hcmd.err
test $r = 1
incomplete hcmd.err
read -r _ t0 t1 _ < hcmd.times
echo "failed after $(( (t1 - t0) / 1000000 )) ms"
test $(( t1 - t0 )) -ge 1000000000
test $(( t1 - t0 )) -lt 5000000000
test "$(cat cmd.log)" = "$(printf 'freeze\nthaw')"
counts > after.counts
diff before.counts after.counts
unchanged

# Nothing was lost on the way: the next backup makes the targets equal
# the disks.
backup "${args[@]}" --incremental c3 --checkpoint c4 \
            --remove-incremental
same_disks $disks
