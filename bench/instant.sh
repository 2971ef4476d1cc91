#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/instant.sh: what an instant restore (restore-from=) costs: the
# fill against a plain restore of the same point, how soon the disk
# serves its first read, and guest reads while the fill runs.
#
#   bench/instant.sh [--rounds=N] [--size=MIB] [--before=FILTER.so]
#                    [--parts=fill,first,reads] [--dir=DIR]
#
# fill     A disk of --size MiB (512), three quarters random data and a
#          quarter zeroes, and a repository of 8 points of it made with
#          `dirtybitmap backup --repo` (c1 full, then c2 to c8, each
#          after 2% of its 64K chunks were rewritten).  For the point
#          c1 (a chain of 1 image) and c8 (a chain of 8), timed, each
#          to a new file in the same file system, each synced at its end
#          and compared with the disk at that point (cmp, untimed):
#            fill     nbdkit file NEW restore-from=(the point, served by
#                     `dirtybitmap serve`, started before), from the
#                     start of nbdkit to "the restore ... is complete"
#                     (the fill has flushed the disk and recorded it)
#            fill2    the same again (the A/A row: the noise floor)
#            before   with --before: the fill with that build of the
#                     filter (another tree's), to measure a change
#            restore  dirtybitmap restore DIR@POINT NEW
#            nbdcopy  nbdcopy --flush -- [ qemu-nbd -r -f qcow2 IMAGE ] NEW
#          Cells interleaved, the order reversed every other round.
# first    The time from the start of nbdkit with restore-from= (and
#          restore-checkpoint=, control=: a real command line) to the
#          reply of its first read, 4K at three quarters of the disk
#          (not restored), the client connecting as soon as the socket
#          answers; for disks of 1 GiB and 64 GiB (sparse: 64M of data
#          at the start, 1M every 4G), each a qcow2 chain of 1 and of 8
#          images (each overlay rewrites 1M) made with qemu-img, served
#          by qemu-nbd -r -t -e 16 (as `dirtybitmap serve` does).
# reads    4K reads at random offsets over the whole disk of the fill
#          part's point c8, one at a time (libnbd's Python binding),
#          timed each: "during" from the start of nbdkit restoring a new
#          file until the restore is complete (the fill gives way to
#          the reads, and the reads fill what they touch), then, on the
#          same server, as many reads on the restored disk, "restored"
#          and "restored2" (A/A).  Reported: the reads, the seconds,
#          the median, p99, p99.9 and largest latency.
#
# Needs nbdkit, nbdcopy and nbdsh (libnbd, Python's nbd module),
# qemu-img, qemu-io and qemu-nbd, and the filter and tool built in this
# tree.
. "$(dirname "$0")/common.sh"
bench_start

rounds=5
size_mib=512
parts=fill,first,reads
before=
for arg in "$@"; do
    case "$arg" in
        --rounds=*) rounds="${arg#*=}" ;;
        --size=*) size_mib="${arg#*=}" ;;
        --parts=*) parts="${arg#*=}" ;;
        --before=*) before="${arg#*=}" ;;
        --dir=*) basedir="${arg#*=}" ;;
        -h|--help) sed -n '3,/^[^#]/p' "$0" | sed 's/^# \{0,1\}//;$d'; exit 0 ;;
        *) echo "$prog: unknown option $arg (see --help)" >&2; exit 1 ;;
    esac
done
case "$rounds$size_mib" in
    *[!0-9]*|'') echo "$prog: --rounds and --size take whole numbers" >&2; exit 1 ;;
esac
find_built
for p in nbdkit nbdcopy nbdsh python3 qemu-img qemu-io qemu-nbd cmp; do
    command -v $p >/dev/null || { echo "$prog: needs $p" >&2; exit 1; }
done
has_part () { case ",$parts," in *,$1,*) return 0 ;; esac; return 1; }

work="$(mktemp -d "$basedir/dirtybitmap-instant.XXXXXX")"
pids=()
cleanup ()
{
    local p f
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    # (Servers started in a cell's subshell, which pids does not see.)
    for f in "$work/pid" "$work/serve.pid" "$work/first-src.pid"; do
        [ -s "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null
    done
    [ -n "$KEEP" ] || rm -rf "$work"
}
trap cleanup EXIT
log="$work/log"
size=$((size_mib << 20))
nchunks=$(( size >> 16 ))
nchanged=$(( (nchunks * 2 + 99) / 100 ))

{
    echo "# dirtybitmap: an instant restore (restore-from=): the fill, the first read, reads during the fill"
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "command: $prog $*"
    machine_info
    [ -z "$before" ] || echo "before: $before"
    echo "disk: $size_mib MiB (3/4 random data, 1/4 zeroes) in $basedir;" \
         "8 points, $nchanged of its $nchunks 64K chunks (2%) rewritten" \
         "between two; $rounds rounds; parts $parts"
    echo
} | tee "$log"


# serve_point POINT SOCK: `dirtybitmap serve` of the point, until
# stop_serve.
serve_point ()
{
    "$DIRTYBITMAP" serve "$work/R@$1" --socket "$2" >> "$log" 2>&1 &
    serve_pid=$!
    pids+=($serve_pid)
    echo $serve_pid > "$work/serve.pid"
    wait_socket "$2"
}

stop_serve ()
{
    kill -TERM $serve_pid
    wait $serve_pid || true
    rm -f "$work/serve.pid"
}

# The timer of a server started with restore-from=: its arguments;
# prints the seconds from its start to "is complete" on its stderr,
# then stops it (SIGTERM) and waits for it.
time_fill ()
{
    python3 - "$work/fill.err" "$@" <<'EOF'
import subprocess, sys, time
err = open(sys.argv[1], "a")
t0 = time.monotonic()
p = subprocess.Popen(sys.argv[2:], stderr=subprocess.PIPE, text=True)
t1 = None
for line in p.stderr:
    err.write(line)
    if " is complete" in line:
        t1 = time.monotonic()
        break
p.terminate()
p.communicate()
if t1 is None:
    sys.exit("the restore did not complete (see fill.err)")
print("%.3f" % (t1 - t0))
EOF
}

# --- fill ---------------------------------------------------------------

# cell NAME POINT: one line "SECONDS".
cell ()
{
    local c=$1 p=$2 image="$work/R/disks/disk0/$2.qcow2" out="$work/out.img"
    local t0 t1 t f
    rm -f "$out" "$out.bitmaps"
    echo "== $c $p" >> "$log"
    case $c in
        fill|fill2|before)
            serve_point $p "$work/point.sock"
            truncate -s $size "$out"
            rm -f "$work/disk.sock"
            f="$FILTER"
            [ $c = before ] && f="$before"
            t=$(time_fill nbdkit -f -U "$work/disk.sock" --filter="$f" \
                    file "$out" \
                    restore-from="nbd+unix:///?socket=$work/point.sock")
            stop_serve
            ;;
        *)
            case $c in
                restore) cmd=("$DIRTYBITMAP" restore "$work/R@$p" "$out") ;;
                nbdcopy) cmd=(nbdcopy --flush -- "[" qemu-nbd -r -f qcow2 "$image" "]" "$out") ;;
            esac
            t0=$(date +%s%N)
            "${cmd[@]}" >> "$log" 2>&1
            t1=$(date +%s%N)
            t=$(awk -v ns=$(( t1 - t0 )) 'BEGIN { printf "%.3f\n", ns / 1e9 }')
            ;;
    esac
    cmp "$work/disk.$p" "$out"
    rm -f "$out" "$out.bitmaps"
    echo "$t"
}

part_fill ()
{
    local cells=(fill fill2 restore nbdcopy) p
    [ -n "$before" ] && cells=(fill fill2 before restore nbdcopy)
    : > "$work/results"
    echo "## fill: the fill against a plain restore of the same point" | tee -a "$log"
    for p in c1 c8; do
        bench_rounds $p "${cells[@]}"
    done
    python3 - "$work/results" $size <<'EOF' | tee -a "$log"
import collections, statistics, sys
res = collections.defaultdict(lambda: collections.defaultdict(dict))
for line in open(sys.argv[1]):
    p, r, c, secs = line.split()
    res[p][c][int(r)] = float(secs)
size = int(sys.argv[2])
med = statistics.median
for p, chain in (("c1", 1), ("c8", 8)):
    cells = res[p]
    print()
    print("point %s (a chain of %d), medians over the rounds:" % (p, chain))
    print("  %-9s %9s %10s" % ("cell", "seconds", "MB/s"))
    for c in ("fill", "fill2", "before", "restore", "nbdcopy"):
        if c not in cells:
            continue
        t = med(cells[c].values())
        print("  %-9s %9.3f %10.0f" % (c, t, size / t / 1e6))
    print("  time, median of the per-round ratios [min-max]:")
    for a, b, note in (("fill2", "fill", "A/A: the noise floor"),
                       ("fill", "restore", "target <= 1.25"),
                       ("fill", "nbdcopy", "target <= 1.25"),
                       ("restore", "nbdcopy", ""),
                       ("before", "fill", "the change"),
                       ("before", "restore", ""),
                       ("before", "nbdcopy", "")):
        if a not in cells:
            continue
        rs = [cells[a][r] / cells[b][r] for r in cells[a] if r in cells[b]]
        print("    %-18s %6.3f [%.2f-%.2f]  %s" % (
            "%s / %s" % (a, b), med(rs), min(rs), max(rs), note))
EOF
    echo | tee -a "$log"
}

# --- first --------------------------------------------------------------

# make_chain NAME SIZE LINKS: NAME-1.qcow2 ... NAME-LINKS.qcow2.
make_chain ()
{
    local name=$1 sz=$2 links=$3 k off
    local img="$work/$name-1.qcow2" io=(-c "write -P 1 0 64M")
    for (( off = 4; off < ${sz%G}; off += 4 )); do
        io+=(-c "write -P 2 ${off}G 1M")
    done
    qemu-img create -q -f qcow2 "$img" "$sz"
    qemu-io -f qcow2 "${io[@]}" "$img" > /dev/null
    for (( k = 2; k <= links; ++k )); do
        qemu-img create -q -f qcow2 -F qcow2 -b "$name-$((k - 1)).qcow2" \
                 "$work/$name-$k.qcow2"
        qemu-io -f qcow2 -c "write -P $k $(( k * 3 ))M 1M" \
                "$work/$name-$k.qcow2" > /dev/null
    done
}

part_first ()
{
    local sz links r t
    echo "## first: the first read after nbdkit starts with restore-from=" | tee -a "$log"
    : > "$work/first"
    for sz in 1G 64G; do
        make_chain d$sz $sz 8
        for links in 1 8; do
            qemu-nbd -r -f qcow2 -t -e 16 -k "$work/first-src.sock" --fork \
                     --pid-file="$work/first-src.pid" "$work/d$sz-$links.qcow2"
            for (( r = 1; r <= rounds; ++r )); do
                rm -f "$work/first.img" "$work/first.img.bitmaps" \
                      "$work/first.ctl" "$work/first.sock"
                truncate -s $sz "$work/first.img"
                t=$(PATH=/usr/bin:/bin:$PATH python3 - "$FILTER" "$work" <<'EOF'
import nbd, subprocess, sys, time
filt, work = sys.argv[1:]
t0 = time.monotonic()
p = subprocess.Popen(["nbdkit", "-f", "-U", work + "/first.sock",
                      "--filter=" + filt, "file", work + "/first.img",
                      "restore-from=nbd+unix:///?socket=%s/first-src.sock" % work,
                      "restore-checkpoint=pt", "control=%s/first.ctl" % work],
                     stderr=open(work + "/first.err", "a"))
try:
    while True:
        h = nbd.NBD()
        try:
            h.connect_unix(work + "/first.sock")
            break
        except nbd.Error:
            del h
            if p.poll() is not None or time.monotonic() - t0 > 30:
                sys.exit("nbdkit did not serve (see first.err)")
            time.sleep(0.001)
    h.pread(4096, h.get_size() // 4 * 3)
    t1 = time.monotonic()
    h.shutdown()
finally:
    p.terminate()
    p.wait()
print("%.1f" % ((t1 - t0) * 1000))
EOF
)
                echo "$sz $links $r $t" >> "$work/first"
            done
            kill "$(cat "$work/first-src.pid")"
            rm -f "$work/first-src.pid"
        done
        rm -f "$work"/d$sz-*.qcow2
    done
    python3 - "$work/first" <<'EOF' | tee -a "$log"
import collections, statistics, sys
res = collections.defaultdict(list)
for line in open(sys.argv[1]):
    sz, links, r, ms = line.split()
    res[(sz, int(links))].append(float(ms))
print("  %-6s %-6s %10s %10s %10s   (ms from the start of nbdkit)" % (
    "disk", "chain", "median", "min", "max"))
for (sz, links), v in res.items():
    print("  %-6s %-6d %10.1f %10.1f %10.1f   target <= 1000" % (
        sz, links, statistics.median(v), min(v), max(v)))
EOF
    echo | tee -a "$log"
}

# --- reads --------------------------------------------------------------

# The reader: 4K reads at random offsets, one at a time, through
# libnbd's Python binding, from the start of a server restoring the
# disk (its arguments) until it says the restore is complete
# ("during"); then, on the same server, as many reads again, twice
# ("restored", "restored2").  One line per cell: "CELL READS SECONDS
# P50 P99 P999 MAX" (latencies in microseconds).
reads_cells ()
{
    PATH=/usr/bin:/bin:$PATH python3 - "$work/reads.sock" "$@" <<'EOF'
import nbd, random, subprocess, sys, threading, time
sock = sys.argv[1]
p = subprocess.Popen(sys.argv[2:], stderr=subprocess.PIPE, text=True)
done = threading.Event()
def watch():
    for line in p.stderr:
        if " is complete" in line:
            done.set()
threading.Thread(target=watch, daemon=True).start()
t0 = time.monotonic()
while True:
    h = nbd.NBD()
    try:
        h.connect_unix(sock)
        break
    except nbd.Error:
        del h
        if p.poll() is not None or time.monotonic() - t0 > 30:
            sys.exit("nbdkit did not serve")
        time.sleep(0.001)
size = h.get_size()
rnd = random.Random(1)
def run(name, n=None):
    lat = []
    t = time.monotonic()
    while (n is None and not done.is_set()) or (n is not None and len(lat) < n):
        off = rnd.randrange(size // 4096) * 4096
        a = time.perf_counter_ns()
        h.pread(4096, off)
        lat.append(time.perf_counter_ns() - a)
    secs = time.monotonic() - t
    lat.sort()
    q = lambda f: lat[min(len(lat) - 1, int(f * len(lat)))] / 1e3
    print("%s %d %.3f %.1f %.1f %.1f %.1f" % (name, len(lat), secs, q(0.5),
                                              q(0.99), q(0.999), lat[-1] / 1e3))
    return len(lat)
n = run("during")
if not done.wait(60):
    sys.exit("the restore did not complete")
run("restored", n)
run("restored2", n)
h.shutdown()
p.terminate()
p.wait()
EOF
}

part_reads ()
{
    local r c n secs p50 p99 p999 max t
    echo "## reads: 4K random reads, one at a time, while the fill runs and on the restored disk" | tee -a "$log"
    printf '%-6s %-10s %7s %8s %8s %8s %9s %9s\n' round cell reads seconds \
           "p50 us" "p99 us" "p99.9 us" "max us" | tee -a "$log"
    : > "$work/reads"
    for (( r = 1; r <= rounds; ++r )); do
        serve_point c8 "$work/point.sock"
        rm -f "$work/reads.img" "$work/reads.img.bitmaps" "$work/reads.sock"
        truncate -s $size "$work/reads.img"
        reads_cells nbdkit -f -U "$work/reads.sock" --filter="$FILTER" \
                    file "$work/reads.img" \
                    restore-from="nbd+unix:///?socket=$work/point.sock" \
                    > "$work/reads.$r"
        stop_serve
        cmp "$work/disk.c8" "$work/reads.img"
        while read -r c n secs p50 p99 p999 max; do
            echo "$r $c $n $secs $p50 $p99 $p999 $max" >> "$work/reads"
            printf '%-6s %-10s %7s %8s %8s %8s %9s %9s\n' $r $c $n $secs \
                   $p50 $p99 $p999 $max | tee -a "$log"
        done < "$work/reads.$r"
    done
    python3 - "$work/reads" <<'EOF' | tee -a "$log"
import collections, statistics, sys
res = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    r, c, n, secs, p50, p99, p999, mx = line.split()
    res[c][int(r)] = [float(x) for x in (n, secs, p50, p99, p999, mx)]
med = statistics.median
print()
print("medians over the rounds:")
print("  %-10s %7s %8s %8s %8s %9s %9s" % ("cell", "reads", "seconds", "p50 us",
                                          "p99 us", "p99.9 us", "max us"))
for c in ("during", "restored", "restored2"):
    v = list(res[c].values())
    print("  %-10s %7.0f %8.3f %8.1f %8.1f %9.1f %9.1f" % (
        (c,) + tuple(med(x[k] for x in v) for k in range(6))))
print("  p99, median of the per-round ratios [min-max]:")
for a, b, note in (("restored2", "restored", "A/A: the noise floor"),
                   ("during", "restored", "")):
    rs = [res[a][r][3] / res[b][r][3] for r in res[a] if r in res[b]]
    print("    %-22s %6.2f [%.2f-%.2f]  %s" % (
        "%s / %s" % (a, b), med(rs), min(rs), max(rs), note))
EOF
    echo | tee -a "$log"
}

if has_part fill || has_part reads; then bench_repo; fi
if has_part fill; then part_fill; fi
if has_part first; then part_first; fi
if has_part reads; then part_reads; fi
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$log"
cp "$log" "$basedir/dirtybitmap-instant.log"
echo "log: $basedir/dirtybitmap-instant.log"
