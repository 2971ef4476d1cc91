#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The rule for writes made without the filter, over random sequences
# of what users do (model.py): MODEL_SEQUENCES sequences (200) of
# MODEL_STEPS steps (25) from seed MODEL_SEED (1), one in sixteen on
# a file system whose times are whole seconds.  A failure prints
# the seed and the steps; run it again alone with
#   MODEL_SEED=N MODEL_SEQUENCES=1 ./test-dirtybitmap-model.sh
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires_boot_id_mount

# One sequence in sixteen keeps its disk on a file system whose times
# are whole seconds (model.py's MODEL_COARSE_DIR), where a loop device
# can be had.
if [ "$(id -u)" = 0 ] && mkfs.ext4 -V >/dev/null 2>&1 &&
   truncate -s 512M coarse.img &&
   l=$(losetup -f --show coarse.img 2>/dev/null) && losetup -d "$l"; then
    mount_loop_ext4 coarse.img coarse -I 128
    export MODEL_COARSE_DIR="$PWD/coarse"
else
    echo "$0: no loop device: no sequence on a file system of whole seconds"
fi

python3 "$abs_top_srcdir/tests/model.py" "${MODEL_SEED:-1}" \
        "${MODEL_SEQUENCES:-200}" "${MODEL_STEPS:-25}" > model.out || {
    cat model.out
    exit 1
}
cat model.out
grep -Fx "${MODEL_SEQUENCES:-200} sequences of ${MODEL_STEPS:-25} steps, 0 failed" model.out
