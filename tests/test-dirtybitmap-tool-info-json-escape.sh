#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap info --output=json escapes names and paths.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

bm=disk.img.bitmaps

dirtybitmap bitmap --add --size 1000000 $bm b0
dirtybitmap bitmap --add -g 4K $bm b1

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
