#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A copy that fails (a target served read-only) fails the backup at
# once: exit 1, "backup incomplete", no view and no checkpoint left,
# and the next run to a good target succeeds.  (The first copy to fail
# used to take the lock that stops the others twice, and the backup
# hung for ever.)
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires qemu-nbd --version

truncate -s 4M disk.img ro.img good.img
start_nbdkit_child -P "$PWD/pid" -U "$PWD/sock" --filter="$FILTER" \
                   file disk.img control="$PWD/ctl"
uri="nbd+unix:///?socket=$PWD/sock"
qemu-nbd -r -f raw -t -k "$PWD/ro.sock" --fork --pid-file="$PWD/ro.pid" \
         ro.img
cleanup_fn kill_nbdkit "$(cat ro.pid)"

st=0
timeout -s KILL 60 dirtybitmap backup --control ctl --checkpoint c1 \
    "$uri" "nbd+unix:///?socket=$PWD/ro.sock" 2> err || st=$?
cat err
if [ "$st" -ne 1 ]; then
    echo "$0: backup to a read-only target: exit $st, expected 1" \
         "(137: it hung)"
    exit 1
fi
grep -F "backup incomplete" err
dirtybitmap info --control ctl > info
cat info
if grep -F "name: c1" info; then
    echo "$0: the checkpoint of the failed backup was left behind"
    exit 1
fi
dirtybitmap backup --control ctl --checkpoint c1 "$uri" good.img
cmp disk.img good.img
