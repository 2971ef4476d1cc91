#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# systemd-analyze verify finds nothing to say about
# nbdkit-dirtybitmap@.service as built, with the drop-in its generator
# makes for a NAME.conf: every setting known and well formed, nbdkit's
# path executable, its man pages there.
source ./functions.sh
set -e
set -x

requires systemd-analyze --version
requires man --version

mkdir units conf man1
cp "$abs_top_builddir/systemd/nbdkit-dirtybitmap@.service" units/
cat > conf/vm1-os.conf <<'EOF2'
DISK=/srv/vm1/os.img
FILTER_ARGS=bitmap-file=/var/lib/dirtybitmap/vm1-os.bitmaps
EOF2
DIRTYBITMAP_CONFIG_DIR="$PWD/conf" \
    "$abs_top_builddir/systemd/nbdkit-dirtybitmap-generator" "$PWD/units"
test -s units/nbdkit-dirtybitmap@vm1-os.service.d/50-read-write-paths.conf

# Documentation= names man pages: those just built.
ln -s "$abs_top_builddir/man/dirtybitmap.1" \
      "$abs_top_builddir/man/nbdkit-dirtybitmap-filter.1" man1/

# verify exits 0 even when it warns: what it prints is the verdict.
set +x
(cd units && MANPATH="$PWD/.." SYSTEMD_UNIT_PATH="$PWD:" \
    systemd-analyze verify nbdkit-dirtybitmap@vm1-os.service) > verify.out 2>&1
set -x
cat verify.out
[ ! -s verify.out ]
