#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The rule for writes made without the filter, over random sequences
# of what users do (model.py): MODEL_SEQUENCES sequences (200) of
# MODEL_STEPS steps (25) from seed MODEL_SEED (1).  A failure prints
# the seed and the steps; run it again alone with
#   MODEL_SEED=N MODEL_SEQUENCES=1 ./test-dirtybitmap-model.sh
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires_boot_id_mount

python3 "$abs_top_srcdir/tests/model.py" "${MODEL_SEED:-1}" \
        "${MODEL_SEQUENCES:-200}" "${MODEL_STEPS:-25}" > model.out || {
    cat model.out
    exit 1
}
cat model.out
grep -Fx "${MODEL_SEQUENCES:-200} sequences of ${MODEL_STEPS:-25} steps, 0 failed" model.out
