# SPDX-License-Identifier: BSD-3-Clause
# tool-bitmap-lib.sh: what the test-dirtybitmap-tool-bitmap-*.sh tests
# share, sourced after functions.sh: a 1M disk.img of data, and
# write, bitmap_fails and names.

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
