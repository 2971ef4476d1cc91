#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/copy.sh: how fast dirtybitmap copy is.
#
#   bench/copy.sh [--rounds N] [--size MIB] [--dirty PERCENT] [--dir DIR]
#
# Each round times, on the same source (a disk of random data served
# by nbdkit's file plugin through the filter, bitmap b0, read-only),
# in an order that is reversed every other round:
#
#   full    dirtybitmap copy --full to a new file
#   full2   the same again (the A/A row: the noise floor)
#   nbdcopy nbdcopy --flush to a new file (dirtybitmap copy flushes too)
#   incr    dirtybitmap copy of PERCENT% dirty data (64K writes spread
#           over the disk, a new checkpoint each round) to a copy of
#           the disk
#
# and prints the times of each round, then the median over the rounds
# of the per-round ratios.  A fresh server and target for every cell.
# Other work on the machine shows up as noise: read the A/A row first.
# The disk and the targets live in DIR (default /tmp); a tmpfs such as
# /dev/shm takes the disk's writeback out of the measurement.
set -e
# set -e holds inside $(...) too: t[$c]=$(cell $c) stops the run when
# any step of the cell fails, not only its last command.
shopt -s inherit_errexit
top="$(cd "$(dirname "$0")/.." && pwd)"
rounds=5
size_mib=1024
dirty=1
dir=/tmp
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds="$2"; shift 2 ;;
        --size) size_mib="$2"; shift 2 ;;
        --dirty) dirty="$2"; shift 2 ;;
        --dir) dir="$2"; shift 2 ;;
        *) echo "usage: $0 [--rounds N] [--size MIB] [--dirty PERCENT] [--dir DIR]" >&2
           exit 1 ;;
    esac
done

export PATH="$top/tool:/usr/sbin:/usr/bin:/sbin:/bin"
filter="$top/filter/.libs/nbdkit-dirtybitmap-filter.so"
for f in "$filter" "$top/tool/dirtybitmap"; do
    [ -e "$f" ] || { echo "$0: $f: build first (make)" >&2; exit 1; }
done
work="$(mktemp -d "$dir/dirtybitmap-bench-copy.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cd "$work"

echo "# $size_mib MiB disk of random data in $dir, $dirty% dirty for incr, $rounds rounds"
head -c $((size_mib << 20)) /dev/urandom > disk.img
nbdkit -U - --filter="$filter" file disk.img bitmap=b0 action=add \
       --run true

# serve CMD: run CMD with $uri of a fresh read-only server of disk.img
# through the filter; prints the seconds CMD took.
serve ()
{
    nbdkit -U - -r --filter="$filter" file disk.img bitmap=b0 --run '
        start=$(date +%s%N)
        '"$1"' >/dev/null 2>&1 || exit 1
        end=$(date +%s%N)
        awk -v s=$start -v e=$end "BEGIN { printf \"%.3f\\n\", (e - s) / 1e9 }"'
}

cell ()
{
    rm -f target.img
    sync
    case "$1" in
        full|full2) serve 'dirtybitmap copy --full "$uri" target.img' ;;
        nbdcopy) serve 'nbdcopy --flush "$uri" target.img' ;;
        incr)
            # A new checkpoint, then PERCENT% of the disk in 64K writes.
            nbdkit -U - --filter="$filter" file disk.img bitmap=b0 \
                   action=clear --run 'nbdsh -u "$uri" -c "
import random
size, n = h.get_size(), '"$((size_mib * 16 * dirty / 100))"'
for i in random.sample(range(size >> 16), n):
    h.pwrite(random.randbytes(65536), i << 16)
"'
            cp disk.img target.img
            sync
            serve 'dirtybitmap copy "$uri" target.img'
            ;;
    esac
    cmp disk.img target.img >&2 || { echo "$0: $1: copy differs" >&2; exit 1; }
}

cells=(full nbdcopy incr full2)
printf '%-6s' round; printf ' %8s' "${cells[@]}"; echo
results=()
for (( r = 1; r <= rounds; ++r )); do
    order=("${cells[@]}")
    if (( r % 2 == 0 )); then
        order=(full2 incr nbdcopy full)
    fi
    declare -A t=()
    for c in "${order[@]}"; do
        t[$c]=$(cell $c)
    done
    printf '%-6s' $r
    for c in "${cells[@]}"; do printf ' %8s' "${t[$c]}"; done
    echo
    results+=("${t[full]} ${t[full2]} ${t[nbdcopy]} ${t[incr]}")
done

printf '%s\n' "${results[@]}" | python3 -c '
import statistics, sys
rows = [[float(x) for x in l.split()] for l in sys.stdin]
def med(f):
    return statistics.median(f(*r) for r in rows)
print("median of per-round ratios (time):")
print("  full2 / full    (A/A noise)  %.2f" % med(lambda a, a2, n, i: a2 / a))
print("  full / nbdcopy               %.2f" % med(lambda a, a2, n, i: a / n))
print("  incr / full                  %.3f" % med(lambda a, a2, n, i: i / a))
print("median seconds: full %.2f, nbdcopy %.2f, incr %.3f" % (
    statistics.median(r[0] for r in rows),
    statistics.median(r[2] for r in rows),
    statistics.median(r[3] for r in rows)))
'
