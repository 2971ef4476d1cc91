#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A bitmap added offline, between a run that only read and a write
# made without the filter, does not trust the disk it did not see.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
source "$abs_top_srcdir/tests/identity-lib.sh"

idle bitmap-file=disk.img.bitmaps
dirtybitmap bitmap --add disk.img.bitmaps o1
outside 3
found o1
