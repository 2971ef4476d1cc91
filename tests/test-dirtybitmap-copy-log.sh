#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# An incremental copy reads exactly the dirty data from the source and
# touches only the dirty ranges of an NBD target: nbdkit's log filter
# under the dirtybitmap filter counts the reads, and the target's log
# shows every write and write-zeroes inside a dirty range, adding up to
# the dirty bytes.  An NBD target gets write-zeroes only over whole
# aligned blocks of 2M of the dirty zero ranges (the last block of the
# disk, 12K, is whole at its end); the rest of those is
# written, as data.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires nbdkit --filter=log null --version

size=$((16 * 1024 * 1024 + 12288))
yes | head -c $size > disk.img
cp disk.img backup.img

# Seeded changes: data, zeroes and trims, with clean gaps between.
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=add \
       --run 'nbdsh -u "$uri" -c "
import random
random.seed(7)
for i in range(30):
    n = random.choice([1, 4096, 65536, 100000, 300000])
    off = random.randrange(16 * 1024 * 1024 - n)
    k = random.randrange(3)
    if k == 0:
        h.zero(n, off)
    elif k == 1:
        h.trim(n, off)
    else:
        h.pwrite(random.randbytes(n), off)
h.zero(5 * 1024 * 1024, 3 * 1024 * 1024 + 4096)
h.zero(2 * 1024 * 1024 + 12288, 14 * 1024 * 1024)
"'
dirtybitmap info disk.img.bitmaps > info
dirty=$(sed -n 's/^ *dirty bytes: \([0-9]*\)\( (.*)\)\{0,1\}$/\1/p' info)
test "$dirty" -gt 0
map_of -r --filter="$FILTER" file disk.img bitmap=b0 > map
cat map
# Dirty data (type 0) and dirty zero (type 2) bytes, from the map.
data=$(awk '$3 == 0 { n += $2 } END { print n + 0 }' map)
zero=$(awk '$3 == 2 { n += $2 } END { print n + 0 }' map)
test "$data" -gt 0
test "$zero" -gt 0
test "$((data + zero))" -eq "$dirty"
# The bytes of the dirty zero ranges in whole blocks of 2M, on
# multiples of 2M, the last one ending at the end of the disk: those
# the target gets as write-zeroes.
whole=$(python3 - map $size <<'EOF2'
import sys
B, size = 2 << 20, int(sys.argv[2])
zs = []
for line in open(sys.argv[1]):
    off, length, typ = [int(x) for x in line.split()[:3]]
    if typ == 2 and zs and zs[-1][1] == off:
        zs[-1][1] += length
    elif typ == 2:
        zs.append([off, off + length])
print(sum(max(0, (e if e == size else e // B * B) - (s + B - 1) // B * B)
          for s, e in zs))
EOF2
)
test "$whole" -gt 0

# The target: nbdkit serving backup.img, logging every request.
sock="$tmpdir/target.sock"
start_nbdkit -P "$tmpdir/target.pid" -U "$sock" --filter=log \
             file backup.img logfile="$tmpdir/target.log"
nbdkit -U - -r --filter="$FILTER" --filter=log file disk.img bitmap=b0 \
       logfile="$tmpdir/source.log" \
       --run "dirtybitmap copy --requests 4 --request-size 64K \"\$uri\" \
              'nbd+unix:///?socket=$sock'" > copy.out
cat copy.out
kill_nbdkit "$(cat target.pid)"
cmp disk.img backup.img

grep -Ex "copied $((data + zero - whole)) bytes, zeroed $whole bytes, [0-9]+ ranges, [0-9.]+ seconds" \
     copy.out

# "NAME offset=0x.. count=0x.." of the requests of a log, as
# "NAME OFFSET COUNT" in decimal.
requests ()
{
    sed -n 's/.* \(Read\|Write\|Zero\|Trim\) id=[0-9]* offset=0x\([0-9a-f]*\) count=0x\([0-9a-f]*\) .*/\1 \2 \3/p' "$1" |
        while read name off count; do
            echo "$name $((16#$off)) $((16#$count))"
        done
}
requests source.log > source.req
requests target.log > target.req

# The source: reads of the dirty data only, each byte once.
test "$(awk '$1 == "Read" { n += $3 } END { print n + 0 }' source.req)" \
     -eq "$data"
test "$(awk '$1 != "Read"' source.req | wc -l)" -eq 0
# No read is larger than --request-size.
test "$(awk '$1 == "Read" && $3 > 65536' source.req | wc -l)" -eq 0

# The target: writes of the data and of the zero ranges but their
# whole blocks of 2M, write-zeroes of those, nothing else; each write
# inside a dirty range, each write-zeroes inside a zero range, on
# multiples of 2M.
test "$(awk '$1 == "Write" { n += $3 } END { print n + 0 }' target.req)" \
     -eq "$((data + zero - whole))"
test "$(awk '$1 == "Zero" { n += $3 } END { print n + 0 }' target.req)" \
     -eq "$whole"
test "$(awk '$1 != "Write" && $1 != "Zero"' target.req | wc -l)" -eq 0
# and the target was flushed after them.
tail -n 3 target.log | grep -F "Flush id="
python3 - map target.req source.req $size <<'EOF2'
import sys
size = int(sys.argv.pop())
ranges = []
for line in open(sys.argv[1]):
    off, length, typ = [int(x) for x in line.split()[:3]]
    ranges.append((off, off + length, typ))
def inside(off, count, types):
    return any(s <= off and off + count <= e and t in types
               for s, e, t in ranges)
want = {"Write": (0, 2), "Zero": (2,), "Read": (0,)}
for f in sys.argv[2:]:
    for line in open(f):
        name, off, count = line.split()
        assert inside(int(off), int(count), want[name]), (f, line)
        if name == "Zero":
            assert int(off) % (2 << 20) == 0, line
            end = int(off) + int(count)
            assert end % (2 << 20) == 0 or end == size, line
EOF2
