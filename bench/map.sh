#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/map.sh: the cost of reading dirty maps through the dirtybitmap
# filter on a 16 TiB disk, against qemu-nbd's dirty-bitmap map of the
# same dirt; the write cost with 1, 8 and 32 enabled bitmaps; and what
# the bitmaps cost in memory.
#
#   bench/map.sh [--quick] [--reps=N] [--rounds=N] [--runtime=SECONDS]
#                [--dir=DIR] [--parts=maps,memory,writes]
#
# Maps: the servers all run at once and each repetition asks each of
# them in turn (interleaved), so a slow phase of the machine hits all
# alike; the medians are printed.  Dirt is made by 4K trims at evenly
# spaced granules (the filter and qemu both record a trim), through
# the server that records it; then the server is restarted read-only,
# as a backup would read it.
#
# The filter runs over the null plugin: its extents are one call
# answering "zero" for everything, so what is timed is the filter and
# nbdkit, not a plugin.  The floor is nbdinfo --map of the same null
# disk without the filter: nbdinfo asks for at most 4 GiB per
# block-status request, so a 16 TiB map takes 4096 round trips
# whatever serves it.  nbdkit's extentlist filter serving the same
# extents from a list shows what nbdkit costs to send them, and a
# 1 TiB disk with the same dirt what depends on the disk size.
#
# Many bitmaps: 4K random writes with 1, 8 and 32 enabled bitmaps,
# interleaved rounds.  Memory: the bitmap file's mapping and the
# resident memory of nbdkit, before and after writes.
#
# See BENCHMARKS.md for results.

set -e
set -o pipefail
# set -e holds inside $(...) too: iops=$(fio_run ...) stops the run
# when fio fails, instead of reading an old fio.json.
shopt -s inherit_errexit

export LC_ALL=C
# nbdsh needs Debian's python3 (with the nbd module).
export PATH="/usr/sbin:/usr/bin:/sbin:/bin:$PATH"

prog=bench/map.sh
here="$(cd "$(dirname "$0")" && pwd)"
top="$(cd "$here/.." && pwd)"
. "$here/common.sh"

reps=11
rounds=5
runtime=8
basedir="${TMPDIR:-/tmp}"
mode=full
parts="maps memory writes"

usage ()
{
    sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
    exit "${1:-1}"
}

for arg in "$@"; do
    case "$arg" in
        --quick) mode=quick reps=5 rounds=2 runtime=2 ;;
        --reps=*) reps="${arg#*=}" ;;
        --rounds=*) rounds="${arg#*=}" ;;
        --runtime=*) runtime="${arg#*=}" ;;
        --dir=*) basedir="${arg#*=}" ;;
        --parts=*) parts="${arg#*=}"; parts="${parts//,/ }" ;;
        -h|--help) usage 0 ;;
        *) echo "$prog: unknown option $arg" >&2; usage ;;
    esac
done
case "$reps$rounds$runtime" in
    *[!0-9]*|'') echo "$prog: --reps, --rounds and --runtime take whole numbers" >&2
                 exit 1 ;;
esac
[ "$reps" -ge 1 ] && [ "$rounds" -ge 1 ] && [ "$runtime" -ge 1 ] || {
    echo "$prog: --reps, --rounds and --runtime must be at least 1" >&2; exit 1; }

find_built
if ! "$DIRTYBITMAP" --help >/dev/null 2>&1; then
    echo "$prog: the dirtybitmap tool is not built (run make, or set DIRTYBITMAP=PATH)" >&2
    exit 1
fi
for p in nbdkit nbdsh nbdinfo qemu-img qemu-nbd fio python3; do
    command -v $p >/dev/null || { echo "$prog: $p is not installed" >&2; exit 1; }
done
export FILTER DIRTYBITMAP

work="$(mktemp -d "$basedir/dirtybitmap-map.XXXXXX")"
log="$work/log"
pids=()


# start NAME COMMAND...: run a server that daemonizes and writes
# $work/NAME.pid, serving $work/NAME.sock.
start ()
{
    local name="$1" i
    shift
    echo "+ $*" >> "$log"
    "$@" >> "$log" 2>&1
    for ((i = 0; i < 200; ++i)); do
        [ -S "$work/$name.sock" ] && [ -s "$work/$name.pid" ] && break
        sleep 0.05
    done
    [ -S "$work/$name.sock" ] && [ -s "$work/$name.pid" ] ||
        { echo "$prog: $name did not start: $*" >&2; exit 1; }
    pids+=("$(cat "$work/$name.pid")")
}

# stop NAME: SIGTERM, and wait until it has finished (so that the
# filter and qemu-nbd have saved their bitmaps).
stop ()
{
    local pid i
    pid="$(cat "$work/$1.pid")"
    kill -TERM "$pid" 2>/dev/null || :
    for ((i = 0; i < 3000; ++i)); do
        alive "$pid" || break
        sleep 0.02
    done
    if alive "$pid"; then
        echo "$prog: $1 ($pid) does not stop" >&2
        exit 1
    fi
    rm -f "$work/$1.pid" "$work/$1.sock"
}

cleanup ()
{
    local status=$? pid
    set +e
    for pid in "${pids[@]}"; do
        alive "$pid" && kill -TERM "$pid" 2>/dev/null
    done
    sleep 0.2
    for pid in "${pids[@]}"; do
        alive "$pid" && kill -KILL "$pid" 2>/dev/null
    done
    rm -f "$work"/*.img "$work"/*.qcow2 "$work"/*.bitmaps "$work"/*.sock \
          "$work"/*.list "$work"/*.map
    if [ $status -ne 0 ]; then
        echo "$prog: failed; the log is in $log" >&2
    fi
    exit $status
}
trap cleanup EXIT
trap 'exit 130' INT TERM

uri () { echo "nbd+unix:///?socket=$work/$1.sock"; }

# Dirty N evenly spaced 64K granules with 4K trims, 64 in flight.
DIRT='import os
n = int (os.environ["N"])
stride = (h.get_size () // n) & ~65535
for i in range (n):
    while h.aio_in_flight () >= 64:
        h.poll (-1)
    h.aio_trim (4096, i * stride)
while h.aio_in_flight () > 0:
    h.poll (-1)'

dirty ()
{
    echo "+ N=$2 nbdsh -u $(uri "$1") -c \"\$DIRT\"" >> "$log"
    N="$2" nbdsh -u "$(uri "$1")" -c "$DIRT"
}

# Milliseconds since the epoch, to the microsecond.
now () { echo "${EPOCHREALTIME/[.,]/}"; }

{
    echo "# dirtybitmap map and multi-bitmap benchmark ($mode)"
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "command: $0 $*"
    echo "map repetitions: $reps; write rounds: $rounds, ${runtime}s per cell"
    machine_info
    echo "work directory: $work (\$w below)"
    echo
} | tee "$log"

want () { case " $parts " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

#-----------------------------------------------------------------------
# 1. Maps.

if want maps; then

maps=()                         # "name|description|nbdinfo args|dirty"

# The floors: the same null disks without the filter.
for size in 1T 16T; do
    start floor-$size nbdkit -U "$work/floor-$size.sock" -P "$work/floor-$size.pid" null $size
    maps+=("floor-$size|nbdkit null $size, no filter (the floor)|--map|0")
done

# The filter over null, with n dirty granules; a 1 TiB disk with
# 1000 shows that the cost follows the dirt, not the disk.
for spec in 16T:1000 16T:100000 1T:1000; do
    size="${spec%:*}" n="${spec#*:}" name="filter-$size-$n"
    start $name nbdkit -U "$work/$name.sock" -P "$work/$name.pid" \
          --filter="$FILTER" null $size bitmap=b0 action=add \
          bitmap-file="$work/$name.bitmaps"
    dirty $name $n
    stop $name
    start $name nbdkit -r -U "$work/$name.sock" -P "$work/$name.pid" \
          --filter="$FILTER" null $size bitmap=b0 \
          bitmap-file="$work/$name.bitmaps"
    maps+=("$name|filter over null $size, $n dirty granules|--map|$n")
done

# nbdkit serving the same extents from a list (the extentlist filter):
# what nbdkit itself costs to send them, with no bitmap behind.
for n in 1000 100000; do
    name="extentlist-16T-$n"
    python3 - "$n" > "$work/$name.list" <<'EOF'
import sys
n = int(sys.argv[1])
stride = ((16 << 40) // n) & ~65535
for i in range(n):
    print("%d 65536 zero" % (i * stride))
EOF
    start $name nbdkit -r -U "$work/$name.sock" -P "$work/$name.pid" \
          --filter=extentlist null 16T extentlist="$work/$name.list"
    maps+=("$name|nbdkit null 16T, extentlist filter listing the same $n extents|--map|$n")
done

# qemu-nbd: the same dirt, recorded by an enabled persistent bitmap of
# a qcow2 and served read-only with -B, as a backup reads it.
for spec in 16T:1000 16T:100000; do
    size="${spec%:*}" n="${spec#*:}" name="qemu-$size-$n"
    echo "+ qemu-img create -q -f qcow2 \$w/$name.qcow2 $size && qemu-img bitmap --add \$w/$name.qcow2 b0" >> "$log"
    qemu-img create -q -f qcow2 "$work/$name.qcow2" $size
    qemu-img bitmap --add "$work/$name.qcow2" b0
    start $name qemu-nbd --fork --pid-file="$work/$name.pid" -k "$work/$name.sock" \
          -f qcow2 --discard=unmap "$work/$name.qcow2"
    dirty $name $n
    stop $name
    start $name qemu-nbd --fork --pid-file="$work/$name.pid" -k "$work/$name.sock" \
          -r -t -B b0 -f qcow2 "$work/$name.qcow2"
    maps+=("$name|qemu-nbd -r -B b0, qcow2 $size, $n dirty granules|--map=qemu:dirty-bitmap:b0|$n")
done

echo "Map commands (servers as in $log):"
for m in "${maps[@]}"; do
    IFS='|' read -r name desc args n <<< "$m"
    echo "  $name: nbdinfo $args nbd+unix:///?socket=\$w/$name.sock"
done
echo

times="$work/map-times.tsv"
printf 'rep\tname\tms\n' > "$times"
for ((rep = 1; rep <= reps; ++rep)); do
    order=("${maps[@]}")
    if [ $((rep % 2)) -eq 0 ]; then
        order=()
        for ((i = ${#maps[@]} - 1; i >= 0; --i)); do order+=("${maps[$i]}"); done
    fi
    for m in "${order[@]}"; do
        IFS='|' read -r name desc args n <<< "$m"
        t0=$(now)
        nbdinfo $args "$(uri $name)" > "$work/$name.map"
        t1=$(now)
        printf '%d\t%s\t%d\n' $rep $name $((t1 - t0)) >> "$times"
        # Every dirty granule is one extent of its own.
        got=$(awk -v q="$args" '
                q ~ /dirty-bitmap/ { if ($3 == 1) c++; next }
                $3 % 2 == 0 { c++ }
                END { print c + 0 }' "$work/$name.map")
        if [ "$got" != "$n" ]; then
            echo "$prog: $name: the map shows $got dirty extents, not $n" >&2
            exit 1
        fi
    done
    echo "map repetition $rep/$reps done" >&2
done

{
    echo "nbdinfo --map, wall time of the whole command (ms, $reps repetitions):"
    descs=
    for m in "${maps[@]}"; do
        IFS='|' read -r name desc args n <<< "$m"
        descs+="$name=$desc;"
    done
    python3 - "$times" "$descs" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
descs = dict(x.split("=", 1) for x in sys.argv[2].split(";") if x)
t = {}
for r in rows:
    t.setdefault(r["name"], []).append(int(r["ms"]) / 1000)
print("  %-21s %7s %15s  %s" % ("", "median", "min-max", ""))
for name, desc in descs.items():
    xs = t[name]
    print("  %-21s %7.1f %15s  %s" %
          (name, statistics.median(xs), "%.1f-%.1f" % (min(xs), max(xs)), desc))
med = {k: statistics.median(v) for k, v in t.items()}
print()
print("  above the floor of the same size (median minus median):")
for name in descs:
    if name.startswith("filter-") or name.startswith("extentlist-"):
        size = name.split("-")[1]
        print("    %-21s %7.1f ms" % (name, med[name] - med["floor-" + size]))
for n in ("1000", "100000"):
    f, q = "filter-16T-" + n, "qemu-16T-" + n
    if f in med and q in med:
        print("  filter / qemu-nbd, 16T, %s dirty: %.2f" % (n, med[f] / med[q]))
EOF
    echo
} | tee -a "$log"

for m in "${maps[@]}"; do
    IFS='|' read -r name desc args n <<< "$m"
    stop $name
done
rm -f "$work"/*.qcow2 "$work"/*.bitmaps "$work"/*.map "$work"/*.list
fi

#-----------------------------------------------------------------------
# 2. Memory: what 1, 8 and 32 bitmaps of a 16 TiB disk cost.

# mem_of PID FILE: how much of FILE the process maps (KiB), and its
# resident anonymous and file-backed memory (KiB).
mem_of ()
{
    local range perm off dev inode path mapped=0 lo hi
    while read -r range perm off dev inode path; do
        if [ "$path" = "$2" ]; then
            lo="${range%-*}" hi="${range#*-}"
            mapped=$((mapped + (16#$hi - 16#$lo) / 1024))
        fi
    done < "/proc/$1/maps"
    echo "$mapped $(sed -n 's/^RssAnon:[[:space:]]*\([0-9]*\).*/\1/p' "/proc/$1/status")" \
         "$(sed -n 's/^RssFile:[[:space:]]*\([0-9]*\).*/\1/p' "/proc/$1/status")"
}

# make_bitmaps FILE SIZE N: a bitmap file with N enabled bitmaps.
make_bitmaps ()
{
    local i
    rm -f "$1"
    "$DIRTYBITMAP" bitmap --size "$2" --add "$1" b1
    for ((i = 2; i <= $3; ++i)); do
        "$DIRTYBITMAP" bitmap --add "$1" b$i
    done
}

FIO_W='fio --name=w --ioengine=nbd --uri="nbd+unix:///?socket=$w/NAME.sock" --rw=randwrite --bs=4k --iodepth=16 --numjobs=1 --norandommap --randrepeat=1 --time_based --runtime=RUNTIME --output-format=json --output=$w/fio.json'

fio_run ()
{
    local f="${FIO_W//NAME/$1}"
    f="${f//RUNTIME/$2}"
    echo "+ $f" >> "$log"
    local w="$work"
    rm -f "$work/fio.json"
    eval "$f" >> "$log" 2>&1
    python3 -c '
import json, sys
j = json.load (open (sys.argv[1]))["jobs"][0]
assert j["error"] == 0 and j["write"]["io_bytes"] > 0
print ("%.0f" % j["write"]["iops"])' "$work/fio.json"
}

if want memory; then
{
    echo "Memory of nbdkit with N enabled bitmaps on a 16 TiB null disk (64K granules:"
    echo "16T/64K/8 = 32 MiB per bitmap), before and after ${runtime}s of 4K random writes:"
    echo "  command: dirtybitmap bitmap --size 16T --add \$w/mem.bitmaps b1; ... --add \$w/mem.bitmaps bN"
    echo "           nbdkit -U \$w/mem.sock -P \$w/mem.pid --filter=\$FILTER null 16T bitmap=b1 bitmap-file=\$w/mem.bitmaps durability=MODE"
    f="${FIO_W//NAME/mem}"
    echo "           ${f//RUNTIME/$runtime}"
    echo "  (strict: the same with durability=strict)"
    printf '  %-10s %10s %12s %12s %12s %12s %8s\n' N "mapped MiB" "anon before" "anon after" \
           "file before" "file after" "IOPS"
} | tee -a "$log"
for spec in 1:flush 8:flush 32:flush 1:strict 32:strict; do
    n="${spec%:*}" mode="${spec#*:}"
    make_bitmaps "$work/mem.bitmaps" 16T $n >> "$log" 2>&1
    start mem nbdkit -U "$work/mem.sock" -P "$work/mem.pid" --filter="$FILTER" \
          null 16T bitmap=b1 bitmap-file="$work/mem.bitmaps" durability=$mode
    pid="$(cat "$work/mem.pid")"
    # One connection first, so that the bitmaps are sized and mapped.
    nbdsh -u "$(uri mem)" -c 'h.get_size ()'
    m=$(mem_of "$pid" "$work/mem.bitmaps")
    read -r mapped anon0 file0 <<< "$m"
    iops=$(fio_run mem "$runtime")
    m=$(mem_of "$pid" "$work/mem.bitmaps")
    read -r mapped anon1 file1 <<< "$m"
    stop mem
    printf '  %-10s %10.1f %8d KiB %8d KiB %8d KiB %8d KiB %8s\n' "$n $mode" \
           "$(awk -v k="$mapped" 'BEGIN {print k / 1024}')" "$anon0" "$anon1" "$file0" "$file1" "$iops" |
        tee -a "$log"
done
rm -f "$work/mem.bitmaps"
echo | tee -a "$log"
fi

#-----------------------------------------------------------------------
# 3. Write cost with 1, 8 and 32 enabled bitmaps, interleaved rounds.

if want writes; then
cells=()
for n in 1 8 32; do
    cells+=("2G:$n:fresh" "2G:$n:dirty" "16T:$n:fresh")
done
{
    echo "Write cost with N enabled bitmaps: 4K random write QD16, 1 job, filter over null,"
    echo "durability=flush; $rounds rounds of ${runtime}s, order reversed every other round."
    echo "  2G fresh: every bitmap empty at the start (a 2 GiB disk has 32768 granules)."
    echo "  2G dirty: every bit of every bitmap set first (one trim of the whole disk)."
    echo "  16T fresh: a 16 TiB disk, so nearly every write is a first touch."
    echo "  commands: dirtybitmap bitmap --size SIZE --add \$w/wc.bitmaps b1; ... bN"
    echo "            nbdkit -U \$w/wc.sock -P \$w/wc.pid --filter=\$FILTER null SIZE bitmap=b1 bitmap-file=\$w/wc.bitmaps"
    echo "            (dirty: nbdsh -u nbd+unix:///?socket=\$w/wc.sock -c 'h.trim(h.get_size(), 0)')"
    f="${FIO_W//NAME/wc}"
    echo "            ${f//RUNTIME/$runtime}"
} | tee -a "$log"
wtimes="$work/write-times.tsv"
printf 'round\tcell\tiops\n' > "$wtimes"
for ((r = 1; r <= rounds; ++r)); do
    order=("${cells[@]}")
    if [ $((r % 2)) -eq 0 ]; then
        order=()
        for ((i = ${#cells[@]} - 1; i >= 0; --i)); do order+=("${cells[$i]}"); done
    fi
    for cell in "${order[@]}"; do
        IFS=: read -r size n kind <<< "$cell"
        make_bitmaps "$work/wc.bitmaps" $size $n >> "$log" 2>&1
        start wc nbdkit -U "$work/wc.sock" -P "$work/wc.pid" --filter="$FILTER" \
              null $size bitmap=b1 bitmap-file="$work/wc.bitmaps"
        if [ $kind = dirty ]; then
            nbdsh -u "$(uri wc)" -c 'h.trim (h.get_size (), 0)'
        fi
        sync
        iops=$(fio_run wc "$runtime")
        stop wc
        rm -f "$work/wc.bitmaps"
        printf '%d\t%s\t%s\n' $r "$cell" "$iops" >> "$wtimes"
        printf 'round %d %-14s %8s IOPS\n' $r "$cell" "$iops" >&2
    done
done
python3 - "$wtimes" <<'EOF' | tee -a "$log"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
v = {}
for r in rows:
    v.setdefault(r["cell"], {})[int(r["round"])] = float(r["iops"])
print("  %-5s %-6s %3s %12s %7s  %s" %
      ("disk", "bits", "N", "median IOPS", "vs N=1", "round ratios"))
for size, kind in (("2G", "fresh"), ("2G", "dirty"), ("16T", "fresh")):
    one = v["%s:1:%s" % (size, kind)]
    for n in (1, 8, 32):
        c = v["%s:%d:%s" % (size, n, kind)]
        rs = [c[k] / one[k] for k in sorted(c) if k in one]
        verdict = ""
        if n == 32:
            m = statistics.median(rs)
            verdict = "met" if m >= 0.9 else "MISS"
            verdict += " (want >= 0.90)"
        print("  %-5s %-6s %3d %12.0f %7.3f  %.2f-%.2f  %s" %
              (size, kind, n, statistics.median(c.values()),
               statistics.median(rs), min(rs), max(rs), verdict))
EOF
fi
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$log"
echo "log: $log"
