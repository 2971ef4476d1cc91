#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A torn write of the header slot being replaced is no problem for
# dirtybitmap check: the other slot is current, and used as it was.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

source "$abs_top_srcdir/tests/tool-check-lib.sh"

# A torn write of the header slot being replaced is no problem: the
# other slot is current, and the file is used as it was.
cp good.bitmaps c.bitmaps
poke set-raw seq 12345 $((1 - cur))
dirtybitmap check c.bitmaps
dirtybitmap map good.bitmaps b1 > good.map
dirtybitmap map c.bitmaps b1 > c.map
cmp c.map good.map
