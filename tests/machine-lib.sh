# SPDX-License-Identifier: BSD-3-Clause
# machine-lib.sh: what the tests of backups of several disks at once
# (dirtybitmap backup --disk ...) share, sourced after functions.sh.
# Disk NAME is NAME.img, served by its own nbdkit through the filter
# on NAME.sock, with its control socket NAME.ctl; nbdkit -v writes to
# NAME.log, so "dirtybitmap: paused" and "resumed" show there (unless
# the test sets disk_verbose= : a debug line per request costs much
# under a writer that does not stop).
disk_verbose=-v
requires_dirtybitmap_filter
requires python3 -c 'import nbd'

moracle="$abs_top_srcdir/tests/machine-oracle.py"
qga="$abs_top_srcdir/tests/fake-qga.py"

# start_disk NAME SIZE [PARAMETER=VALUE...]: create NAME.img of SIZE
# (zeroes) unless it exists, and serve it, with the filter's
# parameters given; its pid is in NAME.pid and $nbdkit_pid.
# (Also a restart after kill -9: nbdkit does not bind a socket that is
# left, the filter replaces its control socket itself.)
start_disk ()
{
    local name=$1 size=$2
    shift 2
    [ -e "$name.img" ] || truncate -s "$size" "$name.img"
    rm -f "$name.sock"
    start_nbdkit_child -P "$PWD/$name.pid" -U "$PWD/$name.sock" $disk_verbose \
                       --filter="$FILTER" file "$name.img" \
                       control="$PWD/$name.ctl" "$@" 2>> "$name.log"
}

# uri NAME: the disk's NBD URI.
uri ()
{
    echo "nbd+unix:///?socket=$PWD/$1.sock"
}

# disk NAME TARGET [MORE]: a --disk value for disk NAME (its name in
# the backup too) copied to TARGET, MORE appended (",scratch=...").
disk ()
{
    echo "control=$PWD/$1.ctl,source=$(uri "$1"),target=$2,name=$1$3"
}

# state NAME: the server's paused flag, view and bitmaps, one line.
state ()
{
    python3 "$moracle" state "$PWD/$1.ctl"
}

# states NAME...: state of each, "NAME: ..." per line.
states ()
{
    local n ctls=()
    for n in "$@"; do ctls+=("$PWD/$n.ctl"); done
    python3 "$moracle" state "${ctls[@]}" |
        paste -d' ' <(printf '%s:\n' "$@") -
}

# write_some SEED NAME...: 16 writes of 4K on each disk NAME, at
# offsets (from SEED and NAME) spread over its first 8M, through the
# filter.
write_some ()
{
    local seed=$1 n uris=()
    shift
    for n in "$@"; do uris+=("$(uri $n)"); done
    python3 - "$seed" "${uris[@]}" <<'EOF2'
import nbd, random, sys
for u in sys.argv[2:]:
    h = nbd.NBD()
    h.connect_uri(u)
    r = random.Random(sys.argv[1] + u)
    for i in range(16):
        h.pwrite(bytes([r.randrange(1, 256)]) * 4096,
                 r.randrange(8 * 1024 * 1024 // 4096) * 4096)
    h.shutdown()
EOF2
}

# no_leftovers NAME...: each server is neither paused nor has a view
# open (the test fails otherwise).
no_leftovers ()
{
    local s
    states "$@" > leftovers
    while read -r s; do
        case "$s" in
            *": paused=false view=none "*) ;;
            *) echo "$0: left paused or with a view: $s"
               exit 1 ;;
        esac
    done < leftovers
}

# bitmaps_are NAMES NAME...: each server has exactly the bitmaps NAMES
# ("b1 b2", in the server's order), each recording and consistent.
bitmaps_are ()
{
    local want="$1" n s got
    shift
    for n in "$@"; do
        s=$(state "$n")
        got=$(echo "$s" | sed 's/.* bitmaps=//; s/([^)]*)//g')
        if [ "$got" != "$want" ]; then
            echo "$0: disk $n: bitmaps '$got', expected '$want'"
            exit 1
        fi
        case "$s" in
            *disabled*|*inconsistent*)
                echo "$0: disk $n: a bitmap is not recording, or" \
                     "inconsistent: $s"
                exit 1 ;;
        esac
    done
}

# incomplete FILE: the last line of FILE (a failed backup's stderr)
# says "backup incomplete" as the spec words it.
incomplete ()
{
    local last
    last=$(tail -n 1 "$1")
    case "$last" in
        "dirtybitmap: backup incomplete:"*) ;;
        *) echo "$0: stderr does not end with 'dirtybitmap: backup" \
                "incomplete:' but with: $last"
           exit 1 ;;
    esac
}

# backup ARGS...: dirtybitmap backup ARGS, bounded: one that hangs
# fails the test (status 124, or 137 if SIGTERM does not end it)
# instead of hanging make check.  (A job that the test signals runs
# "timeout --foreground -k 5 60 dirtybitmap backup" itself: $! is
# timeout's pid, and it passes a SIGTERM on once.  Without
# --foreground it sends it to the process, and again to its process
# group: the tool gets two, and the second ends it at once, as a
# second SIGTERM should.)
backup ()
{
    timeout --foreground -k 5 60 dirtybitmap backup "$@"
}

# backup_fails ERRFILE ARGS...: dirtybitmap backup ARGS must exit 1 and
# end its stderr (in ERRFILE) with "backup incomplete".
backup_fails ()
{
    local err=$1 r=0
    shift
    backup "$@" > "$err.out" 2> "$err" || r=$?
    cat "$err.out" "$err"
    if [ $r -ne 1 ]; then
        echo "$0: dirtybitmap backup exited with status $r, expected 1"
        exit 1
    fi
    incomplete "$err"
}

# remedy ERRFILE NEW: the commands the refusal in ERRFILE says to run,
# one per disk of $disks, exactly "dirtybitmap bitmap --remove
# --control CTL NEW"; they are run.
remedy ()
{
    local n
    grep -oE "dirtybitmap bitmap --remove --control [^ '\"\`]+ [^ '\"\`;,]+" \
         "$1" | sed 's/[.]$//' > remedy.sh
    cat remedy.sh
    for n in $disks; do
        echo "dirtybitmap bitmap --remove --control $PWD/$n.ctl $2"
    done > remedy.expected
    diff -u <(sort remedy.expected) <(sort -u remedy.sh)
    sh -ex remedy.sh
}

# three_backed_up: disks a, b and c served, written, and backed up in
# full with checkpoint c1 into NAME.bak, then written again (what an
# incremental from c1 copies); argv holds the --disk options of that
# backup.
three_backed_up ()
{
    local n
    disks="a b c"
    argv=()
    for n in $disks; do
        start_disk $n 8M
        argv+=(--disk "$(disk $n $n.bak)")
    done
    write_some 1 $disks
    backup "${argv[@]}" --checkpoint c1
    same_disks $disks
    write_some 2 $disks
}

# modes_are JSON "NAME=MODE...": the backup whose --output=json is in
# the file JSON completed, each disk NAME copied as MODE (full,
# incremental, resync).
modes_are ()
{
    python3 - "$@" <<'EOF2'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["result"] == "complete", d
mode = {x["name"]: x["mode"] for x in d["disks"]}
want = dict(w.split("=") for w in sys.argv[2].split())
assert mode == want, (mode, want)
EOF2
}

# job_fails ERRFILE [FILE...]: the backup running as $job exits with
# status 1, its stderr (ERRFILE, shown after each FILE) ending in
# "backup incomplete".
job_fails ()
{
    local err=$1 r=0
    shift
    wait $job || r=$?
    cat "$@" "$err"
    if [ $r -ne 1 ]; then
        echo "$0: dirtybitmap backup exited with status $r, expected 1"
        exit 1
    fi
    incomplete "$err"
}

# same_disks NAME...: with nothing writing, each disk NAME.img equals
# its backup NAME.bak (cmp).
same_disks ()
{
    local n
    for n in "$@"; do
        cmp "$n.img" "$n.bak"
    done
}

# slow_target NAME FILE [DELAY]: serve FILE (a backup target) on
# NAME.tsock, each write held DELAY (default 100ms: the delay filter),
# every request logged to
# NAME.tlog (the log filter, above the delay: a write shows there when
# it arrives, and "...Write" when it is done).  Its pid is in
# NAME.tpid; tsock_uri NAME is its URI.
slow_target ()
{
    rm -f "$1.tlog" "$1.tsock"
    start_nbdkit_child -P "$PWD/$1.tpid" -U "$PWD/$1.tsock" \
                       --filter=log --filter=delay file "$2" \
                       wdelay=${3:-100ms} logfile="$PWD/$1.tlog"
}
tsock_uri ()
{
    echo "nbd+unix:///?socket=$PWD/$1.tsock"
}

# target_writes LOG: how many writes the slow target has completed.
target_writes ()
{
    grep -c '\.\.\.Write .* return=0' "$1" 2>/dev/null || :
}

# wait_target_busy LOG: wait (up to 30 s) until the slow target holds
# a write (it has arrived, it is not done): the copy is under way, and
# the backup waits for the target.  (Both counts from one read of the
# log: read apart, the second catches up with the first.)
wait_target_busy ()
{
    wait_until -i 0.01 30 _target_busy "$1" && return 0
    echo "$0: the slow target $1 held no write in 30 s"
    exit 1
}
_target_busy ()
{
    local log

    log=$(cat "$1" 2>/dev/null || :)
    [ "$(grep -c ' Write id=' <<< "$log")" -gt \
      "$(grep -c '\.\.\.Write .* return=0' <<< "$log")" ]
}

# agent [OPTIONS]: (re)start the fake guest agent (fake-qga.py serve)
# on qga.sock, logging to qga.log (emptied), with OPTIONS and the
# array probe_args (--ctl, --target) if set.
agent_pid=
agent ()
{
    if [ -n "$agent_pid" ]; then
        kill $agent_pid
        wait $agent_pid || :
    fi
    rm -f qga.sock.ready
    : > qga.log
    python3 "$qga" serve "$PWD/qga.sock" "$PWD/qga.log" "$@" \
            ${probe_args+"${probe_args[@]}"} &
    agent_pid=$!
    cleanup_fn kill_nbdkit $agent_pid
    wait_until 10 [ -e qga.sock.ready ] && return 0
    echo "$0: the fake agent did not start"
    exit 1
}
