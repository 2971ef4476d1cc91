#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/copy.sh: how fast dirtybitmap copy is, and how much its
# targets allocate.
#
#   bench/copy.sh [--rounds N] [--size MIB] [--dirty PERCENT]
#                 [--sparse-data MIB] [--dir DIR]
#
# Two sources, each a disk of --size MiB in DIR:
#
#   disk.img    random data everywhere, served by nbdkit's file plugin
#               through the filter (bitmap b0, read-only);
#   sparse.img  --sparse-data MiB of random data in 256K pieces spread
#               over the disk, plus 4 MiB of zeroes written as data
#               (allocated), the rest never written (holes).
#
# Each round times these cells, in an order reversed every other
# round, each with a fresh server and target, and each target checked
# with cmp against its source:
#
#   full      dirtybitmap copy --full of disk.img to a new file
#   full2     the same again (the A/A row: the noise floor)
#   nbdcopy   nbdcopy --flush of disk.img to a new file (dirtybitmap
#             copy flushes too)
#   incr      dirtybitmap copy of PERCENT% dirty data of disk.img (64K
#             writes spread over the disk, a new checkpoint each round)
#             to a copy of the disk
#   sp-db     dirtybitmap copy --full of sparse.img to a new file
#   sp-db2    the same again (A/A)
#   sp-nbdcopy  nbdcopy --flush, the same
#   sp-qemu   qemu-img convert -f raw -O raw -t writeback, the same
#             (writeback: the output is flushed when it is closed)
#   sp-bm     dirtybitmap copy --full of sparse.img served through the
#             filter with bitmap=b0 (all clean: holes without the zero
#             bit, which must be read), to a new file
#
# The sp-* cells other than sp-bm share one kind of server, nbdkit's
# file plugin serving sparse.img read-only: its extents say which
# ranges are holes reading as zeroes.  (qemu-img is not run through the
# filter with bitmap=: it takes a hole as "reads as zeroes", which there
# means "unchanged", and would skip data.)
#
# Prints the times of each round and the allocation of each target
# (KiB, after a sync), then the medians over the rounds of the times,
# the allocations and the per-round ratios of the times.  Other work on
# the machine shows up as noise: read the A/A rows first.  A tmpfs
# such as /dev/shm for --dir takes the disk's writeback out of the
# times.
set -e
# set -e holds inside $(...) too: t[$c]=$(cell $c) stops the run when
# any step of the cell fails, not only its last command.
shopt -s inherit_errexit
top="$(cd "$(dirname "$0")/.." && pwd)"
rounds=5
size_mib=1024
dirty=1
sparse_mib=64
dir=/tmp
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds="$2"; shift 2 ;;
        --size) size_mib="$2"; shift 2 ;;
        --dirty) dirty="$2"; shift 2 ;;
        --sparse-data) sparse_mib="$2"; shift 2 ;;
        --dir) dir="$2"; shift 2 ;;
        *) echo "usage: $0 [--rounds N] [--size MIB] [--dirty PERCENT] [--sparse-data MIB] [--dir DIR]" >&2
           exit 1 ;;
    esac
done

export PATH="$top/tool:/usr/sbin:/usr/bin:/sbin:/bin"
filter="$top/filter/.libs/nbdkit-dirtybitmap-filter.so"
for f in "$filter" "$top/tool/dirtybitmap"; do
    [ -e "$f" ] || { echo "$0: $f: build first (make)" >&2; exit 1; }
done
for p in nbdcopy qemu-img; do
    command -v $p >/dev/null || { echo "$0: $p is needed" >&2; exit 1; }
done
work="$(mktemp -d "$dir/dirtybitmap-bench-copy.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cd "$work"

echo "# $(date -u '+%F %T') UTC: $0 --rounds $rounds --size $size_mib --dirty $dirty --sparse-data $sparse_mib --dir $dir"
echo "# tree $(git -C "$top" describe --always --dirty 2>/dev/null || echo unknown);" \
     "$(nbdkit --version | head -1); libnbd $(nbdcopy --version | sed -n 's/^libnbd //p');" \
     "$(qemu-img --version | head -1)"
echo "# $(nproc) CPUs; fs of $dir: $(findmnt -n -o FSTYPE -T "$dir"); load average $(cut -d' ' -f1-3 /proc/loadavg)"

head -c $((size_mib << 20)) /dev/urandom > disk.img
nbdkit -U - --filter="$filter" file disk.img bitmap=b0 action=add \
       --run true

truncate -s $((size_mib << 20)) sparse.img
python3 - sparse.img $((size_mib << 20)) $((sparse_mib << 20)) <<'EOF'
import random, sys
name, size, data = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
piece = 256 << 10
with open(name, "r+b") as f:
    for off in sorted(random.sample(range(size // piece), data // piece)):
        f.seek(off * piece)
        f.write(random.randbytes(piece))
    f.seek(size // 2 + 4096)
    f.write(bytes(4 << 20))
EOF
nbdkit -U - --filter="$filter" file sparse.img bitmap=b0 action=add \
       --run true
sync
kib () { stat -c %b "$1" | awk '{ print int($1 / 2) }'; }
echo "# disk.img allocates $(kib disk.img) KiB; sparse.img $(kib sparse.img) KiB"

# time CMD: prints the seconds CMD (a shell command using $uri) took.
timed ()
{
    echo '
        start=$(date +%s%N)
        '"$1"' >/dev/null 2>&1 || exit 1
        end=$(date +%s%N)
        awk -v s=$start -v e=$end "BEGIN { printf \"%.3f\\n\", (e - s) / 1e9 }"'
}

# serve DISK [FILTER ARGS] -- CMD: a fresh read-only server of DISK
# (through the filter with bitmap=b0 when "bm" is given), running CMD.
serve_bm () { nbdkit -U - -r --filter="$filter" file "$1" bitmap=b0 --run "$(timed "$2")"; }
serve_plain () { nbdkit -U - -r file "$1" --run "$(timed "$2")"; }

# cell NAME: prints "SECONDS KIB".
cell ()
{
    local src=disk.img t
    rm -f target.img
    sync
    case "$1" in
        full|full2) t=$(serve_bm disk.img 'dirtybitmap copy --full "$uri" target.img') ;;
        nbdcopy) t=$(serve_bm disk.img 'nbdcopy --flush "$uri" target.img') ;;
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
            t=$(serve_bm disk.img 'dirtybitmap copy "$uri" target.img')
            ;;
        sp-db|sp-db2)
            src=sparse.img
            t=$(serve_plain sparse.img 'dirtybitmap copy --full "$uri" target.img') ;;
        sp-nbdcopy)
            src=sparse.img
            t=$(serve_plain sparse.img 'nbdcopy --flush "$uri" target.img') ;;
        sp-qemu)
            src=sparse.img
            t=$(serve_plain sparse.img 'qemu-img convert -f raw -O raw -t writeback "$uri" target.img') ;;
        sp-bm)
            src=sparse.img
            t=$(serve_bm sparse.img 'dirtybitmap copy --full "$uri" target.img') ;;
    esac
    cmp $src target.img >&2 || { echo "$0: $1: copy differs" >&2; exit 1; }
    sync
    echo "$t $(kib target.img)"
}

cells=(full nbdcopy incr full2 sp-db sp-nbdcopy sp-qemu sp-bm sp-db2)
printf '%-6s' round; printf ' %10s' "${cells[@]}"; echo
: > results
for (( r = 1; r <= rounds; ++r )); do
    order=("${cells[@]}")
    if (( r % 2 == 0 )); then
        order=()
        for (( i = ${#cells[@]} - 1; i >= 0; --i )); do order+=("${cells[i]}"); done
    fi
    declare -A t=() a=()
    for c in "${order[@]}"; do
        read -r t[$c] a[$c] < <(cell $c)
    done
    printf '%-6s' $r
    for c in "${cells[@]}"; do printf ' %10s' "${t[$c]}"; done
    echo
    printf '%-6s' KiB
    for c in "${cells[@]}"; do printf ' %10s' "${a[$c]}"; done
    echo
    for c in "${cells[@]}"; do echo "$r $c ${t[$c]} ${a[$c]}" >> results; done
done

python3 - results "$(kib disk.img)" "$(kib sparse.img)" <<'EOF'
import collections, statistics, sys
t = collections.defaultdict(dict)
a = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r, c, secs, kib = line.split()
    t[int(r)][c] = float(secs)
    a[c].append(int(kib))
disk_kib, sparse_kib = int(sys.argv[2]), int(sys.argv[3])
def ratio(x, y):
    return statistics.median(t[r][x] / t[r][y] for r in t)
def secs(c):
    return statistics.median(t[r][c] for r in t)
print("median of per-round ratios (time):")
rows = [("full2 / full", "full2", "full", "A/A noise, full disk"),
        ("full / nbdcopy", "full", "nbdcopy", ""),
        ("incr / full", "incr", "full", ""),
        ("sp-db2 / sp-db", "sp-db2", "sp-db", "A/A noise, sparse disk"),
        ("sp-db / sp-nbdcopy", "sp-db", "sp-nbdcopy", ""),
        ("sp-db / sp-qemu", "sp-db", "sp-qemu", ""),
        ("sp-bm / sp-db", "sp-bm", "sp-db", "reading the holes too")]
for name, x, y, note in rows:
    print("  %-20s %6.3f  %s" % (name, ratio(x, y), note))
print("median seconds and target allocation (KiB; source: disk.img %d,"
      " sparse.img %d):" % (disk_kib, sparse_kib))
for c in ["full", "full2", "nbdcopy", "incr", "sp-db", "sp-db2",
          "sp-nbdcopy", "sp-qemu", "sp-bm"]:
    src = sparse_kib if c.startswith("sp-") else disk_kib
    k = statistics.median(a[c])
    print("  %-11s %7.3f s  %9d KiB  %5.3f of the source's" % (
        c, secs(c), k, k / src))
EOF
echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
