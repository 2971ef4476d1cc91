# SPDX-License-Identifier: BSD-3-Clause
# tool-check-lib.sh: what the test-dirtybitmap-tool-check-*.sh tests
# share, sourced after functions.sh: good.bitmaps, its layout, and
# refused, which corrupts a copy of it and checks that every user of
# the copy refuses it.

edit="$abs_top_srcdir/tests/bmfile-edit.py"

# good.bitmaps: a 1000000 byte disk, b0 (64K granules, 16 of them)
# and b1 (4K), some bits set; written in durability=flush, so without
# coarse shadows: the layout the offsets below are taken from.
yes | head -c 1000000 > disk.img
dirtybitmap bitmap --add --size 1000000 good.bitmaps b0
dirtybitmap bitmap --add -g 4K good.bitmaps b1
nbdkit -U - --filter="$FILTER" file disk.img bitmap-file=good.bitmaps \
       durability=flush --run 'nbdsh -u "$uri" -c "h.pwrite(b\"x\", 100000)"'
off0=$(python3 "$edit" good.bitmaps entry-get 0 data_offset)
len=$(python3 "$edit" good.bitmaps get file_length)
dlen=$(python3 "$edit" good.bitmaps get dir_length)
cur=$(python3 "$edit" good.bitmaps current)

# refused MESSAGE CMD...: make c.bitmaps from good.bitmaps with CMD (a
# command on c.bitmaps), then check reports MESSAGE as its only
# problem, and every other user of the file refuses it with MESSAGE.
refused ()
{
    local msg="$1" r sum; shift
    cp good.bitmaps c.bitmaps
    "$@"
    sum=$(md5sum < c.bitmaps)

    r=0; dirtybitmap check c.bitmaps > out 2> err || r=$?
    cat err
    test $r = 1
    test ! -s out
    expect err <<EOF2
dirtybitmap: c.bitmaps: $msg
dirtybitmap: c.bitmaps: 1 problem found
EOF2
    for args in "info c.bitmaps" "info -U c.bitmaps" "map c.bitmaps b0" \
                "bitmap --add c.bitmaps b9" "bitmap --remove c.bitmaps b0" \
                "bitmap --add --size 1000000 c.bitmaps b9" \
                "bitmap --merge b0 -b c.bitmaps good.bitmaps b1"; do
        tool_fails -k good.bitmaps "dirtybitmap: c.bitmaps: $msg" $args
    done
    fails "c.bitmaps: $msg" \
          nbdkit -U - --filter="$FILTER" file disk.img \
                 bitmap-file=c.bitmaps bitmap=b0 --run true
    test "$(md5sum < c.bitmaps)" = "$sum"
}
poke () { python3 "$edit" c.bitmaps "$@"; }
both_slots () { poke "$@" 0; poke "$@" 1; }
