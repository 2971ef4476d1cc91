#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap bitmap --merge SRC -b IMAGE -F qcow2 under valgrind, as
# it succeeds and as it fails (a missing bitmap, a missing image, no
# qemu-nbd): no memory error, no memory lost, the children reaped.
source ./functions.sh
set -e
set -x
requires valgrind --version
requires qemu-img --version
requires qemu-io --version
requires qemu-nbd --version

size=$((4 * 1024 * 1024))
qemu-img create -q -f qcow2 disk.qcow2 $size
qemu-img bitmap --add -g 512 disk.qcow2 b0
qemu-io -f qcow2 -c 'write 100000 5000' -c 'write 3000000 1' disk.qcow2 \
        > /dev/null
dirtybitmap bitmap --add --size $size t.bitmaps t
mkdir only-qemu-img
ln -s "$(command -v qemu-img)" only-qemu-img/qemu-img
valgrind=$(command -v valgrind)

# vg [--path PATH] STATUS ARGS...: dirtybitmap bitmap ARGS (with that
# PATH) under valgrind exits with STATUS, and valgrind found nothing.
n=0
vg ()
{
    local run=() want r=0
    if [ "$1" = --path ]; then run=(env PATH="$2"); shift 2; fi
    want=$1
    shift
    n=$((n + 1))
    # (Not the children between fork and exec: a copy of this process
    # that execs qemu, or exits at once if it cannot.)
    "${run[@]}" "$valgrind" --error-exitcode=9 --leak-check=full \
             --errors-for-leak-kinds=definite,possible \
             --child-silent-after-fork=yes --log-file="$PWD/vg.$n.log" \
             "$DIRTYBITMAP" bitmap "$@" || r=$?
    cat vg.$n.log
    test $r = $want
    grep -F 'ERROR SUMMARY: 0 errors' vg.$n.log
    if grep -F 'ERROR SUMMARY' vg.$n.log | grep -vF ': 0 errors'; then
        echo "$0: valgrind found errors"; exit 1
    fi
}

vg 0 --merge b0 -b disk.qcow2 -F qcow2 t.bitmaps t
vg 1 --merge b9 -b disk.qcow2 -F qcow2 t.bitmaps t
vg 1 --merge b0 --merge b0 -b missing.qcow2 -F qcow2 t.bitmaps t
vg --path "$PWD/only-qemu-img" 1 --merge b0 -b disk.qcow2 -F qcow2 t.bitmaps t
dirtybitmap map t.bitmaps t > map
expect map <<'EOF2'
         0       65536    1  hole
     65536       65536    0  data
    131072     2818048    1  hole
   2949120       65536    0  data
   3014656     1179648    1  hole
EOF2
