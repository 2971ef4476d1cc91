#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The fuzz target on every input of the seed corpus and of
# fuzz/regressions/ (files shaped like those that once crashed the
# loader or made a commit corrupt a file): none may abort, and with
# ASan and UBSan (when the compiler has them) none may read out of
# bounds, leak or shift too far.
source ./functions.sh
set -e
set -x

replay="$abs_top_builddir/tests/fuzz/replay"
requires test -x "$replay"

corpus="$abs_top_srcdir/tests/fuzz/corpus"
regressions="$abs_top_srcdir/tests/fuzz/regressions"
FUZZ_TMPDIR="$tmpdir" "$replay" "$corpus" "$regressions" > replay.out
cat replay.out
# Every file was replayed.
n=$(ls "$corpus" "$regressions" | grep -c '\.bitmaps$')
test "$n" -ge 10
grep -Fx "replay: $n inputs" replay.out
