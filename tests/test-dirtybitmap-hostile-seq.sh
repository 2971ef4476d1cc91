#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Header sequence numbers.  A (checksum-valid) header whose sequence
# number would wrap at the next commit is refused, and the file left
# as it is: once the next commit wrote 0 in the other slot, the stale
# slot would stay current and the change would be lost.  Two valid
# slots with one sequence number but different contents are reported:
# which one is current cannot be told.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires python3 --version

edit="$abs_top_srcdir/tests/bmfile-edit.py"

dirtybitmap bitmap --add --size 1M seq.bitmaps b0
python3 "$edit" seq.bitmaps set seq 0xffffffffffffffff
sum=$(md5sum < seq.bitmaps)
tool_fails "dirtybitmap: seq.bitmaps: header sequence number 18446744073709551615 is out of range (1 to 2^63-1)" \
           bitmap --add seq.bitmaps b1
test "$(md5sum < seq.bitmaps)" = "$sum"
tool_fails "seq.bitmaps: header sequence number 18446744073709551615 is out of range" \
           check seq.bitmaps
tool_fails "seq.bitmaps: header sequence number 18446744073709551615 is out of range" \
           info seq.bitmaps
test "$(md5sum < seq.bitmaps)" = "$sum"

# Two slots, one sequence number: both valid, different contents.
dirtybitmap bitmap --add --size 1M twin.bitmaps b0
dirtybitmap bitmap --add twin.bitmaps b1
cur=$(python3 "$edit" twin.bitmaps current)
seq=$(python3 "$edit" twin.bitmaps get seq)
python3 "$edit" twin.bitmaps set seq $seq $((1 - cur))
sum=$(md5sum < twin.bitmaps)
tool_fails "twin.bitmaps: both header slots have sequence number $seq but differ: which one is current cannot be told" \
           check twin.bitmaps
tool_fails "twin.bitmaps: both header slots have sequence number $seq but differ" \
           bitmap --remove twin.bitmaps b1
test "$(md5sum < twin.bitmaps)" = "$sum"
