#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/run.sh: write throughput through the dirtybitmap filter,
# against nbdkit without it and against qemu-nbd, in one invocation.
#
#   bench/run.sh [--quick] [--rounds=N] [--runtime=SECONDS]
#                [--configs=A,B,...] [--workloads=W,...] [--dir=DIR]
#                [--bitmap-dir=DIR] [--list] [--callgrind[=WRITES]]
#                [--callgrind-workload=4k-rand|1m-seq]
#                [--callgrind-configs=A,B,...]
#                [--durability-compare]
#
# Every cell (configuration x workload x round) gets a fresh 2 GiB
# sparse disk and a fresh server, and runs fio's nbd engine over a
# Unix socket for --runtime seconds (--dir: where the disks go;
# --bitmap-dir: where the filter's bitmap files go, by default beside
# the disk).  Rounds interleave the
# configurations (A B C ..., then ... C B A), so a slow phase of the
# machine hits all of them alike; ratios are the median of per-round
# ratios.  The "file-aa" configuration is a second, identical nbdkit
# file server: its ratio to "file" is the noise floor.
#
# --callgrind instead counts the instructions nbdkit executes per
# 4K write over null, without and with the filter (repeatable on a
# busy machine, unlike timings); --callgrind-workload=1m-seq per 1M
# sequential write instead; --callgrind-configs only those
# configurations (the first is the base of the "+N over" column).
#
# --durability-compare runs durability=coarse against durability=flush
# over file and over null, fresh and with every bit set, beside a
# second flush server of each (A/A), 6 rounds unless --rounds says
# otherwise, the cells of each round and workload in a shuffled order
# (seeded by the round and the workload); every ratio is to flush, and
# the report says which cells fall below 0.95x flush beyond the A/A
# noise of the same cell.
#
# Needs: nbdkit, nbdsh (libnbd), qemu-img, qemu-nbd, fio with the nbd
# engine, python3, valgrind for --callgrind, and the filter built in
# this tree (or FILTER=PATH).  See BENCHMARKS.md for the results and
# how to read them.

set -e
set -o pipefail
# set -e holds inside $(...) too, as in the functions run there.
shopt -s inherit_errexit

export LC_ALL=C
# nbdsh needs Debian's python3 (with the nbd module).
export PATH="/usr/sbin:/usr/bin:/sbin:/bin:$PATH"

prog=bench/run.sh
here="$(cd "$(dirname "$0")" && pwd)"
top="$(cd "$here/.." && pwd)"
. "$here/common.sh"

# --- Options -----------------------------------------------------------

ALL_CONFIGS="memory memory+bm file file-aa file+noextents file+bm \
file+bm-dirty file+bm-strict file+bm-strict-dirty file+bm-coarse \
file+bm-coarse-dirty null null+noextents null+bm null+bm-dirty \
null+bm-strict null+bm-coarse null+bm-coarse-dirty qemu-qcow2-bm qemu-raw"
QUICK_CONFIGS="file file-aa file+noextents file+bm file+bm-dirty \
file+bm-strict file+bm-strict-dirty file+bm-coarse file+bm-coarse-dirty \
null null+bm-dirty null+bm-coarse-dirty qemu-qcow2-bm"
ALL_WORKLOADS="4k-rand 4k-rand-2j 64k-rand 1m-seq"
# --durability-compare: flush, its A/A twin and coarse, fresh and dirty.
DURABILITY_CONFIGS="file+bm file+bm-aa file+bm-coarse file+bm-dirty \
file+bm-aa-dirty file+bm-coarse-dirty null+bm null+bm-aa null+bm-coarse \
null+bm-dirty null+bm-aa-dirty null+bm-coarse-dirty"

rounds=5
runtime=8
configs="$ALL_CONFIGS"
workloads="$ALL_WORKLOADS"
basedir="${TMPDIR:-/tmp}"
bmbase=
mode=full
list=
callgrind=
cg_rw=randwrite cg_bs=4k
durcmp=
rounds_given=

usage ()
{
    sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
    exit "${1:-1}"
}

for arg in "$@"; do
    case "$arg" in
        --quick)
            mode=quick rounds=2 runtime=2 configs="$QUICK_CONFIGS" ;;
        --rounds=*) rounds="${arg#*=}" rounds_given=1 ;;
        --runtime=*) runtime="${arg#*=}" ;;
        --configs=*) configs="${arg#*=}"; configs="${configs//,/ }" ;;
        --workloads=*) workloads="${arg#*=}"; workloads="${workloads//,/ }" ;;
        --dir=*) basedir="${arg#*=}" ;;
        --bitmap-dir=*) bmbase="${arg#*=}" ;;
        --list) list=1 ;;
        --callgrind) callgrind=20000 ;;
        --callgrind=*) callgrind="${arg#*=}" ;;
        --callgrind-workload=4k-rand) cg_rw=randwrite cg_bs=4k ;;
        --callgrind-configs=*) cg_configs="${arg#*=}"; cg_configs="${cg_configs//,/ }" ;;
        --callgrind-workload=1m-seq) cg_rw=write cg_bs=1m ;;
        --durability-compare)
            mode=durability durcmp=1 configs="$DURABILITY_CONFIGS" ;;
        -h|--help) usage 0 ;;
        *) echo "$prog: unknown option $arg" >&2; usage ;;
    esac
done

if [ -n "$durcmp" ]; then
    [ -n "$rounds_given" ] || rounds=6
    if [ -n "$callgrind" ]; then
        echo "$prog: --durability-compare and --callgrind do not go together" >&2
        exit 1
    fi
fi

case "$rounds$runtime$callgrind" in
    *[!0-9]*|'') echo "$prog: --rounds, --runtime and --callgrind take whole numbers" >&2
                 exit 1 ;;
esac
[ "$rounds" -ge 1 ] && [ "$runtime" -ge 1 ] || {
    echo "$prog: --rounds and --runtime must be at least 1" >&2; exit 1; }

# --- Configurations ----------------------------------------------------
#
# Each is three command strings run with eval, and printed verbatim in
# the header so that anyone can rerun one cell by hand: $d is the
# cell's directory, $b where its bitmap file goes ($d unless
# --bitmap-dir), $FILTER the filter, $SIZE the disk size.

SIZE=2G
SIZE_BYTES=$((2 * 1024 * 1024 * 1024))

describe ()
{
    case "$1" in
        memory) echo "nbdkit memory, no filter (baseline for memory+bm)" ;;
        memory+bm) echo "filter over memory: fresh bitmap, durability=flush" ;;
        file) echo "nbdkit file, no filter (baseline)" ;;
        file-aa) echo "nbdkit file, no filter, a second identical server (A/A)" ;;
        file+noextents) echo "nbdkit's noextents filter over file: writes pass straight down (what any filter layer costs)" ;;
        null+noextents) echo "nbdkit's noextents filter over null (what any filter layer costs)" ;;
        file+bm) echo "filter over file: fresh bitmap, durability=flush" ;;
        file+bm-aa) echo "filter over file: fresh bitmap, durability=flush, a second identical server (A/A)" ;;
        file+bm-dirty) echo "filter over file: every bit already set, durability=flush" ;;
        file+bm-aa-dirty) echo "filter over file: every bit already set, durability=flush, a second identical server (A/A)" ;;
        file+bm-strict) echo "filter over file: fresh bitmap, durability=strict" ;;
        file+bm-strict-dirty) echo "filter over file: every bit already set, durability=strict" ;;
        file+bm-coarse) echo "filter over file: fresh bitmap, durability=coarse (16M)" ;;
        file+bm-coarse-dirty) echo "filter over file: every bit already set, durability=coarse (16M)" ;;
        null) echo "nbdkit null (drops writes), no filter (baseline for null+bm*)" ;;
        null+bm) echo "filter over null: fresh bitmap, durability=flush" ;;
        null+bm-aa) echo "filter over null: fresh bitmap, durability=flush, a second identical server (A/A)" ;;
        null+bm-dirty) echo "filter over null: every bit already set, durability=flush" ;;
        null+bm-aa-dirty) echo "filter over null: every bit already set, durability=flush, a second identical server (A/A)" ;;
        null+bm-strict) echo "filter over null: fresh bitmap, durability=strict" ;;
        null+bm-coarse) echo "filter over null: fresh bitmap, durability=coarse (16M)" ;;
        null+bm-coarse-dirty) echo "filter over null: every bit already set, durability=coarse (16M)" ;;
        qemu-qcow2-bm) echo "qemu-nbd, qcow2 with an enabled persistent bitmap" ;;
        qemu-raw) echo "qemu-nbd, raw" ;;
        *) return 1 ;;
    esac
}

# The configuration whose per-round value divides this one's.  With
# --durability-compare, a filter configuration's flush twin.
baseline_of ()
{
    if [ -n "$durcmp" ]; then
        case "$1" in
            *+bm*) local b="${1/-aa/}"; echo "${b/-coarse/}"; return ;;
        esac
    fi
    case "$1" in
        memory*) echo memory ;;
        null*) echo null ;;
        *) echo file ;;
    esac
}

setup_cmd ()
{
    case "$1" in
        memory*|null*) echo ":" ;;
        qemu-qcow2-bm)
            echo 'qemu-img create -q -f qcow2 $d/disk.qcow2 $SIZE && qemu-img bitmap --add $d/disk.qcow2 b0' ;;
        *) echo 'truncate -s $SIZE $d/disk.img' ;;
    esac
}

NBDKIT='nbdkit -U $d/sock -P $d/pid'
# The file plugin's bitmap file is beside the disk unless --bitmap-dir.
FILE_BMF=
[ -z "$bmbase" ] || FILE_BMF=' bitmap-file=$b/disk.img.bitmaps'
QEMU_NBD='qemu-nbd --fork --pid-file=$d/pid -k $d/sock -e 8 -t --cache=writeback --aio=threads'

server_cmd ()
{
    # The mode is always given, whatever the default.
    local strict=" durability=flush"
    case "$1" in
        *-strict*) strict=" durability=strict" ;;
        *-coarse*) strict=" durability=coarse coarse-granularity=16M" ;;
    esac
    case "$1" in
        memory) echo "$NBDKIT memory \$SIZE" ;;
        memory+bm) echo "$NBDKIT --filter=\$FILTER memory \$SIZE bitmap=b0 action=add bitmap-file=\$b/bitmaps$strict" ;;
        file|file-aa) echo "$NBDKIT file \$d/disk.img" ;;
        file+noextents) echo "$NBDKIT --filter=noextents file \$d/disk.img" ;;
        null+noextents) echo "$NBDKIT --filter=noextents null \$SIZE" ;;
        file+bm*) echo "$NBDKIT --filter=\$FILTER file \$d/disk.img bitmap=b0 action=add$FILE_BMF$strict" ;;
        null) echo "$NBDKIT null \$SIZE" ;;
        null+bm*) echo "$NBDKIT --filter=\$FILTER null \$SIZE bitmap=b0 action=add bitmap-file=\$b/bitmaps$strict" ;;
        qemu-qcow2-bm) echo "$QEMU_NBD -f qcow2 \$d/disk.qcow2" ;;
        qemu-raw) echo "$QEMU_NBD -f raw \$d/disk.img" ;;
    esac
}

# Where a filter configuration keeps its bitmaps (for the check that
# a "-dirty" bitmap really is all dirty).
bitmap_file_of ()
{
    case "$1" in
        file+bm*) echo "$b/disk.img.bitmaps" ;;
        *+bm*) echo "$b/bitmaps" ;;
    esac
}

# A "-dirty" configuration trims the whole disk once before the run:
# the filter sets every bit, and the file stays sparse.
prep_cmd ()
{
    case "$1" in
        *-dirty) echo 'nbdsh -u "nbd+unix:///?socket=$d/sock" -c "h.trim(h.get_size(), 0)"' ;;
        # Every bit set, then a full backup view begun: every first
        # write to a 64K granule copies it before it goes down.
        *-view) echo 'nbdsh -u "nbd+unix:///?socket=$d/sock" -c "h.trim(h.get_size(), 0)" && python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b\"{\\\"execute\\\": \\\"backup-begin\\\", \\\"arguments\\\": {\\\"name\\\": \\\"v\\\"}}\\n\"); r=s.makefile().readline(); assert \"return\" in r, r" "$d/ctl"' ;;
        *) echo ":" ;;
    esac
}

# --- Workloads ---------------------------------------------------------

workload_args ()
{
    case "$1" in
        4k-rand) echo "--rw=randwrite --bs=4k --iodepth=16 --numjobs=1" ;;
        4k-rand-2j) echo "--rw=randwrite --bs=4k --iodepth=16 --numjobs=2" ;;
        64k-rand) echo "--rw=randwrite --bs=64k --iodepth=16 --numjobs=1" ;;
        1m-seq) echo "--rw=write --bs=1M --iodepth=16 --numjobs=1" ;;
        *) return 1 ;;
    esac
}

workload_title ()
{
    case "$1" in
        4k-rand) echo "4K random write, QD16, 1 job (IOPS)" ;;
        4k-rand-2j) echo "4K random write, QD16, 2 jobs (IOPS, both jobs)" ;;
        64k-rand) echo "64K random write, QD16, 1 job (MB/s)" ;;
        1m-seq) echo "1M sequential write, QD16, 1 job (MB/s)" ;;
    esac
}

FIO='fio --name=$w --ioengine=nbd --uri="nbd+unix:///?socket=$d/sock" $wargs --group_reporting --norandommap --randrepeat=1 --time_based --runtime=$runtime --output-format=json --output=$d/fio.json'

for c in $configs; do
    describe "$c" >/dev/null ||
        { echo "$prog: unknown configuration $c (--list shows them)" >&2; exit 1; }
done
for w in $workloads; do
    workload_args "$w" >/dev/null ||
        { echo "$prog: unknown workload $w (--list shows them)" >&2; exit 1; }
done

if [ -n "$list" ]; then
    echo "Configurations:"
    for c in $ALL_CONFIGS; do printf '  %-22s %s\n' "$c" "$(describe "$c")"; done
    echo "Workloads:"
    for w in $ALL_WORKLOADS; do printf '  %-22s %s\n' "$w" "$(workload_title "$w")"; done
    echo "--quick: --rounds=2 --runtime=2 --configs=${QUICK_CONFIGS// /,}"
    echo "--durability-compare: --rounds=6 --configs=${DURABILITY_CONFIGS// /,}, ratios to flush"
    for c in $DURABILITY_CONFIGS; do
        case " $ALL_CONFIGS " in
            *" $c "*) ;;
            *) printf '  %-22s %s\n' "$c" "$(describe "$c")" ;;
        esac
    done
    exit 0
fi

# --- Prerequisites -----------------------------------------------------

find_built
export FILTER SIZE DIRTYBITMAP

needs="nbdkit nbdsh fio python3"
if [ -n "$callgrind" ]; then
    needs="$needs valgrind callgrind_annotate"
else
    needs="$needs qemu-img qemu-nbd"
fi
for p in $needs; do
    command -v $p >/dev/null || { echo "$prog: $p is not installed" >&2; exit 1; }
done
if ! fio --enghelp=nbd >/dev/null 2>&1; then
    echo "$prog: this fio has no nbd engine" >&2
    exit 1
fi
if [ -z "$callgrind" ]; then
    for c in $configs; do
        b="$(baseline_of "$c")"
        case " $configs " in
            *" $b "*) ;;
            *) echo "$prog: $c needs the $b configuration (its baseline)" >&2; exit 1 ;;
        esac
    done
fi

work="$(mktemp -d "$basedir/dirtybitmap-bench.XXXXXX")"
results="$work/results.tsv"
log="$work/log"
d=
b=
bwork=
[ -z "$bmbase" ] || bwork="$(mktemp -d "$bmbase/dirtybitmap-bench-bitmaps.XXXXXX")"


# Stop a server: nbdkit with SIGTERM (the filter syncs its bitmaps);
# qemu-nbd with SIGKILL, so that it does not write the whole qcow2
# back at exit, which only slows the next cell.
stop_server ()
{
    local pid i
    [ -n "$d" ] && [ -f "$d/pid" ] || return 0
    pid="$(cat "$d/pid")"
    case "$1" in
        qemu*) kill -KILL "$pid" 2>/dev/null || : ;;
        *) kill -TERM "$pid" 2>/dev/null || : ;;
    esac
    for ((i = 0; i < 3000; ++i)); do
        alive "$pid" || break
        sleep 0.02
    done
    if alive "$pid"; then
        echo "$prog: server $pid ($1) does not stop; killing it" >&2
        kill -KILL "$pid" 2>/dev/null || :
    fi
    rm -f "$d/pid"
}

current=
cg_pid=
cleanup ()
{
    local status=$?
    set +e
    [ -n "$current" ] && stop_server "$current"
    [ -n "$cg_pid" ] && kill -TERM "$cg_pid" 2>/dev/null && wait "$cg_pid"
    case "$d" in "$work"/*) rm -rf "$d" ;; esac
    [ -z "$bwork" ] || rm -rf "$bwork"
    if [ $status -ne 0 ]; then
        echo "$prog: failed; the log is in $log" >&2
    fi
    exit $status
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- Header: machine, versions, exact commands -------------------------

machine ()
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "command: $prog $*"
    machine_info
}

# --- --callgrind: instructions per write --------------------------------
#
# nbdkit runs under callgrind serving null; fio sends a fixed number
# of 4K random writes (and, to subtract startup and shutdown, a run
# with none).  The difference divided by the writes is the cost of a
# write in nbdkit's process, kernel excluded.

if [ -n "$callgrind" ]; then
    {
        echo "# dirtybitmap instructions per write (callgrind)"
        machine "$@"
        echo "writes: $callgrind writes of $cg_bs, fio --rw=$cg_rw, QD16, 1 job"
        echo
    } | tee "$log"
    CG_NBDKIT='valgrind --tool=callgrind --callgrind-out-file=$d/cg.out nbdkit -f -U $d/sock'
    CG_FIO='fio --name=cg --ioengine=nbd --uri="nbd+unix:///?socket=$d/sock" --rw=$cg_rw --bs=$cg_bs --iodepth=16 --norandommap --randrepeat=1 --number_ios=$n --size=$SIZE --output-format=json --output=$d/fio.json'
    cg_args ()
    {
        case "$1" in
            null) echo "null \$SIZE" ;;
            null+noextents) echo "--filter=noextents null \$SIZE" ;;
            null+bm) echo "--filter=\$FILTER null \$SIZE bitmap=b0 action=add bitmap-file=\$d/bitmaps durability=flush" ;;
            null+bm-dirty) echo "--filter=\$FILTER null \$SIZE bitmap=b0 action=add bitmap-file=\$d/bitmaps durability=flush" ;;
            null+bm-view) echo "--filter=\$FILTER null \$SIZE bitmap=b0 action=add bitmap-file=\$d/bitmaps durability=flush control=\$d/ctl" ;;
            null+bm-coarse|null+bm-coarse-dirty) echo "--filter=\$FILTER null \$SIZE bitmap=b0 action=add bitmap-file=\$d/bitmaps durability=coarse" ;;
            null+bm-strict-dirty) echo "--filter=\$FILTER null \$SIZE bitmap=b0 action=add bitmap-file=\$d/bitmaps durability=strict" ;;
            null+32bm|null+32bm-dirty) echo "--filter=\$FILTER null \$SIZE bitmap=b1 bitmap-file=\$d/bitmaps durability=flush" ;;
        esac
    }
    # 32 enabled bitmaps, made before the server starts.
    cg_setup ()
    {
        case "$1" in
            null+32bm*) echo '$DIRTYBITMAP bitmap --size $SIZE --add $d/bitmaps b1 && for i in $(seq 2 32); do $DIRTYBITMAP bitmap --add $d/bitmaps b$i; done' ;;
            *) echo ":" ;;
        esac
    }
    CG_CONFIGS="${cg_configs:-null null+noextents null+bm null+bm-dirty null+bm-strict-dirty null+bm-coarse null+bm-coarse-dirty null+32bm null+32bm-dirty null+bm-view}"
    {
        echo "Commands (\$n is $callgrind, then 0):"
        for c in $CG_CONFIGS; do
            s="$(cg_setup "$c")"; [ "$s" = ":" ] || echo "    $s"
            echo "  $c: $CG_NBDKIT $(cg_args $c)"
            p="$(prep_cmd "$c")"; [ "$p" = ":" ] || echo "    $p"
        done
        echo "  then: $CG_FIO"
        echo "  then: kill -TERM the server; callgrind_annotate \$d/cg.out"
        echo
    } | tee -a "$log"
    # Sets cg_total and cg_track: the instructions of the whole
    # process, and those inclusive in tracker_track.
    cg_run ()
    {
        local c="$1" n="$2" i
        d="$work/cell"
        rm -rf "$d"; mkdir "$d"
        echo "== $c, $n writes" >> "$log"
        eval "$(cg_setup "$c")" >> "$log" 2>&1
        eval "$CG_NBDKIT $(cg_args "$c") &" >> "$log" 2>&1
        cg_pid=$!
        for ((i = 0; i < 600; ++i)); do
            [ -S "$d/sock" ] && break
            sleep 0.05
        done
        [ -S "$d/sock" ] || { echo "$prog: $c: nbdkit did not start" >&2; exit 1; }
        eval "$(prep_cmd "$c")" >> "$log" 2>&1
        if [ "$n" -gt 0 ]; then
            eval "$CG_FIO" >> "$log" 2>&1
        else
            nbdsh -u "nbd+unix:///?socket=$d/sock" -c 'h.get_size ()'
        fi
        kill -TERM $cg_pid
        wait $cg_pid || :
        cg_pid=
        cg_total=$(callgrind_annotate "$d/cg.out" 2>/dev/null |
                   sed -n 's/^ *\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,)
        cg_track=$(callgrind_annotate --inclusive=yes "$d/cg.out" 2>/dev/null |
                   sed -n 's/^ *\([0-9,]*\) .*:tracker_track\( .*\)*$/\1/p' | tr -d , |
                   sort -n | tail -1)
        cg_view=$(callgrind_annotate --inclusive=yes "$d/cg.out" 2>/dev/null |
                  sed -n 's/^ *\([0-9,]*\) .*:view_before_write\( .*\)*$/\1/p' | tr -d , |
                  sort -n | tail -1)
        [ -n "$cg_total" ] || { echo "$prog: $c: no callgrind totals" >&2; exit 1; }
        mv "$d/cg.out" "$work/callgrind.$c.$n"
        rm -rf "$d"
        d=
    }
    {
        echo "null+noextents is nbdkit's noextents filter, which passes writes"
        echo "straight down: what any filter layer costs in nbdkit.  tracker_track"
        echo "is the filter's tracking, inclusive.  null+32bm: 32 enabled bitmaps."
        echo "null+bm-view: null+bm-dirty with a full backup view open (scratch"
        echo "beside the bitmap file): view_before_write, inclusive, is the"
        echo "copy-before-write."
        printf '%-22s %12s %14s %18s\n' configuration "instr/write" "tracker_track" "view_before_write"
    } | tee -a "$log"
    base=
    for c in $CG_CONFIGS; do
        cg_run $c 0
        t0=$cg_total f0=${cg_track:-0} v0=${cg_view:-0}
        cg_run $c "$callgrind"
        t1=$cg_total f1=${cg_track:-0} v1=${cg_view:-0}
        per=$(( (t1 - t0) / callgrind ))
        st=$(( (f1 - f0) / callgrind ))
        vw=$(( (v1 - v0) / callgrind ))
        [ -n "$base" ] || base=$per
        case $c in *bm*) ;; *) st=- ;; esac
        case $c in *view*) ;; *) vw=- ;; esac
        printf '%-22s %12d %14s %18s   (+%d over %s)\n' "$c" "$per" "$st" \
               "$vw" $((per - base)) "${CG_CONFIGS%% *}" | tee -a "$log"
    done
    echo "log: $log"
    exit 0
fi

# --- Header: machine, versions, exact commands -------------------------

{
    echo "# dirtybitmap write benchmark ($mode)"
    machine "$@"
    echo "rounds: $rounds, runtime: ${runtime}s per cell, disk: $SIZE sparse in $basedir"
    [ -z "$bmbase" ] ||
        echo "bitmap files (\$b) in $bwork, on: $(findmnt -n -o FSTYPE,OPTIONS -T "$bmbase" 2>/dev/null)"
    echo
    echo "Commands of one cell (\$d: the cell's directory, \$SIZE=$SIZE,"
    echo "\$FILTER=$FILTER):"
    for c in $configs; do
        echo "  $c: $(describe "$c")"
        s="$(setup_cmd "$c")"; [ "$s" = ":" ] || echo "    $s"
        echo "    $(server_cmd "$c")"
        p="$(prep_cmd "$c")"; [ "$p" = ":" ] || echo "    $p"
    done
    echo "  then, for each workload:"
    for w in $workloads; do
        wargs="$(workload_args "$w")"
        f="${FIO//\$wargs/$wargs}"; f="${f//\$w /$w }"
        echo "    $w: ${f//\$runtime/$runtime}"
    done
    echo "  then stop the server (SIGTERM; qemu-nbd SIGKILL) and remove \$d."
    echo
} | tee "$log"

nconf=$(echo $configs | wc -w)
nwork=$(echo $workloads | wc -w)
total=$((rounds * nconf * nwork))
echo "$total cells, about $(( (total * (runtime + 1) + 59) / 60 )) minutes; raw results in $results" | tee -a "$log"
printf 'round\tworkload\tconfig\tiops\tbw_bytes\tcpu_us_per_io\n' > "$results"

# --- The cells ---------------------------------------------------------

# CPU time (user + system, all threads) of process $1, in clock ticks.
cpu_ticks ()
{
    local stat
    stat="$(cat "/proc/$1/stat")"
    stat="${stat##*) }"
    set -- $stat
    echo $(( ${12} + ${13} ))
}

# Sets v to "IOPS<tab>bytes/s<tab>server CPU microseconds per I/O".
run_cell ()
{
    local r="$1" w="$2" c="$3" i bmf dirty wargs pid cpu0 cpu1
    d="$work/cell"
    rm -rf "$d"
    mkdir "$d"
    b="$d"
    if [ -n "$bwork" ]; then
        b="$bwork/cell"
        rm -rf "$b"
        mkdir "$b"
    fi
    wargs="$(workload_args "$w")"

    echo "== round $r $w $c" >> "$log"
    eval "$(setup_cmd "$c")" >> "$log" 2>&1
    current="$c"
    eval "$(server_cmd "$c")" >> "$log" 2>&1
    for ((i = 0; i < 100; ++i)); do
        [ -S "$d/sock" ] && [ -s "$d/pid" ] && break
        sleep 0.05
    done
    [ -S "$d/sock" ] && [ -s "$d/pid" ] ||
        { echo "$prog: $c: the server did not start" >&2; exit 1; }
    eval "$(prep_cmd "$c")" >> "$log" 2>&1
    case "$c" in
        *-dirty)
            bmf="$(bitmap_file_of "$c")"
            dirty="$("$DIRTYBITMAP" info -U "$bmf" | sed -n 's/^ *dirty bytes: *\([0-9]*\).*/\1/p')"
            if [ "$dirty" != "$SIZE_BYTES" ]; then
                echo "$prog: $c: the bitmap has $dirty dirty bytes, not $SIZE_BYTES" >&2
                exit 1
            fi ;;
    esac
    sync
    pid="$(cat "$d/pid")"
    cpu0=$(cpu_ticks "$pid")
    eval "$FIO" >> "$log" 2>&1 ||
        { echo "$prog: $c $w: fio failed" >&2; tail -20 "$log" >&2; exit 1; }
    cpu1=$(cpu_ticks "$pid")
    v="$(python3 - "$d/fio.json" $((cpu1 - cpu0)) "$(getconf CLK_TCK)" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"]
assert len(j) == 1, "expected one group report"
j = j[0]
assert j["error"] == 0, "fio job error %d" % j["error"]
w = j["write"]
assert w["io_bytes"] > 0, "nothing written"
cpu_s = int(sys.argv[2]) / int(sys.argv[3])
print("%.1f\t%d\t%.2f" % (w["iops"], w["bw_bytes"], cpu_s * 1e6 / w["total_ios"]))
EOF
)"
    stop_server "$c"
    current=
    rm -rf "$d"
    [ "$b" = "$d" ] || rm -rf "$b"
    d= b=
    printf '%s\t%s\t%s\t%s\n' "$r" "$w" "$c" "$v" >> "$results"
}

n=0
for ((r = 1; r <= rounds; ++r)); do
    order="$configs"
    if [ $((r % 2)) -eq 0 ]; then
        order="$(echo $configs | tr ' ' '\n' | tac | tr '\n' ' ')"
    fi
    for w in $workloads; do
        if [ -n "$durcmp" ]; then
            # A fresh order per round and workload (seeded: the same
            # every run), so that no configuration always takes the
            # same place, such as the first file cell after the null
            # ones, where the disk's writeback from before lands.
            order="$(python3 -c 'import random, sys
l = sys.argv[2:]; random.Random(sys.argv[1]).shuffle(l); print(" ".join(l))' \
                     "$r $w" $configs)"
            echo "round $r $w: order $order" >> "$log"
        fi
        for c in $order; do
            n=$((n + 1))
            run_cell "$r" "$w" "$c"
            echo "$v" | awk -v n="$n" -v t="$total" -v r="$r" -v w="$w" -v c="$c" \
                '{ printf "[%d/%d] round %d %-10s %-22s %9.0f IOPS %8.1f MB/s %7.1f us CPU/IO\n",
                          n, t, r, w, c, $1, $2 / 1e6, $3 }' | tee -a "$log" >&2
        done
    done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$log"
echo | tee -a "$log"

# --- Report ------------------------------------------------------------

bases=
for c in $configs; do bases+="$c=$(baseline_of "$c");"; done
titles=
for w in $workloads; do titles+="$w=$(workload_title "$w");"; done

python3 - "$results" "$bases" "$titles" "$mode" <<'EOF' | tee -a "$log"
import csv, statistics, sys

rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
base = dict(x.split("=", 1) for x in sys.argv[2].split(";") if x)
titles = dict(x.split("=", 1) for x in sys.argv[3].split(";") if x)
configs = list(base)
workloads = list(titles)

val = {}                        # (workload, config) -> {round: value}
cpu = {}                        # the same, server CPU us per I/O
for r in rows:
    w, c = r["workload"], r["config"]
    v = float(r["iops"]) if w.startswith("4k") else float(r["bw_bytes"]) / 1e6
    val.setdefault((w, c), {})[int(r["round"])] = v
    cpu.setdefault((w, c), {})[int(r["round"])] = float(r["cpu_us_per_io"])

def ratios(w, a, b):
    """Per-round ratios a/b."""
    va, vb = val.get((w, a), {}), val.get((w, b), {})
    return [va[k] / vb[k] for k in sorted(va) if k in vb and vb[k] > 0]

def med(xs):
    return statistics.median(xs) if xs else float("nan")

print("ratio: median of the per-round ratios to the baseline (vs); CPU/IO:")
print("the server's CPU time (user + system) per I/O, median, in microseconds,")
print("and its median per-round ratio to the baseline's.")
print()
for w in workloads:
    print(titles[w])
    print("  %-20s %8s %15s %6s %11s %7s %5s  %s" %
          ("configuration", "median", "min-max", "ratio", "rounds", "CPU/IO",
           "ratio", "vs"))
    for c in configs:
        vs = list(val.get((w, c), {}).values())
        if not vs:
            continue
        fmt = "%.0f" if w.startswith("4k") else "%.1f"
        b = base[c]
        rs = ratios(w, c, b)
        cs = list(cpu[(w, c)].values())
        if c == b:
            rtxt, rng, ctxt, vs_ = "", "", "", ""
        else:
            rtxt = "%.3f" % med(rs)
            rng = "%.2f-%.2f" % (min(rs), max(rs))
            cb = cpu.get((w, b), {})
            crs = [cpu[(w, c)][k] / cb[k] for k in cpu[(w, c)] if cb.get(k)]
            ctxt = "%.2f" % med(crs)
            vs_ = b
        print("  %-20s %8s %15s %6s %11s %7.1f %5s  %s" %
              (c, fmt % med(vs), (fmt % min(vs)) + "-" + (fmt % max(vs)),
               rtxt, rng, med(cs), ctxt, vs_))
    print()

# --durability-compare: coarse against flush, cell by cell, beside
# the A/A pair of the same cell.  A cell is below when its median
# per-round ratio is under 0.95 and its rounds rank below the A/A
# pair's rounds beyond chance: the one-sided exact rank-sum
# (Mann-Whitney) test of the coarse / flush ratios against the
# flush / flush ratios, p < 0.05.  (The A/A pair's rounds are the
# noise of that cell in that run; on a busy machine a single median
# of them can sit near 1.00 while the rounds spread far wider.)
def rank_p(xs, ys):
    """P(the rank sum of xs is at most the observed one), xs and ys
    exchangeable; ties count half."""
    import itertools
    allv = xs + ys
    order = sorted(range(len(allv)), key=lambda i: allv[i])
    rank = [0.0] * len(allv)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and allv[order[j + 1]] == allv[order[i]]:
            j += 1
        for k in range(i, j + 1):
            rank[order[k]] = (i + j) / 2 + 1
        i = j + 1
    obs = sum(rank[:len(xs)])
    n = total = 0
    for idx in itertools.combinations(range(len(allv)), len(xs)):
        t = sum(rank[k] for k in idx)
        total += 1
        n += 1 if t < obs - 1e-9 else 0.5 if abs(t - obs) < 1e-9 else 0
    return n / total

if sys.argv[4] == "durability":
    print("coarse / flush and the A/A pair (flush / flush), median of the")
    print("per-round ratios [min-max]; p: one-sided rank test, coarse's rounds")
    print("below the A/A's; below: median < 0.95 and p < 0.05")
    print("  %-6s %-6s %-10s %20s %20s %6s  %s" %
          ("over", "bits", "workload", "coarse / flush", "A/A", "p",
           "verdict"))
    below, below95, cells = [], [], 0
    for plugin in ("file", "null"):
        for bits, sfx in (("fresh", ""), ("set", "-dirty")):
            flush = plugin + "+bm" + sfx
            for w in workloads:
                rc = ratios(w, plugin + "+bm-coarse" + sfx, flush)
                ra = ratios(w, plugin + "+bm-aa" + sfx, flush)
                if not rc or not ra:
                    continue
                cells += 1
                mc, ma = med(rc), med(ra)
                p = rank_p(rc, ra)
                verdict = "ok"
                if mc < 0.95:
                    below95.append((plugin, bits, w))
                    verdict = "under 0.95, within the noise"
                    if p < 0.05:
                        below.append((plugin, bits, w))
                        verdict = "BELOW"
                print("  %-6s %-6s %-10s %6.3f [%.2f-%.2f] %6.3f [%.2f-%.2f] %6.3f  %s"
                      % (plugin, bits, w, mc, min(rc), max(rc),
                         ma, min(ra), max(ra), p, verdict))
    print()
    print("cells under 0.95x flush: %d of %d; below beyond the A/A noise: %d"
          % (len(below95), cells, len(below)))
    for x in below:
        print("  below beyond the noise: over %s, bits %s, %s" % x)
    print("by the rule: %s" % ("coarse can be the default" if not below
                               else "flush stays the default"))
    sys.exit(0)

# The targets, where their configurations were run.
def line(desc, w, a, b, want=None):
    rs = ratios(w, a, b)
    if not rs:
        return
    m = med(rs)
    verdict = ""
    if want is not None:
        verdict = "%-4s (want >= %.2f)" % ("met" if m >= want else "MISS", want)
    print("  %-10s %-54s %6.3f  rounds %.2f-%.2f  %s" %
          (w, desc, m, min(rs), max(rs), verdict))

print("Noise floor (two identical nbdkit file servers):")
for w in workloads:
    line("file-aa / file", w, "file-aa", "file")
print()
print("Any nbdkit filter layer (noextents passes writes straight down):")
for w in workloads:
    line("file+noextents / file", w, "file+noextents", "file")
    line("file+bm-dirty / file+noextents", w, "file+bm-dirty", "file+noextents")
print()
print("Targets (median of per-round ratios):")
for w in ("4k-rand", "4k-rand-2j"):
    line("bits set: file+bm-dirty / file", w, "file+bm-dirty", "file", 0.97)
for w in ("4k-rand", "4k-rand-2j"):
    line("fresh bitmap: file+bm / file", w, "file+bm", "file", 0.90)
line("fresh bitmap: file+bm / file", "1m-seq", "file+bm", "file", 0.97)
line("bits set: file+bm-dirty / file", "1m-seq", "file+bm-dirty", "file", 0.97)
for w in workloads:
    line("vs qemu: file+bm / qemu-qcow2-bm", w, "file+bm", "qemu-qcow2-bm", 1.0)
for w in workloads:
    line("strict, fresh: file+bm-strict / file+bm", w,
         "file+bm-strict", "file+bm", 0.5)
for w in workloads:
    line("strict, bits set: file+bm-strict-dirty / file+bm-dirty", w,
         "file+bm-strict-dirty", "file+bm-dirty", 0.97)
for w in workloads:
    line("coarse, fresh: file+bm-coarse / file+bm", w,
         "file+bm-coarse", "file+bm", 0.9)
for w in workloads:
    line("coarse, bits set: file+bm-coarse-dirty / file+bm-dirty", w,
         "file+bm-coarse-dirty", "file+bm-dirty", 0.9)
for w in workloads:
    line("coarse, fresh, over null: null+bm-coarse / null+bm", w,
         "null+bm-coarse", "null+bm", 0.9)
for w in workloads:
    line("coarse, bits set, over null: null+bm-coarse-dirty / null+bm-dirty",
         w, "null+bm-coarse-dirty", "null+bm-dirty", 0.9)
print()
print("The filter's own cost (over null, which drops writes):")
for w in workloads:
    line("null+noextents / null", w, "null+noextents", "null")
    line("null+bm-dirty / null", w, "null+bm-dirty", "null")
    line("null+bm / null", w, "null+bm", "null")
    line("null+bm-strict / null+bm", w, "null+bm-strict", "null+bm")
EOF
echo "raw results: $results; log: $log"
