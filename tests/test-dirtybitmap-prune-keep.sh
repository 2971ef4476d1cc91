#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The keep rules of dirtybitmap prune, against a model: which points
# --dry-run keeps, and the option that keeps each, for repositories of
# records alone (a point's time is its record's), on a simulated
# calendar of a year and more, and for cases worked by hand
# (prune-model.py).  A dry run needs no image.
source ./functions.sh
set -e
set -x
requires python3 --version

python3 "$abs_top_srcdir/tests/prune-model.py" "$(command -v dirtybitmap)" \
        "$PWD" 20261206 60
