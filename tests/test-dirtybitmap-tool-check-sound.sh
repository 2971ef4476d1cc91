#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap check of a sound file: exit 0, a message on stdout,
# nothing on stderr.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

source "$abs_top_srcdir/tests/tool-check-lib.sh"

dirtybitmap check good.bitmaps > good.out 2> good.err
expect good.out <<'EOF2'
No errors were found in the bitmap file.
EOF2
test ! -s good.err
