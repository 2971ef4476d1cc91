#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The tree itself: no shell script says "! cmd" as a statement (under
# set -e it never fails), every source file, test and script has an
# SPDX-License-Identifier line, and every folder of the code matches
# its map: each .c and .h is named there, each file named exists (see
# lint.py).
source ./functions.sh
set -e
set -x
requires python3 --version

python3 "$abs_top_srcdir/tests/lint.py" "$abs_top_srcdir" > lint.out || {
    cat lint.out
    exit 1
}
cat lint.out
# It did look at the scripts.
grep -E "^lint: [0-9]+ files, ([1-9][0-9]+) shell scripts, 0 problems$" \
     lint.out
