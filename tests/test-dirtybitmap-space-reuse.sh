#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A checkpoint added while the server runs reuses the space of a
# bitmap removed before it, and reads as empty there, without a
# fallocate(PUNCH_HOLE) of the bitmap file: a punch holds the file's
# invalidate lock, which every write that sets a bit in a clean page
# of the file's mapping takes too (and on a file system mounted with
# discard it waits there for the discard), so the guest's writes
# would wait for it.  Seen with strace: no punch of the bitmap file,
# and the new bitmap holds only the writes made after it.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires strace -V

truncate -s 1G disk.img
bm="$PWD/disk.img.bitmaps"
ctl="$PWD/ctl.sock"
control="$abs_top_srcdir/tests/control.py"
edit="$abs_top_srcdir/tests/bmfile-edit.py"
M=$((128 << 20))                # the disk bytes of one 4K page of bits

# b0's bits in pages 0, 2 and 5 of its region (at 4K granules, a page
# of bits covers 128M of the disk); then b0 removed and b1 added; then
# b2 added, into b0's space.
cat > steps.sh <<EOF
set -e
nbdsh -u "\$1" -c 'h.pwrite(b"a" * 4096, 0)' \
               -c 'h.pwrite(b"a" * 4096, 2 * $M + 4096)' \
               -c 'h.pwrite(b"a" * 4096, 5 * $M + 8192)'
python3 "$control" ok "$ctl" '{"execute": "transaction", "arguments": {"actions": [{"action": "add", "bitmap": "b1", "granularity": 4096}, {"action": "remove", "bitmap": "b0"}]}}'
nbdsh -u "\$1" -c 'h.pwrite(b"b" * 4096, 7 * $M)'
python3 "$control" ok "$ctl" '{"execute": "transaction", "arguments": {"actions": [{"action": "add", "bitmap": "b2", "granularity": 4096}]}}'
nbdsh -u "\$1" -c 'h.pwrite(b"c" * 4096, 3 * $M + 12288)'
EOF
# b0's region, from a file made the same way and stopped there.
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=add \
       granularity=4K --run 'nbdinfo --size "$uri" >/dev/null'
b0_offset=$(python3 "$edit" "$bm" entry-get 0 data_offset)
b0_length=$(python3 "$edit" "$bm" entry-get 0 data_length)
test "$b0_length" -eq 32768

strace -f -y -o strace.log -e trace=fallocate,pwrite64 \
       nbdkit -U - --filter="$FILTER" file disk.img \
       control="$ctl" --run 'bash steps.sh "$uri"'

# b2 took b0's space (else this test shows nothing: say so).
names=$(python3 - "$edit" "$bm" <<'EOF'
import subprocess, sys
edit, bm = sys.argv[1:]
for i in range(2):
    print(subprocess.run(["python3", edit, bm, "entry-get", str(i), "data_offset"],
                         capture_output=True, text=True, check=True).stdout.strip())
EOF
)
echo "$names" | grep -Fx "$b0_offset"

# No punch of the bitmap file; the old bits were written over.
cat strace.log | grep 'fallocate(' || :
if grep -E 'fallocate\([0-9]+<[^>]*\.bitmaps[^>]*>.*PUNCH_HOLE' strace.log; then
    echo "the bitmap file was punched while the server ran" >&2
    exit 1
fi
grep -E "pwrite64\([0-9]+<[^>]*\.bitmaps[^>]*>.*, $b0_offset\)" strace.log

# The bits: b1 has b and c, b2 only c.
dirtybitmap map "$bm" b1 | awk '$3 == 0 { print $1, $2 }' > map1
dirtybitmap map "$bm" b2 | awk '$3 == 0 { print $1, $2 }' > map2
expect map1 <<EOF
$((3 * M + 12288)) 4096
$((7 * M)) 4096
EOF
expect map2 <<EOF
$((3 * M + 12288)) 4096
EOF
