#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/rollback.sh: what a rollback of a live disk to a point costs,
# with tracking and with tracking lost, against a full restore of the
# same point into the same disk and a plain read of it, side by side
# in one run.
#
#   bench/rollback.sh [--rounds=N] [--size=MIB] [--percent=P] [--dir=DIR]
#
# Once: a disk of --size MiB (1024), its first three quarters random
# data and the rest zeroes, served through the filter with a control
# socket; a repository of 2 points (c1 full; c2 after P% (1) of the
# disk's 64K chunks were rewritten).  The disk is copied aside at c2.
# Then rounds of these cells, timed:
#
#   rollback   P% of the chunks rewritten with new random data through
#              the filter (untimed), then dirtybitmap rollback DIR@c2
#              (the checkpoint's bitmap: the chunks changed since the
#              newest point are written, nothing else), then an
#              incremental backup into DIR (untimed: so that the next
#              rollback starts from a bitmap of only its own change)
#   rollback2  the same again (the A/A row: the noise floor)
#   restore    dirtybitmap restore DIR@c2 to a new file in the same
#              file system (every byte written: what a rollback saves)
#
# and, once the checkpoint is removed from the disk (tracking lost),
# rounds of:
#
#   lost       P% of the chunks rewritten (untimed), then dirtybitmap
#              rollback DIR@c2 (the disk read once and hashed, the
#              chunks that differ from c2's checksums written)
#   read       nbdcopy of the disk to null: (one plain read of it)
#
# After each cell the disk is compared with its copy at c2 (cmp,
# untimed).  Reported: per cell the median seconds, the bytes written
# (from the JSON output) against the bytes changed, and the medians of
# the per-round ratios.
#
# Needs nbdkit, nbdcopy (libnbd-bin), nbdsh with Python's nbd module,
# qemu-img and qemu-nbd, and the filter and tool built in this tree.
. "$(dirname "$0")/common.sh"
bench_start

rounds=5
size_mib=1024
percent=1
bench_options "$@"
find_built
needs nbdkit nbdcopy nbdsh python3 qemu-img qemu-nbd cmp

work="$(mktemp -d "$basedir/dirtybitmap-rollback.XXXXXX")"
cleanup ()
{
    [ -s "$work/pid" ] && kill -TERM "$(cat "$work/pid")" 2>/dev/null
    [ -n "$KEEP" ] || rm -rf "$work"
}
trap cleanup EXIT
log="$work/log"
size=$((size_mib << 20))
nchunks=$(( size >> 16 ))
nchanged=$(( (nchunks * percent + 99) / 100 ))
changed=$(( nchanged << 16 ))

{
    echo "# dirtybitmap: a rollback to a point, against a full restore and a read"
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "command: $prog $*"
    machine_info
    echo "disk: $size_mib MiB (3/4 random data, 1/4 zeroes) in $basedir;" \
         "$nchanged of its $nchunks 64K chunks ($percent%) rewritten before" \
         "each cell; $rounds rounds"
    echo
} | tee "$log"


head -c $(( size / 4 * 3 )) /dev/urandom > "$work/disk.img"
truncate -s $size "$work/disk.img"
uri="nbd+unix:///?socket=$work/sock"
nbdkit -P "$work/pid" -U "$work/sock" --filter="$FILTER" \
       file "$work/disk.img" control="$work/ctl" 2>> "$work/nbdkit.err"
wait_socket "$work/ctl"

# change SEED: P% of the chunks rewritten through the filter.
change () { bench_change "$1" "$uri"; }

"$DIRTYBITMAP" backup --repo "$work/R" --control "$work/ctl" \
    --checkpoint c1 "$uri" >> "$log" 2>&1
change 1
"$DIRTYBITMAP" backup --repo "$work/R" --control "$work/ctl" \
    --checkpoint c2 "$uri" >> "$log" 2>&1
cp "$work/disk.img" "$work/disk.c2"
sync

echo c2 > "$work/newest"
# cell NAME POINT ROUND: one line "SECONDS BYTES-WRITTEN" (POINT is c2).
cell ()
{
    local c=$1 t0 t1 json="$work/out.json" out="$work/out.img" written=0
    case $c in
        rollback|rollback2|lost)
            change "$3$c" >> "$log" 2>&1
            cmd=("$DIRTYBITMAP" rollback --output=json "$work/R@c2"
                 --control "$work/ctl" "$uri") ;;
        restore) cmd=("$DIRTYBITMAP" restore --output=json "$work/R@c2" "$out") ;;
        read) cmd=(nbdcopy "$uri" null:) ;;
    esac
    sync
    echo "== $c: ${cmd[*]}" >> "$log"
    t0=$(date +%s%N)
    "${cmd[@]}" > "$json" 2>> "$log"
    t1=$(date +%s%N)
    cat "$json" >> "$log"
    case $c in
        read) ;;
        restore)
            cmp "$work/disk.c2" "$out"
            rm -f "$out" ;;
        *)
            cmp "$work/disk.c2" "$work/disk.img" ;;
    esac
    case $c in
        rollback|rollback2)
            "$DIRTYBITMAP" backup --repo "$work/R" --control "$work/ctl" \
                --checkpoint "p$3$c" "$uri" >> "$log" 2>&1
            echo "p$3$c" > "$work/newest" ;;
    esac
    if [ $c != read ]; then
        written=$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))["disks"][0]
print(d["bytes-copied"] + d["bytes-zeroed"])' "$json")
    fi
    awk -v ns=$(( t1 - t0 )) -v w=$written 'BEGIN { printf "%.3f %d\n", ns / 1e9, w }'
}

: > "$work/results"
bench_rounds c2 rollback rollback2 restore
"$DIRTYBITMAP" bitmap --remove --control "$work/ctl" "$(cat "$work/newest")" \
    >> "$log" 2>&1
bench_rounds c2 lost read

python3 - "$work/results" $size $changed <<'EOF' | tee -a "$log"
import collections, statistics, sys
res = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    _, r, c, secs, written = line.split()
    res[c][int(r)] = (float(secs), int(written))
size, changed = int(sys.argv[2]), int(sys.argv[3])
med = statistics.median
print()
print("medians over the rounds (%d bytes changed before each cell):" % changed)
print("  %-9s %9s %14s %12s" % ("cell", "seconds", "bytes written", "/ changed"))
for c in ("rollback", "rollback2", "restore", "lost", "read"):
    t = med(x[0] for x in res[c].values())
    w = med(x[1] for x in res[c].values())
    print("  %-9s %9.3f %14d %12.3f" % (c, t, w, w / changed))
print("  time, median of the per-round ratios [min-max]:")
for a, b, note in (("rollback2", "rollback", "A/A: the noise floor"),
                   ("rollback", "restore", "target <= 0.1"),
                   ("lost", "restore", ""),
                   ("lost", "read", "one read of the disk, and the writes")):
    rs = [res[a][r][0] / res[b][r][0] for r in res[a] if r in res[b]]
    print("    %-20s %6.3f [%.3f-%.3f]  %s" % (
        "%s / %s" % (a, b), med(rs), min(rs), max(rs), note))
EOF
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$log"
cp "$log" "$basedir/dirtybitmap-rollback.log"
echo "log: $basedir/dirtybitmap-rollback.log"
