#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# An NBD target over TCP has no directory of its own: with --sums-dir
# its checksums go there, named after the disk (NAME.CHECKPOINT.sums),
# and describe the image the target holds.
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/sums-lib.sh"

size=$((8 * chunk))
head -c $size /dev/urandom > tcp.img
serve tcp
truncate -s $size target.img
mkdir sums
# A free port on the loopback, then qemu-nbd on it (raw, one client).
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
qemu-nbd -f raw -b 127.0.0.1 -p $port --fork --pid-file="$PWD/q.pid" \
         target.img
cleanup_fn kill_nbdkit "$(cat q.pid)"
dirtybitmap backup --checkpoint c1 --sums-dir "$PWD/sums" \
    --disk "control=$PWD/tcp.ctl,source=$(uri tcp),target=nbd://127.0.0.1:$port,name=tcp"
wait_gone "$(cat q.pid)"
cmp tcp.img target.img
python3 "$sums_py" check sums/tcp.c1.sums target.img c1 "$(uri tcp)"
dirtybitmap verify target.img sums/tcp.c1.sums
