#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The tool respects the filter's lock: while nbdkit holds the bitmap
# file, bitmap is refused ("in use"), info and map are refused without
# -U (with a hint) and show a snapshot with -U; check still reads.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires flock --version

bm=disk.img.bitmaps
sock="$PWD/sock"
uri="nbd+unix:///?socket=$sock"
inuse="dirtybitmap: $bm: in use by another process (a running nbdkit or dirtybitmap)"

yes | head -c 1M > disk.img
dirtybitmap bitmap --add -g 4K --size 1M $bm b0
dirtybitmap bitmap --add --size 1M other.bitmaps b0

start_nbdkit -P "$PWD/pid" -U "$sock" --filter="$FILTER" \
             file disk.img bitmap=b0
pid="$(cat pid)"
sum=$(md5sum < $bm)

tool_fails "$inuse" bitmap --add $bm b1
tool_fails "$inuse" bitmap --clear $bm b0
tool_fails "$inuse" bitmap --merge b0 -b $bm other.bitmaps b0
for args in "info $bm" "map $bm b0" "info --output=json $bm"; do
    tool_fails "$inuse" $args
    grep -F "dirtybitmap: use -U to read it while it is in use" fails.err
done
test "$(md5sum < $bm)" = "$sum"

# -U: a snapshot.  The server has not written yet: "in use" anyway.
dirtybitmap info -U $bm > info.out
expect info.out <<'EOF2'
file: disk.img.bitmaps
format version: 1
disk size: 1048576 (1 MiB)
state: in use
bitmaps:
    [0]:
        name: b0
        granularity: 4096
        recording: true
        consistent: true
        dirty bytes: 0 (0 B)
EOF2
dirtybitmap info --force-share --output=json $bm > info.json
grep -F '"state": "in-use",' info.json

nbdsh -u "$uri" -c 'h.pwrite(b"x" * 5000, 10000)'
dirtybitmap info -U $bm > info.out
expect info.out <<EOF2
file: disk.img.bitmaps
format version: 1
disk size: 1048576 (1 MiB)
state: in use (pid $pid, durability=coarse)
bitmaps:
    [0]:
        name: b0
        granularity: 4096
        recording: true
        consistent: true
        dirty bytes: 8192 (8 KiB)
EOF2
dirtybitmap map -U $bm b0 > tool.map
expect tool.map <<'EOF2'
         0        8192    1  hole
      8192        8192    0  data
     16384     1032192    1  hole
EOF2
nbdinfo --map "$uri" > nbdinfo.map
cmp nbdinfo.map tool.map
dirtybitmap check $bm
# Still refused, and the server still serves.
tool_fails "$inuse" bitmap --remove $bm b0
nbdsh -u "$uri" -c 'h.pwrite(b"x", 900000)'
dirtybitmap map -U $bm b0 > tool.map
grep -F "    897024        4096    0  data" tool.map

kill_nbdkit "$pid"
dirtybitmap info $bm > info.out
grep -F "state: closed cleanly" info.out
dirtybitmap bitmap --add $bm b1

# Readers share: while a reader holds the file, info works, bitmap
# does not, and neither does nbdkit.
flock -s $bm dirtybitmap info $bm > info.out
grep -F "name: b1" info.out
flock -s $bm dirtybitmap map $bm b0 > /dev/null
fails "$inuse" flock -s $bm dirtybitmap bitmap --remove $bm b1
fails "in use by another process" \
      flock -s $bm nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 \
            --run true
# A writer excludes readers.
fails "$inuse" flock -x $bm dirtybitmap info $bm
flock -x $bm dirtybitmap info -U $bm > info.out
grep -F "name: b1" info.out
