#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap bitmap --merge SRC -b IMAGE -F qcow2 refuses what
# qemu-img bitmap refuses, in qemu's words where qemu has them: a
# bitmap of another disk size, a missing bitmap, an inconsistent one
# (a qemu-io killed while it had the image open), an image another
# process has open, a missing image, one that is not qcow2; and says
# when qemu-img or qemu-nbd is missing.  Each refusal exits 1 and
# leaves the bitmap file as it was (all or nothing with the other
# actions, a file --size was to create not made).
source ./functions.sh
set -e
set -x
requires qemu-img --version
requires qemu-io --version
requires qemu-nbd --version

size=$((4 * 1024 * 1024))
qemu-img create -q -f qcow2 disk.qcow2 $size
qemu-img bitmap --add disk.qcow2 b0
qemu-io -f qcow2 -c 'write 100000 5000' disk.qcow2 > /dev/null
qemu-img create -q -f qcow2 big.qcow2 $((2 * size))
qemu-img bitmap --add big.qcow2 b0
# The targets: ours, and a qcow2 one for qemu-img.
dirtybitmap bitmap --add --size $size t.bitmaps t
qemu-img create -q -f qcow2 target.qcow2 $size
qemu-img bitmap --add target.qcow2 t
sum=$(md5sum < disk.qcow2)

# refused MESSAGE ARGS...: dirtybitmap bitmap ARGS... fails saying
# MESSAGE, t.bitmaps unchanged.
refused ()
{
    tool_fails -k t.bitmaps "$1" bitmap "${@:2}"
}

# qemu_says MESSAGE ARGS...: qemu-img bitmap ARGS fails with status 1
# saying MESSAGE.
qemu_says ()
{
    local r=0
    qemu-img bitmap "${@:2}" 2> err.qemu || r=$?
    cat err.qemu
    test $r = 1
    grep -F -- "$1" err.qemu
}

# same_words: the refusal of qemu-img (err.qemu) and ours (fails.err)
# read the same, after the program's name.
same_words ()
{
    sed 's/^qemu-img: //' err.qemu > words.qemu
    sed 's/^dirtybitmap: //' fails.err > words.ours
    diff -u words.qemu words.ours
}

# Another disk size.
refused "dirtybitmap: action merge:b0 on bitmap t failed: bitmap b0 in big.qcow2 covers a disk of $((2 * size)) bytes, but this disk is $size bytes" \
        --merge b0 -b big.qcow2 -F qcow2 t.bitmaps t
qemu_says "Bitmaps are of different sizes" \
          --merge b0 -b big.qcow2 -F qcow2 target.qcow2 t
# ... also for a file that --size is to create.
tool_fails -k new.bitmaps "dirtybitmap: new.bitmaps: --size $size does not match the disk size of big.qcow2, $((2 * size)) bytes" \
           bitmap --add --merge b0 -b big.qcow2 -F qcow2 --size $size \
           new.bitmaps b0

# A missing bitmap, in qemu-img's words.
refused "dirtybitmap: action merge:b9 on bitmap t failed: disk.qcow2: Dirty bitmap 'b9' not found" \
        --merge b9 -b disk.qcow2 -F qcow2 t.bitmaps t
qemu_says "Operation merge on bitmap t failed: Dirty bitmap 'b9' not found" \
          --merge b9 -b disk.qcow2 -F qcow2 target.qcow2 t
# The target is checked first, as by qemu-img.
refused "dirtybitmap: action merge:b9 on bitmap none failed: bitmap none not found" \
        --merge b9 -b disk.qcow2 -F qcow2 t.bitmaps none
qemu_says "Operation merge on bitmap none failed: Dirty bitmap 'none' not found" \
          --merge b9 -b disk.qcow2 -F qcow2 target.qcow2 none

# All or nothing: an --add before a failing merge is not kept, and a
# file that --size was to create is not made.
refused "disk.qcow2: Dirty bitmap 'b9' not found" \
        --add --merge b9 -b disk.qcow2 -F qcow2 t.bitmaps new
tool_fails -k new.bitmaps "disk.qcow2: Dirty bitmap 'b9' not found" \
           bitmap --add --merge b9 -b disk.qcow2 -F qcow2 --size $size \
           new.bitmaps new
test ! -e new.bitmaps
ls -a > files
if grep -F new.bitmaps files; then
    echo "$0: a failed call left a file behind"; exit 1
fi

# An image that a qemu-io has open for writing: in use, in qemu's words.
cp disk.qcow2 held.qcow2
mkfifo hold
qemu-io -f qcow2 held.qcow2 < hold > /dev/null &
io=$!
exec 3> hold
in_use () { qemu-img info -U --output=json held.qcow2 > held.info &&
            grep -F in-use held.info; }
wait_until 10 in_use
refused "dirtybitmap: Could not open 'held.qcow2': Failed to get shared \"write\" lock" \
        --merge b0 -b held.qcow2 -F qcow2 t.bitmaps t
grep -Fx "Is another process using the image [held.qcow2]?" fails.err
qemu_says "Failed to get shared \"write\" lock" \
          --merge b0 -b held.qcow2 -F qcow2 target.qcow2 t
same_words

# Killed while it had the image open: the bitmap stays "in-use", which
# qemu loads as inconsistent.
kill -9 $io
wait $io || true
exec 3>&-
refused "dirtybitmap: action merge:b0 on bitmap t failed: held.qcow2: Bitmap 'b0' is inconsistent and cannot be used" \
        --merge b0 -b held.qcow2 -F qcow2 t.bitmaps t
qemu_says "Operation merge on bitmap t failed: Bitmap 'b0' is inconsistent and cannot be used" \
          --merge b0 -b held.qcow2 -F qcow2 target.qcow2 t
# qemu-nbd says the same of it.
if qemu-nbd -r -f qcow2 -B b0 -k "$PWD/nbd.sock" held.qcow2 2> err.nbd
then
    echo "$0: qemu-nbd served an inconsistent bitmap"; exit 1
fi
grep -F "Bitmap 'b0' is inconsistent and cannot be used" err.nbd

# A missing image, and one that is not qcow2: qemu's words exactly.
refused "dirtybitmap: Could not open 'missing.qcow2'" \
        --merge b0 -b missing.qcow2 -F qcow2 t.bitmaps t
qemu_says "Could not open 'missing.qcow2'" \
          --merge b0 -b missing.qcow2 -F qcow2 target.qcow2 t
same_words
truncate -s $size raw.img
refused "Image is not in qcow2 format" \
        --merge b0 -b raw.img -F qcow2 t.bitmaps t
qemu_says "Image is not in qcow2 format" \
          --merge b0 -b raw.img -F qcow2 target.qcow2 t
same_words

# No qemu-nbd, no qemu at all.
mkdir only-qemu-img empty
ln -s "$(command -v qemu-img)" only-qemu-img/qemu-img
fails -k t.bitmaps "dirtybitmap: cannot run qemu-nbd: No such file or directory" \
      /usr/bin/env PATH="$PWD/only-qemu-img" "$DIRTYBITMAP" bitmap \
      --merge b0 -b disk.qcow2 -F qcow2 t.bitmaps t
fails -k t.bitmaps "dirtybitmap: cannot run qemu-img: No such file or directory" \
      /usr/bin/env PATH="$PWD/empty" "$DIRTYBITMAP" bitmap \
      --merge b0 -b disk.qcow2 -F qcow2 t.bitmaps t

# Usage: -F needs -b (qemu-img's words); qcow2 or raw; not live.
refused "dirtybitmap: -F only supported with -b" \
        --merge b0 -F qcow2 t.bitmaps t
qemu_says "qemu-img: -F only supported with -b" \
          --merge b0 -F qcow2 target.qcow2 t
refused "dirtybitmap: -F vmdk: the source format is qcow2" \
        --merge b0 -b disk.qcow2 -F vmdk t.bitmaps t
tool_fails "dirtybitmap: -F qcow2 is not with --control" \
           bitmap --merge b0 -b disk.qcow2 -F qcow2 --control ctl t

# After all that, the merge works, and the source was only read.
dirtybitmap bitmap --merge b0 -b disk.qcow2 -F qcow2 t.bitmaps t
dirtybitmap map t.bitmaps t > map
expect map <<'EOF2'
         0       65536    1  hole
     65536       65536    0  data
    131072     4063232    1  hole
EOF2
test "$(md5sum < disk.qcow2)" = "$sum"
