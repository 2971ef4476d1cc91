#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# --help lists every parameter; --version shows the filter layer.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

nbdkit --filter="$FILTER" null --help > help.out
for p in bitmap= action= granularity= bitmap-file= merge-file= \
         extents= durability= coarse-granularity= "flush|strict|coarse"; do
    grep -F "$p" help.out
done
nbdkit --filter="$FILTER" null --version > version.out
grep -F "dirtybitmap $(nbdkit --version | awk '{print $2}')" version.out
