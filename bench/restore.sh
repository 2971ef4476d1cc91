#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/restore.sh: what a restore from a repository costs against
# qemu-img convert and nbdcopy of the same qcow2 chain, side by side in
# one run.
#
#   bench/restore.sh [--rounds=N] [--size=MIB] [--percent=P] [--dir=DIR]
#
# Once: a disk of --size MiB (1024), its first three quarters random
# data and the rest zeroes, served through the filter with a control
# socket; a repository of 8 points made with `dirtybitmap backup
# --repo` (c1 full, then c2 to c8, each after P% (2) of the disk's 64K
# chunks were rewritten with new random data through the filter).  The
# disk is copied aside at c1 and at c8, and each restore is compared
# with that copy (cmp, untimed).  Then, timed, for the point c1 (a
# chain of 1 image) and c8 (a chain of 8), each of these to a new file
# in the same file system, each synced to stable storage at its end:
#
#   restore    dirtybitmap restore DIR@POINT FILE (the chain served by
#              qemu-nbd, copied by the copy engine, each chunk hashed
#              and compared with the point's checksums)
#   restore2   the same again (the A/A row: the noise floor)
#   convert    qemu-img convert -t writeback -f qcow2 -O raw IMAGE FILE
#              (-t writeback: it syncs FILE at its end; its default,
#              unsafe, does not)
#   nbdcopy    nbdcopy --flush -- [ qemu-nbd -r -f qcow2 IMAGE ] FILE
#
# Cells are interleaved, the order reversed every other round; the
# images are in the page cache (just written, then `sync`), so this
# measures the tools, not the virtual disk.  Reported: per cell the
# median seconds and CPU seconds, and the median of the per-round
# ratios to nbdcopy and to convert.
#
# Needs nbdkit, nbdcopy (libnbd-bin), nbdsh with Python's nbd module,
# qemu-img and qemu-nbd, and the filter and tool built in this tree.
. "$(dirname "$0")/common.sh"
bench_start

rounds=5
size_mib=1024
percent=2
bench_options "$@"
find_built
needs nbdkit nbdcopy nbdsh python3 qemu-img qemu-nbd cmp

work="$(mktemp -d "$basedir/dirtybitmap-restore.XXXXXX")"
cleanup ()
{
    [ -s "$work/pid" ] && kill -TERM "$(cat "$work/pid")" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
log="$work/log"
size=$((size_mib << 20))
nchunks=$(( size >> 16 ))
nchanged=$(( (nchunks * percent + 99) / 100 ))

{
    echo "# dirtybitmap: a restore from a repository, against qemu-img convert and nbdcopy"
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "command: $prog $*"
    machine_info
    echo "disk: $size_mib MiB (3/4 random data, 1/4 zeroes) in $basedir;" \
         "8 points, $nchanged of its $nchunks 64K chunks ($percent%) rewritten" \
         "between two; $rounds rounds"
    echo
} | tee "$log"

# --- The repository ---------------------------------------------------

bench_repo

# --- The cells ------------------------------------------------------------

# cell NAME POINT: one line "SECONDS CPU-SECONDS".
cell ()
{
    local c=$1 p=$2 image="$work/R/disks/disk0/$2.qcow2" out="$work/out.img"
    local t0 t1
    rm -f "$out"
    case $c in
        restore|restore2) cmd=("$DIRTYBITMAP" restore "$work/R@$p" "$out") ;;
        convert) cmd=(qemu-img convert -t writeback -f qcow2 -O raw "$image" "$out") ;;
        nbdcopy) cmd=(nbdcopy --flush -- "[" qemu-nbd -r -f qcow2 "$image" "]" "$out") ;;
    esac
    echo "== $c $p: ${cmd[*]}" >> "$log"
    t0=$(date +%s%N)
    /usr/bin/time -f '%U %S' -o "$work/time" "${cmd[@]}" >> "$log" 2>&1
    t1=$(date +%s%N)
    cmp "$work/disk.$p" "$out"
    rm -f "$out"
    awk -v ns=$(( t1 - t0 )) '{ printf "%.3f %.2f\n", ns / 1e9, $1 + $2 }' \
        "$work/time"
}

: > "$work/results"
for p in c1 c8; do
    bench_rounds $p restore restore2 convert nbdcopy
done

python3 - "$work/results" $size <<'EOF' | tee -a "$log"
import collections, statistics, sys
res = collections.defaultdict(lambda: collections.defaultdict(dict))
for line in open(sys.argv[1]):
    p, r, c, secs, cpu = line.split()
    res[p][c][int(r)] = (float(secs), float(cpu))
size = int(sys.argv[2])
med = statistics.median
for p, chain in (("c1", 1), ("c8", 8)):
    cells = res[p]
    print()
    print("point %s (a chain of %d), medians over the rounds:" % (p, chain))
    print("  %-9s %9s %9s %10s" % ("cell", "seconds", "CPU s", "MB/s"))
    for c in ("restore", "restore2", "convert", "nbdcopy"):
        t = med(x[0] for x in cells[c].values())
        print("  %-9s %9.3f %9.2f %10.0f" % (
            c, t, med(x[1] for x in cells[c].values()), size / t / 1e6))
    print("  time, median of the per-round ratios [min-max]:")
    for a, b, note in (("restore2", "restore", "A/A: the noise floor"),
                       ("restore", "nbdcopy", ""),
                       ("restore", "convert", ""),
                       ("convert", "nbdcopy", "")):
        rs = [cells[a][r][0] / cells[b][r][0] for r in cells[a] if r in cells[b]]
        print("    %-20s %6.3f [%.2f-%.2f]  %s" % (
            "%s / %s" % (a, b), med(rs), min(rs), max(rs), note))
EOF
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$log"
cp "$log" "$basedir/dirtybitmap-restore.log"
echo "log: $basedir/dirtybitmap-restore.log"
