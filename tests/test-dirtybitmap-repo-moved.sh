#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# In a repository a disk is its name, not the URI it is served at:
#   1. a disk served at another socket (its server moved) gets an
#      incremental, not a full copy;
#   2. a disk restored into a new file from the newest point
#      (restore-from=, restore-checkpoint=) and served at a new socket
#      gets an incremental of what was written to it since, and the
#      point restores to it byte for byte.
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/repo-lib.sh"
source "$abs_top_srcdir/tests/restore-lib.sh"

size=$((8 * 1024 * 1024))

# mode_bytes FILE: "MODE BYTES-TOTAL" of a backup's JSON (one disk).
mode_bytes ()
{
    python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
print(j["disks"][0]["mode"], j["bytes-total"])' "$1"
}

# 1. The server of disk a moves from a.sock to a2.sock.
start_disk a $size
write_some 1 a
backup --repo "$repo" --checkpoint p1 \
       --disk "control=$PWD/a.ctl,source=$(uri a),name=a"
kill_nbdkit "$(cat a.pid)"
ln a.img a2.img
ln a.img.bitmaps a2.img.bitmaps
start_disk a2 $size bitmap-file="$PWD/a.img.bitmaps"
nbdsh -u "$(uri a2)" -c 'h.pwrite(b"x" * 4096, 65536 * 3)'
backup --repo "$repo" --checkpoint p2 --output=json \
       --disk "control=$PWD/a2.ctl,source=$(uri a2),name=a" > p2.json 2> p2.err
cat p2.json p2.err
test "$(mode_bytes p2.json)" = "incremental 65536"
kill_nbdkit "$(cat a2.pid)"
cp a.img a.p2

# 2. Point p2 restored into b.img, served at b.sock, written.
restore_from p2 b $size
cmp a.p2 b.img
nbdsh -u "$(uri b)" -c 'h.pwrite(b"y" * 4096, 65536 * 7)'
backup --repo "$repo" --checkpoint p3 --output=json \
       --disk "control=$PWD/b.ctl,source=$(uri b),name=a" > p3.json 2> p3.err
cat p3.json p3.err
test "$(mode_bytes p3.json)" = "incremental 65536"
cp b.img b.p3
restored p3 a p3.img b
