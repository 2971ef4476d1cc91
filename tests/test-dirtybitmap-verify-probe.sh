#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A raw backup of a disk whose content begins with a qcow2 header (a
# guest's data) that names a file of the host as its backing file:
# dirtybitmap verify reads the backup as the raw file it is, all its
# chunks match, and the file that the header names is never touched
# (it is a FIFO, which an open would hang on; strace sees every file
# system call of verify and of any program it starts).
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/sums-lib.sh"
requires strace -V
requires timeout --version

mkfifo host-file
# (Should a regression open it, a writer lets the reader go on.)
cleanup_fn python3 -c '
import os
try:
    os.close(os.open("host-file", os.O_WRONLY | os.O_NONBLOCK))
except OSError:
    pass'
qemu-img create -q -f qcow2 -u -b "$PWD/host-file" -F raw guest.qcow2 1M

size=$((4 * chunk))
head -c $size /dev/urandom > vda.img
dd if=guest.qcow2 of=vda.img conv=notrunc status=none
serve vda
backup vda c1.json "$PWD/backup.img" --checkpoint c1
report c1.json mode=full written=$size checksums="$PWD/vda.c1.sums"
stop vda
cmp vda.img backup.img
qemu-img info backup.img | grep -Fx "file format: qcow2"   # (what a probe sees)

timeout -s KILL 60 strace -f -qq -e trace=%file -o verify.strace \
    dirtybitmap verify backup.img vda.c1.sums > verify.out
cat verify.out
expect verify.out <<EOF2
backup.img: all 4 chunks match the checksums of c1
EOF2
grep -F backup.img verify.strace        # (strace saw the reads)
if grep -F host-file verify.strace; then
    echo "$0: verify touched the file named in the guest's qcow2 header"
    exit 1
fi
