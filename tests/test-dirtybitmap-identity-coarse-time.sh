#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# On a file system whose times are whole seconds (ext4 with 128-byte
# inodes, as ext3 or vfat), a write made without the filter in the
# same second as the last one that a record saw keeps the disk's size
# and modification time.  Every record waits for the clock to leave
# that second first, so such a write is found:
#
#   stop:  the server writes early in a second and stops cleanly, and
#          another program writes at once;
#   start: another program writes early in a second, a start that adds
#          a bitmap judges the disk, and another program writes again
#          at once.
#
# Each write is made early in a second (the clock is watched), so that
# without the wait both writes would share it.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires python3 -c 'import nbd'
requires_loop_ext4 lo.img

mount_loop_ext4 lo.img mnt -I 128
cd mnt
source "$abs_top_srcdir/tests/identity-lib.sh"
touch -d '1 minute ago' disk.img        # no wait at the first start

# early: wait until the clock is early in a new second (50 ms in: the
# kernel stamps a write with a clock that may lag a few milliseconds).
early ()
{
    wait_until -i 0.005 2 not_second "$(date +%s)"
    sleep 0.05
}
not_second () { [ "$(date +%s)" != "$1" ]; }

# holds_or_found BITMAP G: the rule after a write of granule G made
# without the filter: a start (read-only: it judges, and records
# nothing) either finds the bitmaps untrustworthy, or serves BITMAP
# with granule G dirty.
holds_or_found ()
{
    if nbdkit -U - -r --filter="$FILTER" file disk.img bitmap="$1" \
              --run 'nbdinfo --map "$uri"' > map 2> start.err; then
        cat map start.err
        if ! awk -v g=$(( $2 * 65536 )) \
             '$1 <= g && g < $1 + $2 && $3 == 0 { ok = 1 }
              END { exit !ok }' map; then
            echo "$0: bitmap $1 is trusted, and granule $2 is clean in it"
            exit 1
        fi
    else
        cat start.err
        grep -F "dirtybitmap: $PWD/disk.img was written without the filter" \
             start.err
        grep -F "the bitmaps cannot be trusted" start.err
    fi
}

through 0 bitmap=b0 action=add
stat -c %y disk.img
if ! stat -c %y disk.img | grep -F '.000000000 '; then
    echo "$0: ext4 -I 128 keeps nanoseconds here: the test means nothing"
    exit 1
fi

# stop
start_nbdkit_child -P "$PWD/pid" -U "$PWD/sock" --filter="$FILTER" \
                   file disk.img bitmap=b0
nbdsh -u "nbd+unix:///?socket=$PWD/sock" -c 'import time' \
      -c 's = int(time.time())' \
      -c 'while int(time.time()) == s: time.sleep(0.005)' \
      -c 'time.sleep(0.05)' \
      -c 'h.pwrite(b"w" * 512, 65536)'
last=$(stat -c %Y disk.img)
kill_nbdkit $nbdkit_pid
outside 2
echo "the server's last write: $last, the other program's: $(stat -c %Y disk.img)"
holds_or_found b0 2

# start
rm disk.img.bitmaps
through 0 bitmap=b0 action=add
early
outside 3
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b1 action=add --run true \
       2> start.err || :
outside 4
cat start.err
grep -F "was written without the filter" start.err
holds_or_found b1 4
