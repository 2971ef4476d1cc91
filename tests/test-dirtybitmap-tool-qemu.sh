#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# qemu-img bitmap as the oracle of dirtybitmap bitmap: the same action
# sequences, with the same writes between them (qemu-io to a qcow2,
# the filter to a raw file), leave the same bitmaps (names,
# granularities, enabled) with the same dirty ranges; the same
# mistakes fail in both with the same usage messages.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires qemu-img --version
requires qemu-io --version
requires qemu-nbd --version

oracle="$abs_top_srcdir/tests/dirty-ranges.py"
# Not a multiple of any granularity used here.
size=$((4 * 1024 * 1024 + 1536))

qemu-img create -q -f qcow2 disk.qcow2 $size
yes | head -c $size > disk.img
bm=disk.img.bitmaps

# both ARGS...: run "bitmap ARGS" on both; F stands for the file.
both ()
{
    qemu-img bitmap "${@//F/disk.qcow2}"
    dirtybitmap bitmap "${@//F/$bm}"
}

# write OFFSET COUNT...: the same writes to both disks.
write ()
{
    local io=()
    : > writes.py
    while [ $# -gt 0 ]; do
        io+=(-c "write -P 0x55 $1 $2")
        echo "h.pwrite(b'U' * $2, $1)" >> writes.py
        shift 2
    done
    qemu-io -f qcow2 "${io[@]}" disk.qcow2 > /dev/null
    nbdkit -U - --filter="$FILTER" file disk.img \
           --run 'nbdsh -u "$uri" -c "exec(open(\"writes.py\").read())"'
}

# The bitmaps, one line each: NAME GRANULARITY ENABLED.
list_qemu ()
{
    qemu-img info --output=json disk.qcow2 > info.qemu
    python3 - info.qemu <<'EOF2'
import json, sys
d = json.load(open(sys.argv[1]))
for b in d.get("format-specific", {}).get("data", {}).get("bitmaps", []):
    print(b["name"], b["granularity"], "auto" in b["flags"])
EOF2
}
list_ours ()
{
    dirtybitmap info --output=json $bm > info.ours
    python3 - info.ours <<'EOF2'
import json, sys
for b in json.load(open(sys.argv[1]))["bitmaps"]:
    print(b["name"], b["granularity"], b["recording"])
EOF2
}

# compare: same bitmaps, same dirty ranges.
n=0
compare ()
{
    list_qemu > list.qemu
    list_ours > list.ours
    diff -u list.qemu list.ours
    while read name g enabled; do
        nbdinfo --map=qemu:dirty-bitmap:$name -- \
                [ qemu-nbd -r -f qcow2 -B $name disk.qcow2 ] > qemu.map
        "$oracle" qemu < qemu.map > want.$name
        dirtybitmap map $bm $name > ours.map
        "$oracle" map < ours.map > got.$name
        diff -u want.$name got.$name
        cat got.$name >> all-ranges
    done < list.ours
    n=$((n + 1))
}

# add: --size makes the bitmap file for the raw disk.
qemu-img bitmap --add disk.qcow2 b0
dirtybitmap bitmap --add --size $size $bm b0
both --add -g 4096 F b1
compare
write 0 4096  100000 1  $((size - 1)) 1  65535 2
compare
both --disable F b0
write 1048576 70000
compare
both --add -g 512 F b2
write 2097152 10  2200000 1000
compare
# merge across granularities (a 64K granule dirties 128 of 512).
both --merge b0 F b2
both --clear F b1
compare
write 3145728 5000
both --enable --merge b1 F b0
compare
both --clear --disable F b1
write 500000 1
compare
both --add --merge b2 F b3
both --remove F b2
compare
# Merging a bitmap into itself, and several merges in one call.
both --merge b1 --merge b3 --merge b1 F b1
both --add --remove --add -g 1024 F b4
write 4000000 100000  1234567 1
compare
both --merge b0 --disable --clear --enable F b4
compare
# Merge from another file (-b), in both: a copy, whose b3 still has
# the bits that this file's b3 loses now.
cp disk.qcow2 other.qcow2
cp $bm other.bitmaps
both --remove --add F b0
both --clear F b3
qemu-img bitmap --merge b3 -b other.qcow2 -F qcow2 disk.qcow2 b0
dirtybitmap bitmap --merge b3 -b other.bitmaps $bm b0
compare
test $n = 11
test -s got.b0
# Not a vacuous comparison: plenty of dirty ranges were compared.
test "$(wc -l < all-ranges)" -gt 40

# Mistakes: the same exit status (1); our file is unchanged.
fails_both ()
{
    local sum=$(md5sum < $bm) q=0 o=0
    qemu-img bitmap "${@//F/disk.qcow2}" 2> err.qemu || q=$?
    dirtybitmap bitmap "${@//F/$bm}" 2> err.ours || o=$?
    cat err.qemu err.ours
    test $q = 1
    test $o = 1
    test "$(md5sum < $bm)" = "$sum"
}
fails_both --add F b0
fails_both --remove F b9
fails_both --clear F b9
fails_both --enable F b9
fails_both --disable F b9
fails_both --merge b9 F b0
fails_both --merge b0 F b9
fails_both --add -g 1000 F b5
fails_both --add -g 256 F b5
fails_both --add -g 4G F b5
fails_both --add F ""
# The usage errors read the same (after the program's name).
same_usage_error ()
{
    fails_both "$@"
    head -n1 err.qemu | sed 's/^qemu-img: //' > msg.qemu
    head -n1 err.ours | sed 's/^dirtybitmap: //' > msg.ours
    diff -u msg.qemu msg.ours
}
same_usage_error F b0
same_usage_error -g 4096 --remove F b0
same_usage_error -b other.qcow2 --add F b5
same_usage_error --add F
same_usage_error --add F b0 extra

# Where they differ: qemu-img applies the actions one by one and keeps
# those before a failure; dirtybitmap applies all of them or none.
fails_both --add --merge b9 F b5
list_ours > list.ours
if grep b5 list.ours; then
    echo "$0: the failed call left bitmap b5 behind"
    exit 1
fi
list_qemu > list.qemu
if grep -q b5 list.qemu; then
    qemu-img bitmap --remove disk.qcow2 b5
fi
compare
