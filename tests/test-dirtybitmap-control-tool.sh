#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap info and bitmap through --control SOCKET say and do what
# they say and do offline: the same script of actions is run against a
# served disk and, from the same starting file at the same path,
# against the stopped file; every exit status, stdout and stderr, and
# "info" (human and JSON) after every step must be the same, but for
# the state line (in use / closed).
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

size=$((1024 * 1024))
top="$(realpath .)"
bm="$top/disk.img.bitmaps"
ctl="$top/ctl.sock"
edit="$abs_top_srcdir/tests/bmfile-edit.py"
truncate -s $size disk.img

# A file that no client has sized yet: the same "unknown" size.
start_nbdkit -P "$top/pidu" -U "$top/nbdu.sock" --filter="$FILTER" \
             file disk.img bitmap-file="$top/unsized.bitmaps" \
             bitmap=u0 action=add control="$top/ctlu.sock"
dirtybitmap info --control "$top/ctlu.sock" > unsized.live
kill_nbdkit "$(cat pidu)"
dirtybitmap info "$top/unsized.bitmaps" > unsized.offline
sed -i 's/^state: .*/state: (normalized)/' unsized.live unsized.offline
diff -u unsized.offline unsized.live
grep -Fx "disk size: unknown (no client has connected yet)" unsized.live

# The starting file: b0 with dirty bits, and "bad", inconsistent.
dirtybitmap bitmap --add -g 4K --size $size "$bm" b0
dirtybitmap bitmap --add "$bm" bad
python3 "$edit" "$bm" entry 1 flags 3
nbdkit -U - --filter="$FILTER" file disk.img bitmap-file="$bm" \
       --run 'nbdsh -u "$uri" -c "h.pwrite(b\"x\" * 10000, 70000)"'
cp "$bm" start.bitmaps
# Merge sources in other files: one of the same size, one bigger.
dirtybitmap bitmap --add -g 512 --size $size other.bitmaps s0
nbdkit -U - --filter="$FILTER" memory $size bitmap-file="$top/other.bitmaps" \
       --run 'nbdsh -u "$uri" -c "h.pwrite(b\"y\" * 5000, 300000)"'
dirtybitmap bitmap --add --size $((2 * size)) big.bitmaps s0

long=$(printf 'n%.0s' {1..1024})
# OPTIONS|BITMAP, run as "dirtybitmap bitmap OPTIONS FILE BITMAP" and
# as "dirtybitmap bitmap OPTIONS --control SOCKET BITMAP".
steps=(
    "--add -g 4K|b1"
    "--add|b1"
    "--add -g 1000|b2"
    "--disable|b0"
    "--disable|b0"
    "--merge b0|b1"
    "--merge nosuch|b1"
    "--clear --merge b0|b1"
    "--enable|nosuch"
    "--add --merge b0 --disable|b2"
    "--add --merge nosuch|b3"
    "--add -g 64K --merge b1 --remove|b3"
    "--remove|b2"
    "--merge s0 -b other.bitmaps|b1"
    "--merge s0 -b big.bitmaps|b1"
    "--merge s0 -b nosuch.bitmaps|b1"
    "--merge nosuch -b other.bitmaps|b1"
    "-b other.bitmaps --add|b5"
    "--enable|bad"
    "--merge bad|b1"
    "--clear|bad"
    "--remove|bad"
    "--add|$long"
    "--add|"
    "--merge ''|b1"
    "--merge $long|b1"
    "--merge b0 -b disk.img.bitmaps|b1"
    "--merge s0 -b disk.img|b1"
    "--merge s0 -b ''|b1"
    "--clear|b1"
    "--enable|b0"
    "--remove|b0"
)

# run MODE DIR: every step, with its status, output and info after it.
run ()
{
    local mode=$1 dir=$2 i=0 step opts name where r
    local -a args
    mkdir $dir
    for step in "${steps[@]}"; do
        opts=${step%|*} name=${step##*|}
        eval "args=($opts)"
        if [ $mode = live ]; then where=(--control "$ctl"); else where=("$bm"); fi
        r=0
        dirtybitmap bitmap "${args[@]}" "${where[@]}" "$name" \
                    > $dir/$i.out 2> $dir/$i.err || r=$?
        echo $r > $dir/$i.status
        dirtybitmap info "${where[@]}" > $dir/$i.info
        dirtybitmap info --output=json "${where[@]}" > $dir/$i.json
        sed -i -e 's/^state: .*/state: (normalized)/' \
            -e 's/^    "state": .*/    "state": (normalized)/' \
            $dir/$i.info $dir/$i.json
        i=$((i + 1))
    done
}

start_nbdkit -P "$top/pid" -U "$top/nbd.sock" --filter="$FILTER" \
             file disk.img bitmap-file="$bm" control="$ctl"
run live live
kill_nbdkit "$(cat pid)"

cp start.bitmaps "$bm"
run offline offline

diff -ur offline live
# Not a vacuous comparison: the steps succeed and fail as they should.
for (( i = 0; i < ${#steps[@]}; ++i )); do
    cat offline/$i.status
done | tr -d '\n' > statuses
echo >> statuses
expect statuses <<'EOF2'
01100010101000111111101111011000
EOF2
grep -F "dirtybitmap: action add on bitmap b1 failed: bitmap b1 already exists" live/1.err
grep -F "dirtybitmap: action merge:s0 on bitmap b1 failed: bitmap s0 in big.bitmaps covers a disk of 2097152 bytes" live/14.err
grep -F "bitmap bad is inconsistent" live/18.err
grep -F '"name": "b1"' live/31.json
