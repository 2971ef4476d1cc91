#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap bitmap: every action, several in one call applied in
# order, all or nothing; --size, -b, -g; the rules of qemu-img bitmap
# and every error, each leaving the file byte-identical.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

edit="$abs_top_srcdir/tests/bmfile-edit.py"
bm=disk.img.bitmaps
yes | head -c 1M > disk.img

# write OFFSET...: one byte at each offset, through the filter (every
# enabled bitmap records).
write ()
{
    local o py=""
    for o in "$@"; do py="$py -c 'h.pwrite(b\"x\", $o)'"; done
    nbdkit -U - --filter="$FILTER" file disk.img --run "nbdsh -u \"\$uri\" $py"
}
# bitmap_fails MESSAGE ARGS...: "dirtybitmap bitmap ARGS" exits 1
# saying MESSAGE, and every existing file named in ARGS is unchanged.
bitmap_fails ()
{
    local a keep=()

    for a in "${@:2}"; do
        if [ -f "$a" ]; then keep+=(-k "$a"); fi
    done
    tool_fails "${keep[@]}" "$1" bitmap "${@:2}"
}
# names [FILE]: NAME GRANULARITY enabled|disabled, one line a bitmap.
names ()
{
    dirtybitmap info --output=json ${1:-$bm} > names.json
    python3 - names.json <<'EOF2'
import json, sys
for b in json.load(open(sys.argv[1]))["bitmaps"]:
    print(b["name"], b["granularity"],
          "enabled" if b["recording"] else "disabled")
EOF2
}

# No file without --size.
bitmap_fails "dirtybitmap: $bm: No such file or directory" --add $bm b0
grep -F "dirtybitmap: use --size SIZE to create it" fails.err
test ! -e $bm

# --size creates the file: add, empty and recording.
dirtybitmap bitmap --add --size 1M $bm b0
names > names.out
expect names.out <<'EOF2'
b0 65536 enabled
EOF2
dirtybitmap map $bm b0 > b0.map
expect b0.map <<'EOF2'
         0     1048576    1  hole
EOF2
# A bitmap the tool added is used by the filter.
write 0 200000
dirtybitmap map $bm b0 > b0.map
expect b0.map <<'EOF2'
         0       65536    0  data
     65536      131072    1  hole
    196608       65536    0  data
    262144      786432    1  hole
EOF2

# --size of an existing file must be its size, and then is a no-op.
dirtybitmap bitmap --add -g 4K --size 1048576 $bm b1
bitmap_fails "dirtybitmap: $bm: --size 2097152 does not match the disk size recorded in the file, 1048576 bytes" \
             --add --size 2M $bm b2
names > names.out
expect names.out <<'EOF2'
b0 65536 enabled
b1 4096 enabled
EOF2

# The rules of qemu-img bitmap.
bitmap_fails "dirtybitmap: action add on bitmap b0 failed: bitmap b0 already exists" \
             --add $bm b0
for a in remove clear enable disable; do
    bitmap_fails "dirtybitmap: action $a on bitmap b9 failed: bitmap b9 not found" \
                 --$a $bm b9
done
bitmap_fails "dirtybitmap: action merge:b0 on bitmap b9 failed: bitmap b9 not found" \
             --merge b0 $bm b9
bitmap_fails "dirtybitmap: action merge:b9 on bitmap b1 failed: bitmap b9 not found" \
             --merge b9 $bm b1
bitmap_fails "dirtybitmap: Need at least one of --add, --remove, --clear, --enable, --disable, or --merge" \
             $bm b0
bitmap_fails "dirtybitmap: granularity only supported with --add" \
             -g 4K --remove $bm b0
bitmap_fails "dirtybitmap: Merge bitmap source file only supported with --merge" \
             -b $bm --add $bm b2
bitmap_fails "dirtybitmap: Expecting filename and bitmap name" --add $bm
for g in 0 256 1000 4G; do
    bitmap_fails "dirtybitmap: -g $g: granularity must be a power of 2 from 512 to 2G" \
                 --add -g $g $bm b2
done
bitmap_fails "dirtybitmap: action add on bitmap  failed: bitmap name must be 1 to 1023 bytes" \
             --add $bm ""
long=$(printf 'n%.0s' {1..1024})
bitmap_fails "dirtybitmap: action add on bitmap $long failed: bitmap name must be 1 to 1023 bytes" \
             --add $bm $long
dirtybitmap bitmap --add --remove $bm ${long:1}
bitmap_fails "dirtybitmap: disk.img: not a dirtybitmap file (bad magic)" --add disk.img b0
bitmap_fails "dirtybitmap: nosuch: No such file or directory" \
             --merge b0 -b nosuch $bm b1
bitmap_fails "dirtybitmap: disk.img: not a dirtybitmap file (bad magic)" \
             --merge b0 -b disk.img $bm b1

# All or nothing: a failing action undoes the ones before it.
bitmap_fails "dirtybitmap: action merge:b9 on bitmap b2 failed: bitmap b9 not found" \
             --add --merge b9 $bm b2
bitmap_fails "dirtybitmap: action add on bitmap b0 failed: bitmap b0 already exists" \
             --clear --disable --remove --add --add $bm b0
# ... and a file --size created goes again.
bitmap_fails "dirtybitmap: action remove on bitmap b0 failed: bitmap b0 not found" \
             --remove --size 1M new.bitmaps b0
test ! -e new.bitmaps
bitmap_fails "dirtybitmap: nodir/new.bitmaps: cannot create: No such file or directory" \
             --add --size 1M nodir/new.bitmaps b0
dirtybitmap map $bm b0 > b0.map.after
cmp b0.map b0.map.after

# disable: no more recording, still answers; enable: records again.
dirtybitmap bitmap --disable $bm b0
write 300000
dirtybitmap map $bm b0 > b0.map.after
cmp b0.map.after b0.map
dirtybitmap bitmap --enable $bm b0
write 600000
dirtybitmap map $bm b0 > b0.map
expect b0.map <<'EOF2'
         0       65536    0  data
     65536      131072    1  hole
    196608       65536    0  data
    262144      327680    1  hole
    589824       65536    0  data
    655360      393216    1  hole
EOF2
dirtybitmap map $bm b1 > b1.map
expect b1.map <<'EOF2'
         0      299008    1  hole
    299008        4096    0  data
    303104      294912    1  hole
    598016        4096    0  data
    602112      446464    1  hole
EOF2

# Several actions in order: a new bitmap b2 (512 byte granules) that
# takes b0's bits, then b1's; a 64K granule dirties all 128 of its
# 512 byte granules, and a 4K one 8 of them.  clear, then merge.
dirtybitmap bitmap --add -g 512 --merge b0 --disable $bm b2
dirtybitmap bitmap --merge b1 $bm b2
dirtybitmap map $bm b2 > b2.map
expect b2.map <<'EOF2'
         0       65536    0  data
     65536      131072    1  hole
    196608       65536    0  data
    262144       36864    1  hole
    299008        4096    0  data
    303104      286720    1  hole
    589824       65536    0  data
    655360      393216    1  hole
EOF2
# ... and the other way: a 4K granule dirties the whole 64K one.
dirtybitmap bitmap --clear --merge b1 $bm b0
dirtybitmap map $bm b0 > b0.map
expect b0.map <<'EOF2'
         0      262144    1  hole
    262144       65536    0  data
    327680      262144    1  hole
    589824       65536    0  data
    655360      393216    1  hole
EOF2
dirtybitmap bitmap --clear $bm b1
dirtybitmap map $bm b1 > b1.map
expect b1.map <<'EOF2'
         0     1048576    1  hole
EOF2
names > names.out
expect names.out <<'EOF2'
b0 65536 enabled
b1 4096 enabled
b2 512 disabled
EOF2

# Merging a bitmap into itself changes nothing.
dirtybitmap bitmap --merge b2 $bm b2
dirtybitmap map $bm b2 > b2.map.after
cmp b2.map.after b2.map

# -b: merge from another file, read-only; -b naming FILE itself reads
# FILE as the earlier actions left it.
cp $bm other.bitmaps
dirtybitmap bitmap --clear $bm b2
other=$(md5sum < other.bitmaps)
dirtybitmap bitmap --merge b2 -b other.bitmaps $bm b1
test "$(md5sum < other.bitmaps)" = "$other"
dirtybitmap map $bm b1 > b1.map
cmp b1.map b2.map
dirtybitmap bitmap --clear --merge b1 --source-file $bm $bm b1
dirtybitmap map $bm b1 > b1.map
expect b1.map <<'EOF2'
         0     1048576    1  hole
EOF2
bitmap_fails "dirtybitmap: action merge:b7 on bitmap b1 failed: bitmap b7 not found in other.bitmaps" \
             --merge b2 --merge b7 -b other.bitmaps $bm b1
dirtybitmap bitmap --add --size 2M big.bitmaps b0
bitmap_fails "dirtybitmap: action merge:b0 on bitmap b1 failed: bitmap b0 in big.bitmaps covers a disk of 2097152 bytes, but this disk is 1048576 bytes" \
             --merge b0 -b big.bitmaps $bm b1
# A new file (--size) takes a source of its size; other sizes fail.
dirtybitmap bitmap --add --merge b2 -b other.bitmaps --size 1M copy.bitmaps b0
dirtybitmap map copy.bitmaps b0 > copy.map
expect copy.map <<'EOF2'
         0       65536    0  data
     65536      131072    1  hole
    196608      131072    0  data
    327680      262144    1  hole
    589824       65536    0  data
    655360      393216    1  hole
EOF2
bitmap_fails "dirtybitmap: copy2.bitmaps: --size 2097152 does not match the disk size of other.bitmaps, 1048576 bytes" \
             --add --merge b2 -b other.bitmaps --size 2M copy2.bitmaps b0
test ! -e copy2.bitmaps

# A file whose disk size is unknown yet (the filter made it, no client
# connected): bitmaps have no bits until --size or a client says.
nbdkit -U - --filter="$FILTER" file disk.img bitmap-file=unsized.bitmaps \
       bitmap=b0 action=add --run true
dirtybitmap bitmap --add -g 1K unsized.bitmaps b1
dirtybitmap info unsized.bitmaps > info.out
grep -F "disk size: unknown" info.out
# Merging a source of known size gives it that size, all clean but
# for the source's bits; --size must agree.
bitmap_fails "dirtybitmap: unsized.bitmaps: --size 2097152 does not match the disk size of copy.bitmaps, 1048576 bytes" \
             --merge b0 -b copy.bitmaps --size 2M unsized.bitmaps b0
dirtybitmap info unsized.bitmaps > info.out
grep -F "disk size: unknown" info.out
dirtybitmap bitmap --merge b0 -b copy.bitmaps --size 1M unsized.bitmaps b0
dirtybitmap info unsized.bitmaps > info.out
grep -F "disk size: 1048576 (1 MiB)" info.out
dirtybitmap map unsized.bitmaps b0 > unsized.map
cmp unsized.map copy.map
dirtybitmap map unsized.bitmaps b1 > unsized.map
expect unsized.map <<'EOF2'
         0     1048576    1  hole
EOF2

# remove.
dirtybitmap bitmap --remove $bm b1
names > names.out
expect names.out <<'EOF2'
b0 65536 enabled
b2 512 disabled
EOF2
bitmap_fails "dirtybitmap: action remove on bitmap b1 failed: bitmap b1 not found" \
             --remove $bm b1

# Inconsistent bitmaps (the machine stopped under a durability=flush
# server): only --remove works on them, and a commit keeps the mark.
python3 "$edit" $bm set flags 3
python3 "$edit" $bm set boot_id 00000000-0000-0000-0000-000000000000
why="bitmap b0 is inconsistent: it was recording when the machine stopped uncleanly or its file could not be synced, so it may have missed changes; remove it and take a full backup"
for a in clear enable disable; do
    bitmap_fails "dirtybitmap: action $a on bitmap b0 failed: $why" --$a $bm b0
done
bitmap_fails "dirtybitmap: action merge:b2 on bitmap b0 failed: $why" \
             --merge b2 $bm b0
bitmap_fails "dirtybitmap: action merge:b0 on bitmap b2 failed: $why" \
             --merge b0 $bm b2
dirtybitmap bitmap --add $bm b3
dirtybitmap info $bm > info.out
grep -F "state: closed cleanly" info.out
dirtybitmap info --output=json $bm > info.json
python3 - info.json <<'EOF2'
import json, sys
d = json.load(open(sys.argv[1]))
assert [(b["name"], b["consistent"]) for b in d["bitmaps"]] == \
    [("b0", False), ("b2", True), ("b3", True)], d
EOF2
dirtybitmap bitmap --remove $bm b0
names > names.out
expect names.out <<'EOF2'
b2 512 disabled
b3 65536 enabled
EOF2
dirtybitmap check $bm
