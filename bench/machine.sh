#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/machine.sh: backing up a machine's disks at one cut
# (dirtybitmap backup with several --disk), side by side in one run.
#
#   bench/machine.sh [--parts=cut,steps,copy,callgrind] [--runtime=SECONDS] [--cuts=N]
#                    [--cut-size=SIZE] [--rounds=N] [--size=MIB]
#                    [--dir=DIR] [--shm=DIR]
#
# Parts (all by default):
#
#   cut   4 disks of 1 TiB (--cut-size), each served by its own
#         nbdkit (null plugin, the filter, bitmap c0, granularity 64K,
#         control socket, bitmap files in DIR), and one fio with one
#         job per disk, 4K random writes, QD16, for --runtime seconds
#         (default 80).  The writes go at random over a 64K granule in
#         every 2 GiB of each disk (fio zonemode=strided), so every
#         page of every bitmap is written between two cuts but an
#         incremental backup copies at most 512 granules (32 MiB) per
#         1 TiB disk.  Three cells, each with fresh servers:
#         without-a (no cuts), with, without-b (the A/A pair).  In
#         "with", from 3 s on and until 3 s before
#         the end, back to back (0.1 s apart, at least --cuts, default
#         50): dirtybitmap backup --disk x4 --checkpoint cN
#         --incremental c(N-1) --remove-incremental --output=json
#         --manifest, targets and scratch in SHM (tmpfs); a cut that
#         fails is counted and shown, and the next one starts again
#         from the last good checkpoint.  Reports the
#         window of each cut (JSON "cut-ms": first pause sent to last
#         resume answered), and for each cut the longest latency of a
#         write whose time in flight overlapped the window (fio's
#         per-write latency log, Unix timestamps, against the
#         manifest's cut time); the same windows laid on the A/A cells
#         at the same offsets give what the writers see there without
#         a cut; every cell's pooled latency percentiles; and each
#         cell's stalls, its writes over 100 ms (those in flight at
#         the same time counted once): whether the cuts add any.  A
#         fourth cell, idle, makes --cuts cuts of the same servers
#         with no writer: the window's floor.
#   callgrind (not among the defaults; needs valgrind) the
#         instructions one server spends in each step of a cut:
#         backup_prepare, backup_begin (the only one inside the
#         window) and backup_finish_pending (the commit after the
#         resume), each with all it calls, counted by callgrind over
#         --cuts cuts of an incremental view (null --cut-size, bitmap
#         at 64K, nothing written), per cut: exact and repeatable,
#         unlike the times of "steps".
#   steps The cut's steps timed one by one by a client of the control
#         sockets that makes them as dirtybitmap backup does
#         (backup-prepare each server, pause every server without a
#         sync, backup-begin on each, resume each, query each, which
#         answers once the checkpoint is committed; a filter without
#         backup-prepare is paused with a sync and not prepared; each
#         step sent to all, then the replies awaited), --cuts times, with
#         the CPU time and the page faults of each server during
#         backup-begin: one server of 1 GiB, 64 GiB and 1 TiB, idle;
#         four of 1 TiB, idle and under the writers of "cut".
#   copy  4 disks of --size MiB (default 1024) full of random data in
#         DIR, backed up (full) five ways per round, each cell with
#         fresh servers and targets, the page cache dropped first,
#         every target checked with cmp:
#           together     one dirtybitmap backup with 4 --disk
#           serial       4 dirtybitmap backup runs, one after the other
#           nbdcopy      4 nbdcopy --flush runs, one after the other,
#                        of the disks served without the filter
#           nbdcopy-par  the same 4 nbdcopy runs at once
#           together2    together again (the A/A row)
#         --rounds (default 6) rounds, order reversed every other
#         round; medians of per-round ratios.
#
# Needs fio with the nbd engine, nbdcopy, nbdinfo and python3 (Debian:
# fio, libnbd-bin).  Read BENCHMARKS.md for the method; BENCH-NOTES
# for the noise.
set -e
shopt -s inherit_errexit
export LC_ALL=C
export PATH="/usr/sbin:/usr/bin:/sbin:/bin:$PATH"

prog=bench/machine.sh
here="$(cd "$(dirname "$0")" && pwd)"
top="$(cd "$here/.." && pwd)"
basedir="${TMPDIR:-/tmp}"
. "$here/common.sh"

parts=cut,steps,copy
runtime=80
cuts=50
cut_size=1T
rounds=6
size_mib=1024
shm=/dev/shm
for arg in "$@"; do
    case "$arg" in
        --parts=*) parts="${arg#*=}" ;;
        --runtime=*) runtime="${arg#*=}" ;;
        --cuts=*) cuts="${arg#*=}" ;;
        --cut-size=*) cut_size="${arg#*=}" ;;
        --rounds=*) rounds="${arg#*=}" ;;
        --size=*) size_mib="${arg#*=}" ;;
        --dir=*) basedir="${arg#*=}" ;;
        --shm=*) shm="${arg#*=}" ;;
        -h|--help) sed -n '3,/^set -e/p' "$0" | sed 's/^# \{0,1\}//;$d'; exit 0 ;;
        *) echo "$prog: unknown option $arg (see --help)" >&2; exit 1 ;;
    esac
done
find_built
for p in fio nbdcopy nbdinfo python3; do
    command -v $p >/dev/null || { echo "$prog: needs $p" >&2; exit 1; }
done
work="$(mktemp -d "$basedir/dirtybitmap-machine.XXXXXX")"
fast="$(mktemp -d "$shm/dirtybitmap-machine.XXXXXX")"
trap 'for p in "$work"/*/*.pid; do [ -s "$p" ] && kill "$(cat "$p")" 2>/dev/null; done; rm -rf "$work" "$fast"' EXIT
log="$work/log"
{ echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "command: $prog $*"; machine_info
  echo "fs of $shm (targets, scratch): $(findmnt -n -o FSTYPE -T "$shm" | head -1)"; echo; } | tee "$log"

# stop PIDFILE
stop () {
    local pid
    pid=$(cat "$1" 2>/dev/null) || return 0
    kill "$pid" 2>/dev/null || :
    while alive "$pid"; do sleep 0.05; done
    rm -f "$1"
}
median () { python3 -c 'import statistics,sys; print(round(statistics.median(float(x) for x in sys.argv[1:]), 3))' "$@"; }
now () { date +%s.%N; }
# say LINE...: to the terminal and the log.
say () { echo "$@" | tee -a "$log"; }

disks=(0 1 2 3)
# The writers of the cut and steps parts: 4K random writes, QD16, over
# one 64K granule in every 2 GiB (fio moves to the next after 64K).
fio_args=(--ioengine=nbd --rw=randwrite --bs=4k --iodepth=16
          --norandommap --time_based
          --zonemode=strided --zonerange=64k --zonesize=64k
          --zoneskip=$(( (2 << 30) - (64 << 10) ))
          --log_unix_epoch=1 --group_reporting --output-format=json)

# --- cut ---------------------------------------------------------------
if [[ ,$parts, == *,cut,* ]]; then
    say "## cut: 4 disks of $cut_size (null), fio 4K random writes QD16 on each, ${runtime}s per cell"
    for cell in without-a with without-b idle; do
        w="$work/$cell"; f="$fast/$cell"; mkdir -p "$w" "$f"
        disk_args=(); jobs=()
        for i in "${disks[@]}"; do
            server=(nbdkit -P "$w/$i.pid" -U "$w/$i.sock" --filter="$FILTER"
                    null $cut_size bitmap-file="$w/$i.bitmaps" bitmap=c0 action=add
                    granularity=64K control="$w/$i.ctl")
            [ $cell != without-a ] || [ $i != 0 ] || echo "server: ${server[*]}" >> "$log"
            "${server[@]}" </dev/null 2>"$w/$i.log"
            truncate -s $cut_size "$f/$i.img"
            disk_args+=(--disk "control=$w/$i.ctl,source=nbd+unix:///?socket=$w/$i.sock,target=$f/$i.img")
            jobs+=(--name=disk$i --uri="nbd+unix:///?socket=$w/$i.sock")
        done
        for i in "${disks[@]}"; do wait_socket "$w/$i.ctl"; done
        [ $cell != without-a ] ||
            echo "fio: fio ${fio_args[*]} --runtime=$runtime --write_lat_log=CELL/lat --output=CELL/fio.json ${jobs[*]}" >> "$log"
        start=$(now)
        if [ $cell != idle ]; then
            fio "${fio_args[@]}" --runtime="$runtime" --write_lat_log="$w/lat" --output="$w/fio.json" \
                "${jobs[@]}" >/dev/null &
            fio=$!
        fi
        if [ $cell = with ] || [ $cell = idle ]; then
            [ $cell = idle ] || sleep 3
            # A cut that fails (past --cut-timeout, say) is counted, and
            # the next one starts again from the last good checkpoint.
            n=0 base=c0
            while python3 -c "import sys; sys.exit(not ($n < $cuts or ('$cell' == 'with' and $(now) < $start + $runtime - 3)))"; do
                n=$((n + 1))
                [ $n != 1 ] || [ $cell != with ] || echo "cut: $DIRTYBITMAP backup ${disk_args[*]} --scratch $f --checkpoint c$n --incremental $base --remove-incremental --output=json --manifest $w/cut$n.manifest" >> "$log"
                if "$DIRTYBITMAP" backup "${disk_args[@]}" --scratch "$f" \
                       --checkpoint c$n --incremental $base \
                       --remove-incremental --output=json \
                       --manifest "$w/cut$n.manifest" > "$w/cut$n.json" \
                       2> "$w/cut$n.err"; then
                    base=c$n
                fi
                sleep 0.1
            done
            if [ $cell = with ] && ! alive $fio; then
                echo "$prog: fio ended before the last cut: give a longer --runtime" >&2
                exit 1
            fi
        fi
        [ $cell = idle ] || wait $fio
        for i in "${disks[@]}"; do stop "$w/$i.pid"; done
        rm -rf "$f"
    done
    python3 - "$work" "$cuts" <<'EOF' | tee -a "$log"
import array, bisect, datetime, glob, json, math, os, statistics, sys
work, want = sys.argv[1], int(sys.argv[2])

def pct(v, p):
    """Nearest rank: the smallest value with p% of the values at or below."""
    v = sorted(v)
    return v[max(0, math.ceil(p / 100 * len(v)) - 1)]

def writes(cell):
    """Every write of the cell, by completion: (completion ms, latency ms)."""
    w = []
    for name in glob.glob(os.path.join(work, cell, "lat_lat.*.log")):
        for line in open(name):
            t, ns = line.split(",")[:2]
            w.append((int(t), int(ns) / 1e6))
    w.sort()
    ends, lats = array.array("q", (x[0] for x in w)), array.array("d", (x[1] for x in w))
    return ends, lats

def longest(ends, lats, lat_max, t0, t1):
    """The longest latency of a write in flight at some time in [t0, t1]
    (ms; fio's timestamps have 1 ms steps: 1 ms of slack each side)."""
    i = bisect.bisect_left(ends, t0 - 1)
    j = bisect.bisect_right(ends, t1 + lat_max + 1)
    m = 0.0
    for k in range(i, j):
        if ends[k] - lats[k] <= t1 + 1:
            m = max(m, lats[k])
    return m

cells = {}
for cell in ("without-a", "with", "without-b"):
    ends, lats = writes(cell)
    fio = json.load(open(os.path.join(work, cell, "fio.json")))
    iops = fio["jobs"][0]["write"]["iops"]
    lat_max = max(lats)
    cells[cell] = (ends, lats, lat_max, ends[0] - lats[0])
    s = sorted(lats)
    print("%-9s %6.0f IOPS (4 disks); write latency p99 %.2f ms, p99.9 %.2f ms, "
          "p99.99 %.2f ms, max %.2f ms" % (cell, iops, pct(s, 99),
                                           pct(s, 99.9), pct(s, 99.99),
                                           lat_max))
    del s

def read_cuts(cell):
    """The cuts made (complete or not), and the first error of each
    that failed."""
    cuts, failed, n = [], [], 1
    while os.path.exists(os.path.join(work, cell, "cut%d.json" % n)):
        base = os.path.join(work, cell, "cut%d" % n)
        j = json.load(open(base + ".json"))
        if j["result"] != "complete":
            err = open(base + ".err").read().splitlines()
            failed.append("cut %d: %s" % (n, err[0] if err else j["error"]))
        if j["cut-ms"] is not None:
            m = json.load(open(base + ".manifest"))
            t = datetime.datetime.strptime(m["cut"]["time"],
                                           "%Y-%m-%dT%H:%M:%S.%fZ")
            t = t.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000
            cuts.append((t, j["cut-ms"], j["bytes-copied"] + j["bytes-zeroed"],
                         j["seconds"]))
        n += 1
    return cuts, failed

cuts, failed = read_cuts("with")
for f in failed:
    print("failed: " + f)
win = [c[1] for c in cuts]
print("cuts: %d (want >= %d), %d failed; each copied (or zeroed) a median %.1f MiB "
      "over 4 disks in %.3f s" % (
          len(cuts), want, len(failed),
          statistics.median(c[2] for c in cuts) / 2**20,
          statistics.median(c[3] for c in cuts)))
print("cut window (first pause sent to last resume answered): median %.1f ms, "
      "p99 %.1f ms, max %.1f ms  (target p99 < 50 ms)"
      % (statistics.median(win), pct(win, 99), max(win)))
ends, lats, lat_max, first = cells["with"]
stall = [longest(ends, lats, lat_max, t, t + ms) for t, ms, _, _ in cuts]
print("longest write in flight during each cut: median %.1f ms, p99 %.1f ms, "
      "max %.1f ms  (target < 100 ms)"
      % (statistics.median(stall), pct(stall, 99), max(stall)))
for cell in ("without-a", "without-b"):
    ends2, lats2, lat_max2, first2 = cells[cell]
    s = [longest(ends2, lats2, lat_max2, t - first + first2, t - first + first2 + ms)
         for t, ms, _, _ in cuts]
    print("  the same windows laid on %s (no cut): median %.1f ms, p99 %.1f ms,"
          " max %.1f ms" % (cell, statistics.median(s), pct(s, 99), max(s)))
def stall_events(ends, lats, over):
    """The writes of a cell slower than over ms, those in flight at the
    same time counted once: (count, the longest)."""
    ev = sorted((e - l, e, l) for e, l in zip(ends, lats) if l > over)
    n, end, top = 0, None, 0.0
    for s, e, l in ev:
        if end is None or s > end:
            n += 1
            end = e
        end = max(end, e)
        top = max(top, l)
    return n, top
print("stalls (writes over 100 ms, those in flight together counted once), "
      "per cell: " + ", ".join(
          "%s %d (longest %.0f ms)" % ((c,) + stall_events(cells[c][0], cells[c][1], 100))
          for c in ("without-a", "with", "without-b")))
idle, failed = read_cuts("idle")
idle = [c[1] for c in idle]
print("idle (the same servers, no writer), %d cuts, %d failed: window "
      "median %.1f ms, p99 %.1f ms, max %.1f ms"
      % (len(idle), len(failed), statistics.median(idle), pct(idle, 99),
         max(idle)))
for f in failed:
    print("failed: " + f)
print("p99 over %d cuts is the %s value (nearest rank)"
      % (len(cuts), "largest" if math.ceil(0.99 * len(cuts)) == len(cuts)
         else "%dth smallest" % math.ceil(0.99 * len(cuts))))
with open(os.path.join(work, "cuts.tsv"), "w") as f:
    f.write("cut\twindow_ms\tlongest_write_ms\tbytes\tseconds\n")
    for k, (c, s) in enumerate(zip(cuts, stall), 1):
        f.write("%d\t%.3f\t%.3f\t%d\t%.3f\n" % (k, c[1], s, c[2], c[3]))
EOF
    say
fi

# --- steps -------------------------------------------------------------
# The cut's steps one by one, made as dirtybitmap backup makes them
# (each request sent to every server, then the replies awaited), with
# the CPU time (every thread, /proc/PID/task/*/schedstat) and the
# minor page faults (/proc/PID/stat) each server spends in backup-begin.
steps_client () {
    python3 - "$@" <<'EOF'
import glob, json, socket, statistics, sys, time
n, scratch, servers = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
conns, pids = [], []
for x in servers:
    ctl, pid = x.split(":")
    s = socket.socket(socket.AF_UNIX); s.connect(ctl)
    conns.append(s.makefile("rw")); pids.append(pid)
def cpu_faults():
    ns = faults = 0
    for pid in pids:
        for t in glob.glob("/proc/%s/task/*/schedstat" % pid):
            try:
                ns += int(open(t).read().split()[0])
            except OSError:
                pass
        faults += int(open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1].split()[7])
    return ns / 1e6, faults
last = {}
def step(cmd, args=None):
    """The step's time (ms); last[cmd]: when each server's reply was
    read, from the send (read in order: a slow server shows as the
    first long one)."""
    req = {"execute": cmd}
    if args is not None:
        req["arguments"] = args
    t = time.monotonic()
    for f in conns:
        f.write(json.dumps(req) + "\n"); f.flush()
    last[cmd] = []
    for f in conns:
        r = json.loads(f.readline())
        assert "return" in r, r
        last[cmd].append((time.monotonic() - t) * 1000)
    return (time.monotonic() - t) * 1000
# A filter that knows backup-prepare (else: CommandNotFound) is cut as
# dirtybitmap backup cuts it: prepared first, paused without a sync,
# and after the resume a query, answered once the checkpoint is
# committed.
for f in conns:
    f.write(json.dumps({"execute": "backup-prepare"}) + "\n"); f.flush()
prepare = all([json.loads(f.readline())["error"]["class"] != "CommandNotFound"
               for f in conns])
v = {k: [] for k in ("prepare", "pause", "begin", "resume", "window",
                     "commit", "cpu", "faults")}
slow = []
for k in range(1, n + 1):
    args = {"name": "v", "bitmap": "c%d" % (k - 1), "checkpoint": "c%d" % k,
            "scratch": scratch, "end-on-disconnect": True}
    v["prepare"].append(step("backup-prepare", args) if prepare else 0)
    t = time.monotonic()
    v["pause"].append(step("pause", {"sync": False} if prepare else None))
    c0, f0 = cpu_faults()
    v["begin"].append(step("backup-begin", args))
    c1, f1 = cpu_faults()
    v["resume"].append(step("resume"))
    v["window"].append((time.monotonic() - t) * 1000)
    slow.append((v["window"][-1], k, {c: last[c] for c in
                                      ("pause", "backup-begin", "resume")}))
    v["commit"].append(step("query"))
    v["cpu"].append((c1 - c0) / len(pids))
    v["faults"].append((f1 - f0) / len(pids))
    step("backup-end", {"name": "v"})
    step("transaction", {"actions": [{"action": "remove", "bitmap": "c%d" % (k - 1)}]})
    time.sleep(0.1)
m = {k: statistics.median(x) for k, x in v.items()}
print("prepare %5.1f  pause %6.1f  begin %6.1f  resume %5.1f  window %6.1f "
      "(max %6.1f)  query %5.1f ms;  begin per server: CPU %5.1f ms, %5.0f "
      "page faults"
      % (m["prepare"], m["pause"], m["begin"], m["resume"], m["window"],
         max(v["window"]), m["commit"], m["cpu"], m["faults"]))
# The two slowest cuts, step by step: each server's reply, in ms from
# the step's send.
for w, k, st in sorted(slow, reverse=True)[:2]:
    print("     slow cut %d: window %.1f ms: %s" % (k, w, ";  ".join(
        "%s %s" % (c, " ".join("%.1f" % x for x in st[c])) for c in st)))
EOF
}

if [[ ,$parts, == *,steps,* ]]; then
    say "## steps: the cut's steps, $cuts cuts per line (medians, ms)"
    for setup in 1G:1:idle 64G:1:idle 1T:1:idle 1T:4:idle 1T:4:fio; do
        IFS=: read -r size nr load <<< "$setup"
        w="$work/steps"; f="$fast/steps"; rm -rf "$w" "$f"; mkdir -p "$w" "$f"
        srv=(); jobs=()
        for (( i = 0; i < nr; ++i )); do
            nbdkit -P "$w/$i.pid" -U "$w/$i.sock" --filter="$FILTER" \
                   null $size bitmap-file="$w/$i.bitmaps" bitmap=c0 \
                   action=add granularity=64K control="$w/$i.ctl" \
                   </dev/null 2>/dev/null
            jobs+=(--name=disk$i --uri="nbd+unix:///?socket=$w/$i.sock")
        done
        for (( i = 0; i < nr; ++i )); do
            wait_socket "$w/$i.ctl"
            srv+=("$w/$i.ctl:$(cat "$w/$i.pid")")
        done
        if [ $load = fio ]; then
            fio "${fio_args[@]}" --runtime=3600 \
                --output="$w/fio.json" "${jobs[@]}" >/dev/null &
            fio=$!
            sleep 3
        fi
        line=$(steps_client "$cuts" "$f" "${srv[@]}")
        if [ $load = fio ]; then kill $fio 2>/dev/null || :; wait $fio || :; fi
        for (( i = 0; i < nr; ++i )); do stop "$w/$i.pid"; done
        say "$(printf '%-4s x%d %-4s %s' $size $nr $load "$line")"
    done
    say
fi

# --- callgrind ---------------------------------------------------------
if [[ ,$parts, == *,callgrind,* ]]; then
    command -v valgrind >/dev/null || { echo "$prog: needs valgrind" >&2; exit 1; }
    w="$work/cg"; f="$fast/cg"; rm -rf "$w" "$f"; mkdir -p "$w" "$f"
    valgrind --tool=callgrind --callgrind-out-file="$w/cg.out" \
             --toggle-collect=backup_begin \
             --toggle-collect=backup_prepare \
             --toggle-collect=backup_finish_pending \
             nbdkit -f -U "$w/0.sock" --filter="$FILTER" \
             null $cut_size bitmap-file="$w/0.bitmaps" bitmap=c0 \
             action=add granularity=64K control="$w/0.ctl" \
             </dev/null 2>"$w/valgrind.log" &
    vg=$!
    # (valgrind starts slowly: up to a minute.)
    for (( i = 0; i < 1200; ++i )); do [ -S "$w/0.ctl" ] && break; sleep 0.05; done
    wait_socket "$w/0.ctl"
    steps_client "$cuts" "$f" "$w/0.ctl:$vg" >/dev/null
    kill $vg; wait $vg || :
    total=$(callgrind_annotate "$w/cg.out" 2>/dev/null |
            sed -n 's/^ *\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,)
    say "## callgrind: backup-begin of one $cut_size server (64K), $cuts begins"
    say "instructions per cut (prepare, begin, commit): $(( total / cuts ))"
    # Each step alone (inclusive): only backup_begin is inside the window.
    for fn in backup_prepare backup_begin backup_finish_pending; do
        n=$(callgrind_annotate --inclusive=yes --threshold=100 "$w/cg.out" 2>/dev/null |
            awk -v f=":$fn( |$)" '$0 ~ f { gsub(",", "", $1); print $1; exit }')
        say "  $fn: $(( ${n:-0} / cuts )) per cut"
    done
    callgrind_annotate --inclusive=yes "$w/cg.out" 2>/dev/null |
        sed -n '/file:function/,$p' | grep -v '???:' | sed -n '2,16p' |
        tee -a "$log"
    say
fi

# --- copy --------------------------------------------------------------
if [[ ,$parts, == *,copy,* ]]; then
    say "## copy: 4 disks of $size_mib MiB full of data, $rounds rounds"
    src="$work/src"; mkdir -p "$src"
    for i in "${disks[@]}"; do
        head -c $((size_mib << 20)) /dev/urandom > "$src/$i.img"
    done
    cells=(together serial nbdcopy nbdcopy-par together2)
    declare -A t
    # serve CELL-DIR filter|plain: one server per disk.
    serve () {
        local i
        for i in "${disks[@]}"; do
            if [ $2 = filter ]; then
                nbdkit -P "$1/$i.pid" -U "$1/$i.sock" --filter="$FILTER" \
                       file "$src/$i.img" bitmap-file="$1/$i.bitmaps" \
                       control="$1/$i.ctl" </dev/null 2>/dev/null
            else
                nbdkit -P "$1/$i.pid" -U "$1/$i.sock" -r file "$src/$i.img"
            fi
        done
        for i in "${disks[@]}"; do
            wait_socket "$1/$i.sock"
            nbdinfo --size "nbd+unix:///?socket=$1/$i.sock" >/dev/null
        done
    }
    for (( r = 1; r <= rounds; ++r )); do
        order=("${cells[@]}")
        if (( r % 2 == 0 )); then
            order=(); for (( k = ${#cells[@]} - 1; k >= 0; --k )); do order+=("${cells[$k]}"); done
        fi
        line="round $r:"
        for c in "${order[@]}"; do
            w="$work/copy"; rm -rf "$w"; mkdir -p "$w"
            case $c in nbdcopy*) serve "$w" plain ;; *) serve "$w" filter ;; esac
            sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || :
            s=$(now)
            case $c in
                together*)
                    args=()
                    for i in "${disks[@]}"; do
                        args+=(--disk "control=$w/$i.ctl,source=nbd+unix:///?socket=$w/$i.sock,target=$w/$i.out")
                    done
                    "$DIRTYBITMAP" backup "${args[@]}" --checkpoint c1 >/dev/null ;;
                serial)
                    for i in "${disks[@]}"; do
                        "$DIRTYBITMAP" backup --control "$w/$i.ctl" --checkpoint c1 \
                            "nbd+unix:///?socket=$w/$i.sock" "$w/$i.out" >/dev/null
                    done ;;
                nbdcopy)
                    for i in "${disks[@]}"; do
                        nbdcopy --flush "nbd+unix:///?socket=$w/$i.sock" "$w/$i.out"
                    done ;;
                nbdcopy-par)
                    pids=()
                    for i in "${disks[@]}"; do
                        nbdcopy --flush "nbd+unix:///?socket=$w/$i.sock" "$w/$i.out" &
                        pids+=($!)
                    done
                    for p in "${pids[@]}"; do wait $p; done ;;
            esac
            e=$(now)
            t[$c,$r]=$(python3 -c "print(round($e - $s, 3))")
            for i in "${disks[@]}"; do
                stop "$w/$i.pid"
                cmp "$src/$i.img" "$w/$i.out"
            done
            line="$line $c=${t[$c,$r]}s"
        done
        say "$line"
    done
    # ratio A B: median over the rounds of time B / time A (the speed of
    # A relative to B).
    ratio () {
        local r v=()
        for (( r = 1; r <= rounds; ++r )); do
            v+=("$(python3 -c "print(${t[$2,$r]} / ${t[$1,$r]})")")
        done
        median "${v[@]}"
    }
    secs () {
        local r v=()
        for (( r = 1; r <= rounds; ++r )); do v+=("${t[$1,$r]}"); done
        median "${v[@]}"
    }
    {
        echo "median seconds: together $(secs together), serial $(secs serial)," \
             "nbdcopy $(secs nbdcopy), nbdcopy-par $(secs nbdcopy-par), together2 $(secs together2)"
        echo "speed relative (median of per-round time ratios):"
        echo "  together / serial        $(ratio together serial)    (target >= 0.9)"
        echo "  together / nbdcopy       $(ratio together nbdcopy)    (target >= 0.9)"
        echo "  together / nbdcopy-par   $(ratio together nbdcopy-par)    (target >= 0.9)"
        echo "  nbdcopy-par / nbdcopy    $(ratio nbdcopy-par nbdcopy)"
        echo "  together2 / together     $(ratio together2 together)    (A/A)"
    } | tee -a "$log"
    say
fi
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$log"
echo "log: $log (copied to $basedir/dirtybitmap-machine.log)"
cp "$log" "$basedir/dirtybitmap-machine.log"
[ ! -f "$work/cuts.tsv" ] || cp "$work/cuts.tsv" "$basedir/dirtybitmap-machine-cuts.tsv"
