#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# One owner: a running nbdkit (also with -r, also daemonized) holds its
# bitmap file; a second nbdkit, a writing tool, a merge-file= reader
# and a locking reader fail at once naming the file as in use, and the
# file is untouched; -U readers look, readers share; the lock goes with
# the process, also on kill -9.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

yes | head -c 1M > disk.img
yes | head -c 1M > other.img
bm="$PWD/disk.img.bitmaps"
in_use="$bm: in use by another process (a running nbdkit or dirtybitmap)"

# refused MSG cmd args...: cmd fails within 2 seconds, MSG on stderr,
# the bitmap file unchanged.
refused ()
{
    local start=$(date +%s%N)
    fails -k "$bm" "$@"
    test $(( ($(date +%s%N) - start) / 1000000 )) -lt 2000
}

# A daemonized nbdkit that has written.
start_nbdkit -P "$PWD/pid1" -U "$PWD/sock1" --filter="$FILTER" \
             file disk.img bitmap=b0 action=add granularity=4K
nbdsh -u "nbd+unix:///?socket=$PWD/sock1" -c 'h.pwrite(b"x", 4096)'

refused "nbdkit: error: dirtybitmap: $in_use" \
        nbdkit -U - --filter="$FILTER" file disk.img --run true
refused "nbdkit: error: dirtybitmap: $in_use" \
        nbdkit -U - -r --filter="$FILTER" file disk.img bitmap=b0 --run true
refused "dirtybitmap: $in_use" dirtybitmap bitmap --add "$bm" b1
refused "dirtybitmap: $in_use" dirtybitmap bitmap --clear "$bm" b0
refused "dirtybitmap: use -U to read it while it is in use" \
        dirtybitmap info "$bm"
refused "nbdkit: error: dirtybitmap: $in_use" \
        nbdkit -U - --filter="$FILTER" file other.img bitmap=c action=add \
               action=merge:b0 merge-file="$bm" --run true
test ! -e other.img.bitmaps

# Readers that only look.
dirtybitmap map -U "$bm" b0 > map
expect map <<'EOF2'
         0        4096    1  hole
      4096        4096    0  data
      8192     1040384    1  hole
EOF2
dirtybitmap info -U "$bm" > info
grep -F "name: b0" info

# The lock goes with the process.
kill_nbdkit "$(cat pid1)"
nbdkit -U - --filter="$FILTER" file other.img bitmap=c action=add \
       action=merge:b0 merge-file="$bm" --run true
dirtybitmap map other.img.bitmaps c > map
expect map <<'EOF2'
         0       65536    0  data
     65536      983040    1  hole
EOF2

# Readers share: while another reader holds a shared lock, merge-file=
# reads the file, and writers are refused.
flock -s "$bm" sh -c '
    nbdkit -U - --filter="$FILTER" file other.img bitmap=c \
           action=merge:b0 merge-file="$1" --run true &&
    if nbdkit -U - --filter="$FILTER" file disk.img --run true 2> err2
    then exit 1; fi &&
    grep -F "$2" err2
' sh "$bm" "$in_use"

# nbdkit -r holds it too; kill -9 releases it.
start_nbdkit_child -P "$PWD/pid2" -U "$PWD/sock2" -r --filter="$FILTER" \
                   file disk.img bitmap=b0
refused "nbdkit: error: dirtybitmap: $in_use" \
        nbdkit -U - --filter="$FILTER" file disk.img --run true
refused "dirtybitmap: $in_use" dirtybitmap bitmap --remove "$bm" b0
kill9 $nbdkit_pid
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=disable \
       --run true
dirtybitmap info "$bm" > info
grep -F "recording: false" info
