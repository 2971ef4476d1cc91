#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Metadata changes are atomic: every kind of transaction (also the
# first commit after a reboot), cut by a crash before each of its
# system calls, leaves a file that passes check and holds the old or
# the new state; commits sync in the order power loss needs; a failed
# sync does not let a later commit break the file.
source ./functions.sh
set -e
set -x

"$abs_top_builddir/tests/txn-cut" > txn-cut.out
cat txn-cut.out
grep -F "txn-cut: all cuts left the old or the new state" txn-cut.out
# Every kind ran, and was cut more than once.
for kind in add remove clear enable disable merge grow shrink open several \
           reboot; do
    grep -E "^$kind: ([2-9]|[1-9][0-9]+) calls; new state:" txn-cut.out
done
