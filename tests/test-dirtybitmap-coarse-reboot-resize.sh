#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Simulated power losses in durability=coarse while the disk changes
# size (nbdkit's truncate filter below the dirtybitmap filter): a grown
# area is dirty in the bits and the shadows, a shrunk one is cut from
# both, and a start on another boot finds every write, and no more than
# the coarse granules written or grown.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires_boot_id_mount
requires nbdkit --filter=truncate null --version

if ! python3 "$abs_top_srcdir/tests/coarse-rounds.py" resize ${ROUNDS:-8} ${SEED:-$RANDOM} \
  > rounds.out 2>&1; then
    cat rounds.out
    exit 1
fi
cat rounds.out
grep -F "coarse-rounds: ${ROUNDS:-8} rounds, every write found" rounds.out
