#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Simulated power losses in durability=coarse with control
# transactions between the writes (clear, merge, add, remove): each
# bitmap's shadow follows its bits through them, so a start on another
# boot finds every write, and no more than the coarse granules written
# since each bitmap was cleared or added.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires_boot_id_mount

if ! python3 "$abs_top_srcdir/tests/coarse-rounds.py" txn ${ROUNDS:-8} ${SEED:-$RANDOM} \
  > rounds.out 2>&1; then
    cat rounds.out
    exit 1
fi
cat rounds.out
grep -F "coarse-rounds: ${ROUNDS:-8} rounds, every write found" rounds.out
