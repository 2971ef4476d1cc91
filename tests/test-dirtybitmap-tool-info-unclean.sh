#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap info of a file a server left open: after a machine stop
# under durability=flush the enabled bitmaps are inconsistent, the
# disabled ones not; under durability=strict, or on the same boot,
# nothing is lost; info only reads.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

edit="$abs_top_srcdir/tests/bmfile-edit.py"
bm=disk.img.bitmaps

# b0 (64K) and b1 (4K) dirty at 0, 70000 and 999999; then b1 is
# disabled and only b0 records a write at 500000.
yes | head -c 1000000 > disk.img
dirtybitmap bitmap --add --size 1000000 $bm b0
dirtybitmap bitmap --add -g 4K $bm b1
nbdkit -U - --filter="$FILTER" file disk.img \
       --run 'nbdsh -u "$uri" -c "h.pwrite(b\"x\", 0)" \
                              -c "h.pwrite(b\"x\" * 10, 70000)" \
                              -c "h.pwrite(b\"x\", 999999)"'
dirtybitmap bitmap --disable $bm b1
nbdkit -U - --filter="$FILTER" file disk.img \
       --run 'nbdsh -u "$uri" -c "h.pwrite(b\"x\", 500000)"'

# The machine stopped while a durability=flush server had the file
# open (another boot id): enabled bitmaps are inconsistent, disabled
# ones are not.
cp $bm crash.bitmaps
python3 "$edit" crash.bitmaps set flags 3
python3 "$edit" crash.bitmaps set open_pid 4242
python3 "$edit" crash.bitmaps set boot_id 00000000-0000-0000-0000-000000000000
sum=$(md5sum < crash.bitmaps)
dirtybitmap info crash.bitmaps > crash.out
expect crash.out <<'EOF2'
file: crash.bitmaps
format version: 1
disk size: 1000000 (977 KiB)
state: not closed cleanly (pid 4242, durability=flush, machine restarted since)
bitmaps:
    [0]:
        name: b0
        granularity: 65536
        recording: false
        consistent: false
        dirty bytes: 213568 (209 KiB)
    [1]:
        name: b1
        granularity: 4096
        recording: false
        consistent: true
        dirty bytes: 8768 (8.56 KiB)
EOF2
dirtybitmap info --output=json crash.bitmaps > crash.json
grep -F '"state": "unclean",' crash.json
python3 -c '
import json
d = json.load(open("crash.json"))
assert [(b["name"], b["recording"], b["consistent"]) for b in d["bitmaps"]] \
    == [("b0", False, False), ("b1", False, True)], d
'
# info only reads.
test "$(md5sum < crash.bitmaps)" = "$sum"

# The same with durability=strict, or on this boot: nothing is lost.
cp crash.bitmaps strict.bitmaps
python3 "$edit" strict.bitmaps set open_mode 1
dirtybitmap info strict.bitmaps > strict.out
grep -F "state: not closed cleanly (pid 4242, durability=strict, machine restarted since)" strict.out
test "$(grep -c 'consistent: true' strict.out)" = 2
cp crash.bitmaps sameboot.bitmaps
python3 "$edit" sameboot.bitmaps set boot_id "$(cat /proc/sys/kernel/random/boot_id)"
dirtybitmap info sameboot.bitmaps > sameboot.out
grep -F "state: not closed cleanly (pid 4242, durability=flush, same boot)" sameboot.out
test "$(grep -c 'consistent: true' sameboot.out)" = 2
