#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A server holds its bitmap file by the file's own name: /proc/PID/fd
# (and so lsof) shows disk.img.bitmaps, never the private name the new
# file was built under, nor "(deleted)", whether the start created the
# file or found it.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

truncate -s 1M disk.img
bm="$PWD/disk.img.bitmaps"

# fds PID: what each descriptor of PID that names the bitmap file reads.
fds ()
{
    local fd
    for fd in /proc/$1/fd/*; do
        readlink "$fd" || true
    done | grep -F disk.img.bitmaps || true
}

# check_fds PID: at least one such descriptor, and every one is the
# file at its path.
check_fds ()
{
    fds "$1" > fds
    cat fds
    if ! [ -s fds ]; then
        echo "$0: nbdkit $1 holds no descriptor of $bm"; exit 1
    fi
    if grep -vFx "$bm" fds; then
        echo "$0: nbdkit $1 holds $bm by another name"; exit 1
    fi
}

for round in created found; do
    if [ $round = created ]; then
        rm -f "$bm"
        args=(bitmap=b0 action=add)
    else
        test -f "$bm"
        args=(bitmap=b0)
    fi
    sock="$PWD/sock.$round"
    start_nbdkit -P "$PWD/pid.$round" -U "$sock" --filter="$FILTER" \
                 file disk.img "${args[@]}"
    pid=$(cat "pid.$round")
    check_fds $pid
    # Serving writes opens the descriptor commits sync through.
    nbdsh -u "nbd+unix:///?socket=$sock" -c 'h.pwrite(b"x" * 512, 4096)'
    check_fds $pid
    kill_nbdkit $pid
    # Nothing left behind under a private name.
    ls -a > files
    if grep -F disk.img.bitmaps. files; then
        echo "$0: a private file was left behind"; exit 1
    fi
done
dirtybitmap map disk.img.bitmaps b0 > map
expect map <<'EOF2'
         0       65536    0  data
     65536      983040    1  hole
EOF2
