#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The disk shrinks while a backup view of it is open.  What lay past
# the new end is gone: the view cannot be the disk at its cut any
# more.  It must say so (reads of what is lost fail, query says the
# view failed), never take nbdkit down: a write near the new end must
# not make nbdkit read past it to keep old data, nor a read of the
# view (nbdkit asserts on a read past the end it knows).
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

dd if=/dev/urandom of=disk.img bs=64K count=16 status=none
start_nbdkit_child -P "$PWD/pid" -U "$PWD/sock" --filter="$FILTER" \
                   file disk.img control="$PWD/ctl" 2> nbdkit.err
python3 "$abs_top_srcdir/tests/control.py" ok "$PWD/ctl" \
        '{"execute": "backup-begin", "arguments": {"name": "view"}}'

# Shrink to the middle of granule 7 (of 64K), then write inside its
# first half through a new connection: the write is within the disk,
# the granule it must keep is not.
truncate -s $((7 * 65536 + 32768)) disk.img
nbdsh -u "nbd+unix:///?socket=$PWD/sock" \
      -c 'assert h.get_size() == 7 * 65536 + 32768' \
      -c 'h.pwrite(b"w" * 512, 7 * 65536 + 4096)'
kill -s 0 $nbdkit_pid || { echo "$0: nbdkit died keeping old data"; exit 1; }
grep -F "dirtybitmap: backup view view: the data of granule 7 (offset 458752) could not be kept: the disk shrank past it: the view is broken" nbdkit.err

# The view: what is still there reads as at the cut, what is past the
# new end fails, and nbdkit stays.
nbdsh -u "nbd+unix:///view?socket=$PWD/sock" -c '
size = h.get_size()
assert size == 16 * 65536, size
disk = open("disk.img", "rb").read()
assert h.pread(65536, 0) == disk[:65536]
try:
    h.pread(65536, 12 * 65536)
    raise SystemExit("a read past the shrunk end of the disk succeeded")
except nbd.Error as e:
    assert e.errno == "EIO", e
'
kill -s 0 $nbdkit_pid || { echo "$0: nbdkit died reading the view"; exit 1; }
grep -F "offset 786432 is past the end of the disk, which shrank under the view" nbdkit.err
python3 "$abs_top_srcdir/tests/control.py" query "$PWD/ctl" > query
cat query
grep -F '"failed": true' query
