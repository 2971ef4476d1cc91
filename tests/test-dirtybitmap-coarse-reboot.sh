#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Simulated power losses in durability=coarse, round after round: after
# random writes, SIGKILL, the bits the page cache held since the last
# sync thrown away, and a start on another boot, every written granule
# is dirty, and no more than the coarse granules written; the start
# says how many bytes the power loss made dirty; the bitmaps stay
# consistent.  A SIGKILL on the same boot keeps the bits exact.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires_boot_id_mount

if ! python3 "$abs_top_srcdir/tests/coarse-rounds.py" plain ${ROUNDS:-8} ${SEED:-$RANDOM} \
  > rounds.out 2>&1; then
    cat rounds.out
    exit 1
fi
cat rounds.out
grep -F "coarse-rounds: ${ROUNDS:-8} rounds, every write found" rounds.out
