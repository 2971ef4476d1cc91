#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap info: disk size, state and, per bitmap, granularity,
# recording, consistent and dirty bytes, as text and as JSON; and its
# errors.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

edit="$abs_top_srcdir/tests/bmfile-edit.py"
bm=disk.img.bitmaps

# A file the filter created, no client yet: the disk size is unknown.
yes | head -c 1000000 > disk.img
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=add --run true
dirtybitmap info $bm > info.out
expect info.out <<'EOF2'
file: disk.img.bitmaps
format version: 1
disk size: unknown (no client has connected yet)
state: closed cleanly
bitmaps:
    [0]:
        name: b0
        granularity: 65536
        recording: true
        consistent: true
        dirty bytes: 0 (0 B)
EOF2
dirtybitmap info --output=json $bm > info.json
expect info.json <<'EOF2'
{
    "filename": "disk.img.bitmaps",
    "format-version": 1,
    "disk-size": null,
    "state": "closed",
    "bitmaps": [
        {
            "name": "b0",
            "granularity": 65536,
            "recording": true,
            "consistent": true,
            "dirty-bytes": 0
        }
    ]
}
EOF2

# No bitmaps at all.
dirtybitmap bitmap --add --size 1M empty.bitmaps b0
dirtybitmap bitmap --remove empty.bitmaps b0
dirtybitmap info empty.bitmaps > empty.out
expect empty.out <<'EOF2'
file: empty.bitmaps
format version: 1
disk size: 1048576 (1 MiB)
state: closed cleanly
bitmaps: none
EOF2
dirtybitmap info --output json empty.bitmaps > empty.json
expect empty.json <<'EOF2'
{
    "filename": "empty.bitmaps",
    "format-version": 1,
    "disk-size": 1048576,
    "state": "closed",
    "bitmaps": []
}
EOF2

# Dirty bytes count whole granules, the last one cut at the end of
# the disk: b0 (64K) granules 0, 1, 15 = 2 * 65536 + 16960; b1 (4K)
# granules 0, 17, 244 = 2 * 4096 + 576.  A disabled bitmap does not
# record, and still counts.
rm -f $bm
dirtybitmap bitmap --add --size 1000000 $bm b0
dirtybitmap bitmap --add -g 4K $bm b1
nbdkit -U - --filter="$FILTER" file disk.img \
       --run 'nbdsh -u "$uri" -c "h.pwrite(b\"x\", 0)" \
                              -c "h.pwrite(b\"x\" * 10, 70000)" \
                              -c "h.pwrite(b\"x\", 999999)"'
dirtybitmap bitmap --disable $bm b1
nbdkit -U - --filter="$FILTER" file disk.img \
       --run 'nbdsh -u "$uri" -c "h.pwrite(b\"x\", 500000)"'
dirtybitmap info $bm > info.out
expect info.out <<'EOF2'
file: disk.img.bitmaps
format version: 1
disk size: 1000000 (977 KiB)
state: closed cleanly
bitmaps:
    [0]:
        name: b0
        granularity: 65536
        recording: true
        consistent: true
        dirty bytes: 213568 (209 KiB)
    [1]:
        name: b1
        granularity: 4096
        recording: false
        consistent: true
        dirty bytes: 8768 (8.56 KiB)
EOF2
dirtybitmap info --output=json $bm > info.json
expect info.json <<'EOF2'
{
    "filename": "disk.img.bitmaps",
    "format-version": 1,
    "disk-size": 1000000,
    "state": "closed",
    "bitmaps": [
        {
            "name": "b0",
            "granularity": 65536,
            "recording": true,
            "consistent": true,
            "dirty-bytes": 213568
        },
        {
            "name": "b1",
            "granularity": 4096,
            "recording": false,
            "consistent": true,
            "dirty-bytes": 8768
        }
    ]
}
EOF2
# --output=human is the default; options may follow the file.
dirtybitmap info --output=human $bm > human.out
cmp human.out info.out
dirtybitmap info $bm --output=json > after.json
cmp after.json info.json

# Names and paths are escaped in JSON.
cp $bm 'we"ird\.bitmaps'
dirtybitmap bitmap --add 'we"ird\.bitmaps' "$(printf 'a"b\\c\td')"
dirtybitmap info --output=json 'we"ird\.bitmaps' > weird.json
python3 -c '
import json, sys
d = json.load(open("weird.json"))
assert d["filename"] == "we\"ird\\.bitmaps", d["filename"]
assert [b["name"] for b in d["bitmaps"]] == ["b0", "b1", "a\"b\\c\td"], d
'

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

# Errors.
tool_fails "dirtybitmap: nosuch.bitmaps: No such file or directory" \
      info nosuch.bitmaps
tool_fails "dirtybitmap: disk.img: not a dirtybitmap file (bad magic)" \
      info disk.img
tool_fails "dirtybitmap: .: not a regular file" info .
