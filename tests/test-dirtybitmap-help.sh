#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# --help names the filter's version and lists every parameter; -v says
# the version too.  The filter's line of --version is the nbdkit
# version it was built for: nbdkit 1.32 loads a filter only when that
# is its own, and has no other version field for filters.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' \
              "$abs_top_builddir/config.h")
test -n "$version"
nbdkit_version=$(nbdkit --version | awk '{print $2}')

nbdkit --filter="$FILTER" null --help > help.out
grep -A2 '^filter: dirtybitmap ' help.out > filter-help.out
expect filter-help.out <<EOF2
filter: dirtybitmap (nbdkit dirty bitmap (changed block tracking) filter)
($FILTER)
nbdkit-dirtybitmap-filter $version: persistent changed-block tracking for any plugin.
EOF2
for p in bitmap= action= granularity= bitmap-file= merge-file= \
         extents= durability= coarse-granularity= export= control= \
         restore-from= restore-checkpoint=; do
    grep "^$p" help.out
done
grep -F "flush|strict|coarse" help.out

nbdkit -v --filter="$FILTER" null --version > version.out 2> debug.out
expect version.out <<EOF2
nbdkit $nbdkit_version
dirtybitmap $nbdkit_version
null $nbdkit_version
EOF2
grep -Fx "nbdkit: debug: dirtybitmap: nbdkit-dirtybitmap-filter $version" \
     debug.out
