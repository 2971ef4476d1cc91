#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/live.sh: the costs of live operation, side by side in one run.
#
#   bench/live.sh [--rounds N] [--runtime SECONDS] [--parts LIST]
#                 [--dir DIR]
#
# Parts (--parts=rotate,view,during,copy; all by default):
#
#   rotate  A checkpoint rotation (one transaction: add the next bitmap,
#           disable the previous) through the control socket, 100 times,
#           50 ms apart, on a 1 TiB null disk at 64K granularity while
#           fio writes 4K at random, QD16.  Reports each rotation's
#           latency (median, p99) and fio's p99 write latency with the
#           rotations against without them (and an A/A pair without).
#   view    fio 4K random writes, QD16, on a 1 GiB disk full of data
#           (not sparse: copy-before-write has real data to keep), per
#           cell: nbdkit file without the filter, with the filter, with
#           the filter and a full backup view open; qemu-storage-daemon
#           raw export, and with a copy-before-write node (scratch
#           qcow2) and a snapshot-access export open.  Each cell has a
#           fresh disk and server; cells interleaved, order reversed
#           every other round; medians of per-round ratios.  Each
#           round also times a read of the whole disk, cold, in 64K
#           random reads at QD16 (fio): what copy-before-write must
#           read before the first write to each granule goes down.
#   during  fio 4K random writes, QD16, on that disk while backups of
#           it run back to back (the first full, then incrementals,
#           each from the last one's checkpoint), the scratch store
#           in its default place (beside the disk): the writes'
#           throughput, p99, p99.9 and longest latency against nbdkit
#           file without a backup (and an A/A pair), nbdkit file with
#           nbdcopy reading the live disk over and over (the same
#           copying, no point in time: what the copy's own load
#           costs), and qemu-storage-daemon's copy-before-write with
#           nbdcopy reading its snapshot-access export over and over.
#           With FILTER_B=PATH, a cell of that build of the filter too.
#   copy    dirtybitmap backup (full) of that disk, against nbdcopy of
#           the same disk served without a view; and the scratch space
#           a backup leaves when a writer touched a known number of
#           granules during it.
#
# Needs fio with the nbd engine, nbdcopy, qemu-storage-daemon and
# qemu-img (Debian: fio, libnbd-bin, qemu-system-common, qemu-utils).
# Read BENCHMARKS.md for the method; BENCH-NOTES for the noise.
set -e
shopt -s inherit_errexit
export PATH="/usr/sbin:/usr/bin:/sbin:/bin:$PATH"

prog=bench/live.sh
here="$(cd "$(dirname "$0")" && pwd)"
top="$(cd "$here/.." && pwd)"
basedir="${TMPDIR:-/tmp}"
. "$here/common.sh"

rounds=3
runtime=8
parts=rotate,view,during,copy
for arg in "$@"; do
    case "$arg" in
        --rounds=*) rounds="${arg#*=}" ;;
        --runtime=*) runtime="${arg#*=}" ;;
        --parts=*) parts="${arg#*=}" ;;
        --dir=*) basedir="${arg#*=}" ;;
        -h|--help) sed -n '3,/^set -e/p' "$0" | sed 's/^# \{0,1\}//;$d'; exit 0 ;;
        *) echo "$prog: unknown option $arg (see --help)" >&2; exit 1 ;;
    esac
done
find_built
for p in fio nbdcopy qemu-storage-daemon qemu-img python3; do
    command -v $p >/dev/null || { echo "$prog: needs $p" >&2; exit 1; }
done
work="$(mktemp -d "$basedir/dirtybitmap-live.XXXXXX")"
trap 'for p in "$work"/*.pid; do [ -s "$p" ] && kill "$(cat "$p")" 2>/dev/null; done; rm -rf "$work"' EXIT
log="$work/log"
{ echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "command: $prog $*"; machine_info; echo; } | tee "$log"

# stop PIDFILE
stop () {
    local pid
    pid=$(cat "$1" 2>/dev/null) || return 0
    kill "$pid" 2>/dev/null || :
    while alive "$pid"; do sleep 0.05; done
    rm -f "$1"
}
# fio_run URI SECONDS OUT: 4K random writes, QD16, one job.
fio_run () {
    fio --name=w --ioengine=nbd --uri="$1" --rw=randwrite --bs=4k \
        --iodepth=16 --time_based --runtime="$2" --norandommap \
        --output-format=json --output="$3" >/dev/null
}
# iops FILE / p99 FILE (microseconds)
iops () { python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["jobs"][0]["write"]["iops"]))' "$1"; }
p99 () { python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["jobs"][0]["write"]["clat_ns"]["percentile"]["99.000000"]/1000))' "$1"; }
# lat FILE: "p99 p99.9 max" of the writes' latencies, in ms
lat () { python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["jobs"][0]["write"]["clat_ns"]; p=c["percentile"]; print("%.2f %.2f %.1f" % (p["99.000000"]/1e6, p["99.900000"]/1e6, c["max"]/1e6))' "$1"; }
median () { python3 -c 'import statistics,sys; print(round(statistics.median(float(x) for x in sys.argv[1:]), 3))' "$@"; }
# round_order R CELL...: the cells in order, reversed every other round.
round_order () {
    local r=$1 i; shift
    local c=("$@")
    if (( r % 2 == 0 )); then
        for (( i = ${#c[@]} - 1; i >= 0; --i )); do echo "${c[$i]}"; done
    else
        printf '%s\n' "${c[@]}"
    fi
}
# ratio_of ARRAY A B: the median over the rounds of ARRAY[A,r] / ARRAY[B,r].
ratio_of () {
    local -n _of=$1
    local r v=()
    for (( r = 1; r <= rounds; ++r )); do
        v+=("$(python3 -c "print(${_of[$2,$r]} / ${_of[$3,$r]})")")
    done
    median "${v[@]}"
}
ctl () {
    python3 - "$1" "$2" <<'EOF'
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
f = s.makefile("rw"); f.write(json.dumps(json.loads(sys.argv[2])) + "\n")
f.flush()
r = json.loads(f.readline())
if "return" not in r: sys.exit(r["error"]["desc"])
print(json.dumps(r["return"]))
EOF
}

# --- rotate -----------------------------------------------------------
if [[ ,$parts, == *,rotate,* ]]; then
    echo "## rotate: 100 rotations (add + disable) on a 1 TiB disk at 64K" | tee -a "$log"
    w="$work/rot"; mkdir -p "$w"
    for cell in without-a with without-b; do
        rm -f "$w/bitmaps" "$w/sock" "$w/ctl"
        nbdkit -P "$w/pid" -U "$w/sock" --filter="$FILTER" null 1T \
               bitmap-file="$w/bitmaps" bitmap=b0 action=add granularity=64K \
               control="$w/ctl"
        wait_socket "$w/sock"
        uri="nbd+unix:///?socket=$w/sock"
        fio_run "$uri" "$runtime" "$w/fio-$cell.json" &
        fio=$!
        if [ $cell = with ]; then
            sleep 0.5
            python3 - "$w/ctl" > "$w/rot.txt" <<'EOF'
import json, socket, sys, time
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
f = s.makefile("rw")
for k in range(1, 101):
    req = {"execute": "transaction", "arguments": {"actions": [
        {"action": "add", "bitmap": "b%d" % k, "granularity": 65536},
        {"action": "disable", "bitmap": "b%d" % (k - 1)}]}}
    t = time.monotonic()
    f.write(json.dumps(req) + "\n"); f.flush()
    r = json.loads(f.readline())
    print("%.3f" % ((time.monotonic() - t) * 1000))
    assert "return" in r, r
    time.sleep(0.05)
EOF
        fi
        wait $fio
        stop "$w/pid"
        echo "$cell: $(iops "$w/fio-$cell.json") IOPS, p99 write latency $(p99 "$w/fio-$cell.json") us" | tee -a "$log"
    done
    python3 - "$w/rot.txt" <<'EOF' | tee -a "$log"
import statistics, sys
v = sorted(float(x) for x in open(sys.argv[1]))
print("rotation latency over %d: median %.2f ms, p99 %.2f ms, max %.2f ms"
      % (len(v), statistics.median(v), v[int(len(v) * 0.99) - 1], v[-1]))
EOF
    a=$(p99 "$w/fio-without-a.json"); b=$(p99 "$w/fio-without-b.json")
    c=$(p99 "$w/fio-with.json")
    echo "writers' p99 with rotations / without: $(python3 -c "print(round($c / ((${a} + ${b}) / 2), 2))") (A/A without-b / without-a: $(python3 -c "print(round($b / $a, 2))"))" | tee -a "$log"
    echo | tee -a "$log"
fi

# --- view and copy: a 1 GiB disk full of data ---------------------------
size=$((1 << 30))
make_disk () {
    if [ ! -f "$work/master.img" ]; then
        head -c $size /dev/urandom > "$work/master.img"
    fi
    cp "$work/master.img" "$1"
}

# view_cell NAME [FILTER]: start the cell's server on $w/sock, its URI
# in $uri; filter and view with FILTER if given.
view_cell () {
    local c=$1
    w="$work/$c"; rm -rf "$w"; mkdir -p "$w"
    make_disk "$w/disk.img"
    case $c in
        file)
            nbdkit -P "$w/pid" -U "$w/sock" file "$w/disk.img"
            uri="nbd+unix:///?socket=$w/sock" ;;
        filter|view)
            nbdkit -P "$w/pid" -U "$w/sock" --filter="${2:-$FILTER}" \
                   file "$w/disk.img" bitmap=b0 action=add control="$w/ctl"
            uri="nbd+unix:///?socket=$w/sock"
            wait_socket "$w/ctl"
            if [ $c = view ]; then
                nbdinfo --size "$uri" >/dev/null
                ctl "$w/ctl" '{"execute": "backup-begin", "arguments": {"name": "v"}}' >/dev/null
            fi ;;
        qsd|qsd-cbw)
            qemu-img create -q -f qcow2 "$w/tmp.qcow2" $size
            local extra=() snap=() export=disk0
            if [ $c = qsd-cbw ]; then
                extra=(--blockdev "driver=file,filename=$w/tmp.qcow2,node-name=tmpf"
                       --blockdev "driver=qcow2,file=tmpf,node-name=tmp0,backing=disk0"
                       --blockdev "driver=copy-before-write,file=disk0,target=tmp0,node-name=cbw0"
                       --blockdev "driver=snapshot-access,file=cbw0,node-name=acc0")
                snap=(--export "type=nbd,id=e1,node-name=acc0,name=snap")
                export=cbw0
            fi
            qemu-storage-daemon --daemonize --pidfile "$w/pid" \
                --blockdev "driver=file,filename=$w/disk.img,node-name=disk0,aio=threads" \
                "${extra[@]}" \
                --nbd-server "addr.type=unix,addr.path=$w/sock" \
                --export "type=nbd,id=e0,node-name=$export,name=disk,writable=on" \
                "${snap[@]}"
            uri="nbd+unix:///disk?socket=$w/sock" ;;
    esac
    wait_socket "$w/sock"
}

if [[ ,$parts, == *,view,* ]]; then
    echo "## view: fio 4K random writes QD16, ${runtime}s, 1 GiB disk full of data, $rounds rounds" | tee -a "$log"
    cells=(file filter view qsd qsd-cbw file2)
    declare -A got
    for (( r = 1; r <= rounds; ++r )); do
        mapfile -t order < <(round_order $r "${cells[@]}")
        line="round $r:"
        for c in "${order[@]}"; do
            view_cell "${c%2}"
            sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || :
            fio_run "$uri" "$runtime" "$w/fio.json"
            got[$c,$r]=$(iops "$w/fio.json")
            line="$line $c=${got[$c,$r]}"
            if [ $c = view ]; then
                ctl "$w/ctl" '{"execute": "query"}' > "$w/q.json"
                line="$line(scratch $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["backup"]["scratch-bytes"] >> 20)' "$w/q.json") MiB)"
            fi
            stop "$w/pid"
            rm -rf "$w"
        done
        # The granules' old data, read cold the way the view reads it.
        view_cell file
        sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || :
        fio --name=r --ioengine=nbd --uri="$uri" --rw=randread --bs=64k \
            --iodepth=16 --output-format=json --output="$w/read.json" >/dev/null
        got[cold,$r]=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["jobs"][0]["read"]["runtime"] / 1000)' "$w/read.json")
        stop "$w/pid"; rm -rf "$w"
        echo "$line cold-read=${got[cold,$r]}s" | tee -a "$log"
    done
    ratio () { ratio_of got "$@"; }
    {
        echo "medians of per-round ratios (IOPS):"
        echo "  filter / file        $(ratio filter file)    (target >= 0.97)"
        echo "  view / file          $(ratio view file)    (target >= 0.95)"
        echo "  view / qsd-cbw       $(ratio view qsd-cbw)    (target >= 2)"
        echo "  qsd / file           $(ratio qsd file)"
        echo "  qsd-cbw / file       $(ratio qsd-cbw file)"
        echo "  file2 / file (A/A)   $(ratio file2 file)"
        cold=()
        for (( r = 1; r <= rounds; ++r )); do cold+=("${got[cold,$r]}"); done
        cold=$(median "${cold[@]}")
        echo "  the disk read cold in 64K random reads, QD16: ${cold} s (median);"
        echo "  a run of ${runtime} s that waits for it reaches about $(python3 -c "print(round(($runtime - $cold) / $runtime, 3))") of file"
        echo
    } | tee -a "$log"
fi

# --- during: writes while backups run ----------------------------------
if [[ ,$parts, == *,during,* ]]; then
    echo "## during: fio 4K random writes QD16, ${runtime}s, 1 GiB disk full of data, backups back to back, $rounds rounds" | tee -a "$log"
    cells=(file read backup qsd-cbw file2)
    [ -n "$FILTER_B" ] && cells=(file read backup backup-b qsd-cbw file2)
    declare -A dgot dlat
    for (( r = 1; r <= rounds; ++r )); do
        mapfile -t order < <(round_order $r "${cells[@]}")
        line="round $r:"
        for c in "${order[@]}"; do
            case $c in
                file|file2|read) view_cell file ;;
                backup) view_cell filter ;;
                backup-b) view_cell filter "$FILTER_B" ;;
                qsd-cbw) view_cell qsd-cbw ;;
            esac
            sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || :
            fio_run "$uri" "$runtime" "$w/fio.json" &
            fio_pid=$!
            k=0
            while alive $fio_pid; do
                case $c in
                    backup|backup-b)
                        inc=(); (( k > 0 )) && inc=(--incremental c$k --remove-incremental)
                        "$DIRTYBITMAP" backup --control "$w/ctl" --checkpoint c$((k + 1)) \
                            "${inc[@]}" "$uri" "$w/out.img" >/dev/null ;;
                    qsd-cbw)
                        nbdcopy "nbd+unix:///snap?socket=$w/sock" "$w/out.img" ;;
                    read)
                        nbdcopy "$uri" "$w/out.img" ;;
                    *)
                        wait $fio_pid; continue ;;
                esac
                k=$((k + 1))
            done
            wait $fio_pid
            dgot[$c,$r]=$(iops "$w/fio.json")
            dlat[$c,$r]=$(lat "$w/fio.json")
            line="$line $c=${dgot[$c,$r]} ($k copies; p99 p99.9 max ${dlat[$c,$r]// / } ms)"
            stop "$w/pid"
            rm -rf "$w"
        done
        echo "$line" | tee -a "$log"
    done
    dmed () {   # dmed CELL FIELD: median over the rounds of lat's FIELD
        local r v=()
        for (( r = 1; r <= rounds; ++r )); do
            v+=("$(echo ${dlat[$1,$r]} | cut -d' ' -f$2)")
        done
        median "${v[@]}"
    }
    {
        echo "medians over the rounds: IOPS / file, IOPS / read; latency p99, p99.9, max (ms):"
        for c in "${cells[@]}"; do
            printf '  %-8s %6s %6s   %8s %8s %8s\n' $c "$(ratio_of dgot $c file)" "$(ratio_of dgot $c read)" \
                   "$(dmed $c 1)" "$(dmed $c 2)" "$(dmed $c 3)"
        done
        echo
    } | tee -a "$log"
fi

if [[ ,$parts, == *,copy,* ]]; then
    echo "## copy: a full backup of the 1 GiB disk, $rounds rounds" | tee -a "$log"
    declare -A t
    for (( r = 1; r <= rounds; ++r )); do
        line="round $r:"
        for c in backup nbdcopy backup2; do
            w="$work/copy"; rm -rf "$w"; mkdir -p "$w"
            make_disk "$w/disk.img"
            sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || :
            if [ $c = nbdcopy ]; then
                nbdkit -P "$w/pid" -U "$w/sock" -r file "$w/disk.img"
                wait_socket "$w/sock"
                s=$(date +%s.%N)
                nbdcopy --flush "nbd+unix:///?socket=$w/sock" "$w/out.img"
            else
                nbdkit -P "$w/pid" -U "$w/sock" --filter="$FILTER" \
                       file "$w/disk.img" control="$w/ctl"
                wait_socket "$w/ctl"
                nbdinfo --size "nbd+unix:///?socket=$w/sock" >/dev/null
                s=$(date +%s.%N)
                "$DIRTYBITMAP" backup --control "$w/ctl" --checkpoint c1 \
                    "nbd+unix:///?socket=$w/sock" "$w/out.img" >/dev/null
            fi
            e=$(date +%s.%N)
            t[$c,$r]=$(python3 -c "print(round($e - $s, 3))")
            cmp "$w/disk.img" "$w/out.img"
            stop "$w/pid"
            line="$line $c=${t[$c,$r]}s"
        done
        echo "$line" | tee -a "$log"
    done
    v=(); a=()
    for (( r = 1; r <= rounds; ++r )); do
        v+=("$(python3 -c "print(${t[nbdcopy,$r]} / ${t[backup,$r]})")")
        a+=("$(python3 -c "print(${t[backup,$r]} / ${t[backup2,$r]})")")
    done
    echo "speed of backup relative to nbdcopy (nbdcopy time / backup time), median: $(median "${v[@]}")  (target >= 0.9; A/A $(median "${a[@]}"))" | tee -a "$log"

    # Scratch left at the end: a writer touches 100 known granules of
    # the view during the backup (each written twice), slowly.
    w="$work/scratch"; rm -rf "$w"; mkdir -p "$w"
    make_disk "$w/disk.img"
    nbdkit -P "$w/pid" -U "$w/sock" --filter="$FILTER" \
           file "$w/disk.img" control="$w/ctl"
    wait_socket "$w/ctl"
    uri="nbd+unix:///?socket=$w/sock"
    nbdinfo --size "$uri" >/dev/null
    ctl "$w/ctl" '{"execute": "backup-begin", "arguments": {"name": "v"}}' >/dev/null
    nbdsh -u "$uri" -c '
for k in range(2):
    for i in range(100):
        h.pwrite(b"x" * 4096, i * 10 * 65536 + k * 4096)
'
    ctl "$w/ctl" '{"execute": "query"}' > "$w/q1.json"
    "$DIRTYBITMAP" copy --full --trim-source "nbd+unix:///v?socket=$w/sock" "$w/out.img" >/dev/null
    ctl "$w/ctl" '{"execute": "query"}' > "$w/q2.json"
    python3 - "$w/q1.json" "$w/q2.json" <<'EOF' | tee -a "$log"
import json, sys
b1 = json.load(open(sys.argv[1]))["backup"]
b2 = json.load(open(sys.argv[2]))["backup"]
print("scratch after writes to 100 granules of 64K: %d KiB used, %d KiB "
      "preserved (100 granules = 6400 KiB); after the copy released "
      "them: %d KiB" % (b1["scratch-bytes"] >> 10, b1["preserved-bytes"] >> 10,
                        b2["scratch-bytes"] >> 10))
EOF
    stop "$w/pid"
fi
echo "log: $log (copied to $basedir/dirtybitmap-live.log)"
cp "$log" "$basedir/dirtybitmap-live.log"
