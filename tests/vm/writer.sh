#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# writer.sh NAME DIR: in the guest, write files DIR/f1, DIR/f2, ...
# until /run/stop exists, and after each one's fsync (of the file and
# of DIR) returned, say "synced NAME fN SIZE" on stdout.  File N holds
# the line "NAME file N" again and again, cut to SIZE bytes (SIZE =
# 1000 + N * 7919 % 16000: files of 1 to 5 blocks, most of them with
# a partial last block), what check-set.py expects.
name=$1 dir=$2 n=0
while [ ! -e /run/stop ]; do
    n=$((n + 1))
    size=$((1000 + n * 7919 % 16000))
    if ! yes "$name file $n" | head -c $size > "$dir/f$n"; then
        echo "writer $name: write of f$n failed"
        break
    fi
    if ! sync "$dir/f$n" "$dir"; then
        echo "writer $name: fsync of f$n failed"
        break
    fi
    echo "synced $name f$n $size"
done
echo "writer $name: stopped at f$n"
