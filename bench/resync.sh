#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/resync.sh: what a lost bitmap costs: a resync against a full
# backup and against a full read by nbdcopy, side by side in one run.
#
#   bench/resync.sh [--rounds=N] [--size=MIB] [--percent=P] [--dir=DIR]
#
# Every cell starts the same way, in a fresh directory of DIR: a disk
# of --size MiB (1024) full of random data, served through the filter
# with a control socket (no bitmap=, no action=: a start keeps every
# bitmap); a full `dirtybitmap backup --checkpoint c1` to backup.img
# (which leaves the checksums backup.img.c1.sums beside it); then P%
# (1) of the disk's 64K chunks rewritten with new random data, all but
# one through the filter (bitmap c1 records them); the server stopped,
# the last chunk written without the filter (dd into the file), and the
# server started again: it finds the disk written behind its back and
# marks c1 inconsistent.  Then, timed, one of:
#
#   resync    dirtybitmap backup --incremental c1 --checkpoint c2 into
#             backup.img (the previous backup): c1 cannot be trusted,
#             the checksums can, so the whole disk is read and only
#             the chunks whose digest differs are written
#   full      dirtybitmap backup --checkpoint c2 into a new file
#   nbdcopy   nbdcopy of the same export to null: (a full read, the
#             floor of any backup that must read the whole disk)
#   nbdcopy2  the same again (the A/A row: the noise floor)
#
# Cells are interleaved, the order reversed every other round; the
# data are in the page cache (each cell's disk was just written, and
# `sync` runs before the timed step), so the reads cost CPU, not the
# virtual disk, which is the case where hashing would show.  Each
# backup's target is checked with cmp against the disk, and the
# resync's bytes written (JSON bytes-copied + bytes-zeroed) against
# the bytes of the chunks changed.  Also measured: XXH3-128's speed on
# this machine (libxxhash, as dirtybitmap uses it, one thread, 64K
# chunks), and the client's CPU time.
#
# Needs nbdkit, nbdcopy (libnbd-bin), nbdsh with Python's nbd module,
# cc and libxxhash-dev (for the hash's speed), and the filter and tool
# built in this tree.  See BENCHMARKS.md.
. "$(dirname "$0")/common.sh"
bench_start

rounds=6
size_mib=1024
percent=1
bench_options "$@"
find_built
needs nbdkit nbdcopy nbdsh python3 cc cmp

work="$(mktemp -d "$basedir/dirtybitmap-resync.XXXXXX")"
cleanup ()
{
    local p
    for p in "$work"/cell/pid; do
        [ -s "$p" ] && kill -TERM "$(cat "$p")" 2>/dev/null
    done
    rm -rf "$work"
}
trap cleanup EXIT
log="$work/log"
size=$((size_mib << 20))
chunk=65536
nchunks=$(( size / chunk ))
nchanged=$(( (nchunks * percent + 99) / 100 ))

{
    echo "# dirtybitmap: what a lost bitmap costs (resync)"
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "command: $prog $*"
    machine_info
    echo "disk: $size_mib MiB of random data in $basedir; $nchanged of its" \
         "$nchunks 64K chunks ($percent%) changed after the backup c1," \
         "the last one without the filter; $rounds rounds"
    echo
} | tee "$log"

# --- XXH3-128 on this machine -------------------------------------------

cc -O2 -o "$work/xxh3speed" -x c - -lxxhash <<'EOF'
/* XXH3-128 over 64K chunks of a buffer, one thread, as sums_hash. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>
int
main (int argc, char **argv)
{
  size_t size = strtoull (argv[1], NULL, 0), chunk = 65536, pass, i;
  unsigned passes = atoi (argv[2]);
  unsigned char *buf = malloc (size);
  struct timespec a, b;
  XXH128_hash_t h = { 0, 0 };
  for (i = 0; i < size; ++i)
    buf[i] = rand ();
  clock_gettime (CLOCK_MONOTONIC, &a);
  for (pass = 0; pass < passes; ++pass)
    for (i = 0; i < size; i += chunk) {
      XXH128_hash_t x = XXH3_128bits (buf + i, chunk);
      h.low64 ^= x.low64;
      h.high64 ^= x.high64;
    }
  clock_gettime (CLOCK_MONOTONIC, &b);
  printf ("%.0f\n", (double) size * passes /
          ((b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9));
  return h.low64 == 42;
}
EOF
# Median of 5: a buffer that fits in the cache (1 MiB: the tool hashes
# what it has just read), and 256 MiB (from memory).
speed ()
{
    local i
    for i in 1 2 3 4 5; do "$work/xxh3speed" "$1" "$2"; done |
        sort -n | sed -n 3p
}
hash_hot=$(speed $((1 << 20)) 4096)
hash_mem=$(speed $((256 << 20)) 16)
{
    echo "XXH3-128 (libxxhash $(dpkg-query -W -f '${Version}' libxxhash0 2>/dev/null), one thread, 64K chunks, median of 5):"
    awk -v h=$hash_hot -v m=$hash_mem -v s=$size 'BEGIN {
        printf "  from the cache (1 MiB buffer): %.2f GB/s\n", h / 1e9
        printf "  from memory (256 MiB buffer):  %.2f GB/s\n", m / 1e9
        printf "  so %.3f to %.3f s of one CPU to hash the whole disk\n", s / h, s / m }'
    echo
} | tee -a "$log"

# --- The cells ------------------------------------------------------------

head -c $size /dev/urandom > "$work/master.img"
# The chunks to change: the same every cell.
python3 -c "
import random
random.seed(20)
print('\n'.join(str(k) for k in sorted(random.sample(range($nchunks), $nchanged))))
" > "$work/chunks"
outside=$(tail -1 "$work/chunks")

start ()
{
    rm -f "$d/sock" "$d/ctl"
    nbdkit --log=stderr -P "$d/pid" -U "$d/sock" --filter="$FILTER" \
           file "$d/disk.img" control="$d/ctl" 2>> "$d/nbdkit.err"
    wait_socket "$d/ctl"
    wait_socket "$d/sock"
}
stop ()
{
    local pid
    pid=$(cat "$d/pid" 2>/dev/null) || return 0
    kill -TERM "$pid" 2>/dev/null || :
    while alive "$pid"; do sleep 0.05; done
    rm -f "$d/pid"
}

# prepare: the state every cell starts from (above).
prepare ()
{
    d="$work/cell"
    rm -rf "$d"; mkdir "$d"
    cp "$work/master.img" "$d/disk.img"
    uri="nbd+unix:///?socket=$d/sock"
    start
    "$DIRTYBITMAP" backup --control "$d/ctl" --checkpoint c1 \
        "$uri" "$d/backup.img" >> "$log" 2>&1
    [ -f "$d/backup.img.c1.sums" ] ||
        { echo "$prog: the full backup left no checksums" >&2; exit 1; }
    head -n -1 "$work/chunks" | nbdsh -u "$uri" -c '
import os, sys
for line in sys.stdin:
    h.pwrite(os.urandom(65536), int(line) << 16)
h.flush()
'
    stop
    head -c $chunk /dev/urandom |
        dd of="$d/disk.img" bs=$chunk seek=$outside conv=notrunc status=none
    start
    grep -q 'written without the filter' "$d/nbdkit.err" ||
        { echo "$prog: the start did not see the write without the filter" >&2
          cat "$d/nbdkit.err" >&2; exit 1; }
    sync
}

# cell NAME: one line "SECONDS CPU-SECONDS READ WRITTEN MODE".
cell ()
{
    local c=$1 t0 t1 out cpu
    prepare
    out="$d/out.json"
    case $c in
        resync)
            cmd=("$DIRTYBITMAP" backup --control "$d/ctl" --incremental c1
                 --checkpoint c2 --output=json "$uri" "$d/backup.img") ;;
        full)
            cmd=("$DIRTYBITMAP" backup --control "$d/ctl" --checkpoint c2
                 --output=json "$uri" "$d/full.img") ;;
        nbdcopy|nbdcopy2)
            cmd=(nbdcopy "$uri" null:) ;;
    esac
    echo "== $c: ${cmd[*]}" >> "$log"
    t0=$(date +%s%N)
    /usr/bin/time -f '%U %S' -o "$d/time" "${cmd[@]}" > "$out" 2>> "$log"
    t1=$(date +%s%N)
    cpu=$(awk '{ print $1 + $2 }' "$d/time")
    case $c in
        resync) cmp "$d/disk.img" "$d/backup.img" ;;
        full) cmp "$d/disk.img" "$d/full.img" ;;
    esac
    [ -s "$out" ] && cat "$out" >> "$log" && echo >> "$log"
    python3 - "$out" $c $(( t1 - t0 )) "$cpu" $size <<'EOF'
import json, sys
out, c, ns, cpu, size = sys.argv[1:6]
if c.startswith("nbdcopy"):
    read, written, mode = int(size), 0, "-"
else:
    j = json.load(open(out))
    assert j["result"] == "complete", j
    read = j["bytes-read"]
    written = j["bytes-copied"] + j["bytes-zeroed"]
    mode = j["disks"][0]["mode"]
print("%.3f %.2f %d %d %s" % (int(ns) / 1e9, float(cpu), read, written, mode))
EOF
    stop
    rm -rf "$d"
}

cells=(resync full nbdcopy nbdcopy2)
: > "$work/results"
printf '%-6s' round | tee -a "$log"; printf ' %10s' "${cells[@]}" | tee -a "$log"; echo | tee -a "$log"
for (( r = 1; r <= rounds; ++r )); do
    order=("${cells[@]}")
    if (( r % 2 == 0 )); then
        order=()
        for (( i = ${#cells[@]} - 1; i >= 0; --i )); do order+=("${cells[i]}"); done
    fi
    declare -A t=()
    for c in "${order[@]}"; do
        v=$(cell $c)
        echo "$r $c $v" >> "$work/results"
        t[$c]=${v%% *}
    done
    printf '%-6s' $r | tee -a "$log"
    for c in "${cells[@]}"; do printf ' %9ss' "${t[$c]}"; done | tee -a "$log"
    echo | tee -a "$log"
done

python3 - "$work/results" $size $((nchanged * chunk)) "$hash_hot" "$hash_mem" <<'EOF' | tee -a "$log"
import collections, statistics, sys
res = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    r, c, secs, cpu, read, written, mode = line.split()
    res[c][int(r)] = dict(t=float(secs), cpu=float(cpu), read=int(read),
                          written=int(written), mode=mode)
size, changed = int(sys.argv[2]), int(sys.argv[3])
hot, mem = float(sys.argv[4]), float(sys.argv[5])
med = statistics.median
def ratio(a, b):
    rs = [res[a][r]["t"] / res[b][r]["t"] for r in res[a] if r in res[b]]
    return med(rs), min(rs), max(rs)
def mib(x):
    return "%.1f MiB" % (x / 2**20)
print()
print("per cell, medians over the rounds:")
print("  %-9s %9s %9s %12s %12s %8s  %s" % ("cell", "seconds", "CPU s",
      "read", "written", "/changed", "mode"))
for c in ("resync", "full", "nbdcopy", "nbdcopy2"):
    v = res[c].values()
    w = med(x["written"] for x in v)
    print("  %-9s %9.3f %9.2f %12s %12s %8s  %s" % (
        c, med(x["t"] for x in v), med(x["cpu"] for x in v),
        mib(med(x["read"] for x in v)), mib(w),
        "%.3f" % (w / changed) if not c.startswith("nbdcopy") else "-",
        ",".join(sorted(set(x["mode"] for x in v)))))
print("  changed: %s (%d chunks of 64K)" % (mib(changed), changed // 65536))
print()
print("time, median of the per-round ratios [min-max]:")
for name, a, b, note in (
        ("nbdcopy2 / nbdcopy", "nbdcopy2", "nbdcopy", "A/A: the noise floor"),
        ("resync / nbdcopy", "resync", "nbdcopy", "target <= 1.10"),
        ("resync / full", "resync", "full", ""),
        ("full / nbdcopy", "full", "nbdcopy", "")):
    m, lo, hi = ratio(a, b)
    print("  %-20s %6.3f [%.2f-%.2f]  %s" % (name, m, lo, hi, note))
print()
w = max(x["written"] for x in res["resync"].values())
print("targets:")
print("  written <= 1.1x changed: %.3f (the most of any round): %s" %
      (w / changed, "met" if w <= 1.1 * changed else "MISSED"))
m = ratio("resync", "nbdcopy")[0]
print("  time <= 1.1x nbdcopy's full read: %.3f: %s" %
      (m, "met" if m <= 1.1 else "MISSED"))
t = med(x["t"] for x in res["resync"].values())
print("  hashing the whole disk takes %.3f to %.3f s of one CPU: %.0f%% to "
      "%.0f%% of the resync's %.3f s" % (size / hot, size / mem,
      100 * size / hot / t, 100 * size / mem / t, t))
EOF
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$log"
cp "$log" "$basedir/dirtybitmap-resync.log"
echo "log: $basedir/dirtybitmap-resync.log"
