#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The disk's size changes while nbdkit is stopped, and no client
# connects after the restart before dirtybitmap backup: the view must
# be the disk at its cut, at the size it has then, not at the size the
# bitmap file last recorded.  A shrunk disk: the copy must not read
# past its end (before the fix nbdkit aborted in backend_pread); a
# grown one: the backup must hold its end (before the fix it silently
# lacked it).  And a disk the bitmap file has never seen the size of.
# Each case: the backup equals the disk (cmp), nbdkit is still up.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires nbdinfo --version

failures=
fail () { echo "$0: FAIL: $*"; failures="$failures
$*"; }

# case NAME SIZE-BEFORE SIZE-AFTER: a client sees the disk at
# SIZE-BEFORE (none if it is 0), nbdkit stops cleanly, the disk is
# resized to SIZE-AFTER (its new end random), nbdkit starts again and
# dirtybitmap backup runs before any client connects.
run_case ()
{
    local name=$1 before=$2 after=$3 d=$PWD/$1 pid
    rm -rf "$d"; mkdir "$d"
    dd if=/dev/urandom of="$d/disk.img" bs=64K \
       count=$(( (before > 0 ? before : after) / 65536 )) status=none
    if [ "$before" -gt 0 ]; then
        nbdkit -U - --filter="$FILTER" file "$d/disk.img" \
               control="$d/ctl" --run 'nbdinfo --size "$uri"' > "$d/size"
        [ "$(cat "$d/size")" = "$before" ] ||
            { fail "$name: the first client saw $(cat "$d/size")"; return; }
    fi
    if [ "$after" -gt "$before" ]; then
        dd if=/dev/urandom of="$d/disk.img" bs=64K seek=$(( before / 65536 )) \
           count=$(( (after - before) / 65536 )) conv=notrunc status=none
    fi
    truncate -s "$after" "$d/disk.img"

    start_nbdkit_child -P "$d/pid" -U "$d/sock" --filter="$FILTER" \
                       file "$d/disk.img" control="$d/ctl" 2> "$d/nbdkit.err"
    pid=$nbdkit_pid
    if ! dirtybitmap backup --control "$d/ctl" --checkpoint c1 \
         "nbd+unix:///?socket=$d/sock" "$d/target.img" > "$d/out" 2>&1; then
        cat "$d/out"
        fail "$name: dirtybitmap backup failed"
    fi
    cat "$d/out"
    if ! kill -s 0 "$pid" 2>/dev/null; then
        cat "$d/nbdkit.err"
        fail "$name: nbdkit has died"
        return
    fi
    if [ -f "$d/target.img" ] && cmp "$d/disk.img" "$d/target.img"; then
        :
    else
        ls -l "$d/disk.img" "$d/target.img" || :
        fail "$name: the backup differs from the disk"
    fi
    # The bitmaps are at the disk's size now, the checkpoint in them.
    dirtybitmap info --control "$d/ctl" > "$d/info" || :
    cat "$d/info"
    grep -F "name: c1" "$d/info" ||
        fail "$name: the checkpoint is not in the bitmaps"
    grep -F "disk size: $after " "$d/info" ||
        fail "$name: the bitmaps are not at the disk's size"
    kill_nbdkit "$pid" || fail "$name: nbdkit did not stop cleanly"
}

run_case shrunk 1048576 917504
run_case grown 1048576 1245184
run_case unsized 0 1048576

if [ -n "$failures" ]; then
    echo "$0: failed:$failures"
    exit 1
fi
