#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# kill -9 of nbdkit while it applies startup actions (add, remove,
# clear, merge, disable, enable), at random moments, many times: the
# file always passes check, and holds exactly the state before or the
# state after the action.  ROUNDS=N sets the number of rounds (make
# soak).
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

rounds=${ROUNDS:-30}
# A big sparse disk: 512K of bits per bitmap at 4K, so that commits
# take long enough to be cut.
truncate -s 16G disk.img
f=disk.img.bitmaps
dirtybitmap bitmap --add -g 4K --size 16G $f base
dirtybitmap bitmap --add -g 64K $f other
nbdkit -U - --filter="$FILTER" file disk.img \
       --run 'nbdsh -u "$uri" -c "h.pwrite(b\"x\", 0)" \
                             -c "h.zero(1048576, 8589934592)"'

# state FILE: what info shows, without the file name.
state ()
{
    dirtybitmap info "$1" > state.info
    grep -v '^file:' state.info
}

old=0 new=0
for (( i = 1; i <= rounds; ++i )); do
    # The action and the same action for the tool.
    dirtybitmap info $f > info
    if grep -q 'name: b$' info; then
        case $((RANDOM % 5)) in
            0) act="action=remove";      tool="--remove" ;;
            1) act="action=clear";       tool="--clear" ;;
            2) act="action=merge:base";  tool="--merge base" ;;
            3) act="action=disable";     tool="--disable" ;;
            4) act="action=enable";      tool="--enable" ;;
        esac
    else
        act="action=add granularity=4K"; tool="--add -g 4K"
    fi
    state $f > before
    cp $f expected.bitmaps
    dirtybitmap bitmap $tool expected.bitmaps b
    state expected.bitmaps > after

    nbdkit -f -U "$PWD/sock$i" --filter="$FILTER" file disk.img \
           bitmap=b $act &
    pid=$!
    # A random moment in the first 60 ms of the start (nbdkit -f
    # serves until killed: had it ended, on an error, kill9 says so).
    sleep "$(printf 0.%03d $(( RANDOM % 60 )))"
    kill9 $pid

    dirtybitmap check $f
    state $f > got
    if cmp -s got before; then
        old=$((old + 1))
    elif cmp -s got after; then
        new=$((new + 1))
    else
        echo "$0: round $i: neither the old nor the new state"
        diff -u before got || :
        diff -u after got || :
        exit 1
    fi
done
echo "old state $old times, new state $new times"
