#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap bitmap --merge SRC -b IMAGE -F qcow2: persistent bitmaps
# that qemu made and filled (qemu-img bitmap --add, then qemu-io
# writes) arrive exactly.  qemu's own map of each bitmap (nbdinfo
# --map=qemu:dirty-bitmap:SRC over qemu-nbd) is the oracle: merged
# into a bitmap of the same or a finer granularity, the dirty ranges
# are exactly qemu's; into a coarser one, exactly qemu's rounded out to
# the target's granules, which is also what qemu-img bitmap --merge
# gives into a qcow2 bitmap of that granularity.  A merge ORs into
# what the target holds; the image is only read.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires qemu-img --version
requires qemu-io --version
requires qemu-nbd --version
requires nbdinfo --version

oracle="$abs_top_srcdir/tests/dirty-ranges.py"
# Not a multiple of any granularity used here (qemu wants sectors).
size=$((64 * 1024 * 1024 + 1536))

# A qcow2 with two bitmaps, 64K and 512K, written by qemu-io: byte
# writes, unaligned ones across granules, the last byte; then the
# 512K one disabled, and more writes that only the 64K one records.
qemu-img create -q -f qcow2 disk.qcow2 $size
qemu-img bitmap --add -g 64K disk.qcow2 q64
qemu-img bitmap --add -g 512K disk.qcow2 q512
python3 - $size > writes <<'EOF2'
import random, sys
size = int(sys.argv[1])
random.seed(21)
for i in range(40):
    count = random.choice([1, 512, 4095, 65536, 65537, 200000])
    off = random.randrange(size - count)
    print("write -P 0x%02x %d %d" % (i + 1, off, count))
print("write -P 0x55 %d 1" % (size - 1))
print("write -P 0x56 %d 2" % (65536 * 7 - 1))
EOF2
qemu-io -f qcow2 disk.qcow2 < writes > /dev/null
qemu-img bitmap --disable disk.qcow2 q512
qemu-io -f qcow2 -c 'write -P 0x77 3000000 70000' \
        -c 'write -P 0x78 9437184 1' disk.qcow2 > /dev/null
sum=$(md5sum < disk.qcow2)

# qemu_ranges IMAGE BITMAP: the dirty ranges qemu serves for it.
qemu_ranges ()
{
    nbdinfo --map=qemu:dirty-bitmap:$2 -- \
            [ qemu-nbd -r -f qcow2 -B $2 "$1" ] > qemu.map
    "$oracle" qemu < qemu.map
}

# rounded G < ranges: the ranges rounded out to granules of G bytes.
rounded ()
{
    awk '{ print $1, $2 - $1 }' | "$oracle" expect $size $1
}

# qemu_merged G SRC...: qemu-img bitmap's merge of the sources into a
# new qcow2 bitmap of granularity G: its dirty ranges.
qemu_merged ()
{
    local g=$1 src
    shift
    rm -f target.qcow2
    qemu-img create -q -f qcow2 target.qcow2 $size
    qemu-img bitmap --add -g $g target.qcow2 t
    for src in "$@"; do
        qemu-img bitmap --merge $src -b disk.qcow2 -F qcow2 target.qcow2 t
    done
    qemu_ranges target.qcow2 t
}

# ours G SRC...: the same merges into a new bitmap file.
ours ()
{
    local g=$1 src merges=()
    shift
    for src in "$@"; do merges+=(--merge $src); done
    rm -f t.bitmaps
    dirtybitmap bitmap --add -g $g --size $size t.bitmaps t
    dirtybitmap bitmap "${merges[@]}" -b disk.qcow2 -F qcow2 t.bitmaps t
    dirtybitmap map t.bitmaps t > ours.map
    "$oracle" map < ours.map
}

qemu_ranges disk.qcow2 q64 > want.q64
qemu_ranges disk.qcow2 q512 > want.q512
# Not vacuous: many ranges, and the two bitmaps differ.
test "$(wc -l < want.q64)" -gt 20
test "$(wc -l < want.q512)" -gt 10
if cmp want.q64 want.q512; then
    echo "$0: the two bitmaps are the same"; exit 1
fi

for src in q64:65536 q512:524288; do
    sg=${src#*:} src=${src%:*}
    for g in 4096 65536 1048576; do
        ours $g $src > got.$src.$g
        rounded $g < want.$src > rounded.$src.$g
        diff -u rounded.$src.$g got.$src.$g
        if [ $g -le $sg ]; then
            # Not coarser: qemu's ranges, not a byte more.
            diff -u want.$src got.$src.$g
        elif cmp want.$src got.$src.$g; then
            echo "$0: a 1M bitmap rounded nothing out"; exit 1
        fi
        qemu_merged $g $src > qemu.$src.$g
        diff -u qemu.$src.$g got.$src.$g
    done
done

# Both into one bitmap, in one call: the union, as qemu-img makes it.
for g in 4096 1048576; do
    ours $g q64 q512 > got.both.$g
    qemu_merged $g q64 q512 > qemu.both.$g
    diff -u qemu.both.$g got.both.$g
    sort -n want.q64 want.q512 | rounded $g > union.$g
    diff -u union.$g got.both.$g
done

# A merge ORs into the target's own bits (recorded by the filter).
truncate -s $size disk.img
rm -f disk.img.bitmaps
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=add \
       granularity=64K --run 'nbdsh -u "$uri" -c "h.pwrite(b\"x\", 5000000)"'
dirtybitmap bitmap --merge q512 -b disk.qcow2 -F qcow2 disk.img.bitmaps b0
dirtybitmap map disk.img.bitmaps b0 > or.map
"$oracle" map < or.map > got.or
{ cat want.q512; echo 4980736 5046272; } | sort -n | rounded 65536 > want.or
diff -u want.or got.or

# The image was only read.
test "$(md5sum < disk.qcow2)" = "$sum"
