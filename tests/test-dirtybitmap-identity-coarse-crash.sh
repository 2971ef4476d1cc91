#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# On a file system whose times are whole seconds (ext4 with 128-byte
# inodes), a write made without the filter after a crash of nbdkit,
# once its liveness lease has run out, is found, even when the lease
# ends within the second that stamps the write: such a time cannot be
# told from one before the lease's end, so the bitmaps are not trusted.
#
# The server is killed 0.3 s into a second, so that its lease (a
# second from its last renewal, at most a quarter of a second before)
# ends early in the next second, and the write comes 1.05 s after the
# kill: past the lease, in the same second.
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

through 0 bitmap=b0 action=add
start_nbdkit_child -P "$PWD/pid" -U "$PWD/sock" --filter="$FILTER" \
                   file disk.img bitmap=b0
nbdsh -u "nbd+unix:///?socket=$PWD/sock" -c 'import time' \
      -c 'h.pwrite(b"w" * 512, 65536)' \
      -c 's = int(time.time())' \
      -c 'while int(time.time()) == s: time.sleep(0.005)' \
      -c 'time.sleep(0.3)'
kill -9 $nbdkit_pid
killed=$(date +%s.%N)
wait $nbdkit_pid || :
python3 -c 'import sys, time
time.sleep(max(0, float(sys.argv[1]) + 1.05 - time.time()))' $killed
outside 100
echo "killed at $killed, written at $(stat -c %Y disk.img)"

# A start (read-only: it judges, and records nothing) must not serve
# b0 without granule 100.
if nbdkit -U - -r --filter="$FILTER" file disk.img bitmap=b0 \
          --run 'nbdinfo --map "$uri"' > map 2> start.err; then
    cat map start.err
    echo "$0: b0 served after a write made without the filter"
    exit 1
fi
cat start.err
# (Where the lease ended before the second of the write, "after" it.)
grep -E "dirtybitmap: (whether )?$PWD/disk.img was written without the filter since its bitmaps last recorded it (cannot be told )?\(it was modified at [-0-9 :]+\.000 UTC, (after|which its file system's times, to 2 s, cannot tell from a time after) " start.err
grep -F "the bitmaps cannot be trusted, and a read-only server cannot mark them" start.err
