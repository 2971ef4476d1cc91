#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap info of what is not a bitmap file: exit 1 and a message
# naming it.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

yes | head -c 1000000 > disk.img

# Errors.
tool_fails "dirtybitmap: nosuch.bitmaps: No such file or directory" \
      info nosuch.bitmaps
tool_fails "dirtybitmap: disk.img: not a dirtybitmap file (bad magic)" \
      info disk.img
tool_fails "dirtybitmap: .: not a regular file" info .
