#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The control protocol's fuzz target on every input of its seed corpus
# (valid requests of every command, and tricky ones): none may abort
# (no crash, no request out of limits, every reply one line of strict
# JSON in valid UTF-8, the id echoed), with ASan and UBSan when the
# compiler has them; and each is parsed, or refused, as
# fuzz/control-corpus.expected says.
source ./functions.sh
set -e
set -x

replay="$abs_top_builddir/tests/fuzz/replay-control"
requires test -x "$replay"

corpus="$abs_top_srcdir/tests/fuzz/control-corpus"
FUZZ_CONTROL_TRACE=1 "$replay" "$corpus" > replay.out
cat replay.out
n=$(ls "$corpus" | grep -c '\.json$')
test "$n" -ge 30
grep -Fx "replay: $n inputs" replay.out
# NAME OUTCOME, for each input.
awk '/^replay: .* bytes\)$/ { n = $2; sub(/.*\//, "", n) }
     /^-> / { print n, $2, $3 }' replay.out > outcomes
diff -u "$abs_top_srcdir/tests/fuzz/control-corpus.expected" outcomes
