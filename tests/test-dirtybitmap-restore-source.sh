#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# restore-from= while the source goes away and comes back: a read of a
# granule not restored fails with EIO and says why, a read of what is
# restored still works; the fill says it failed and tries again; once
# the source is served again, the reads work and the restore
# completes.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
source "$abs_top_srcdir/tests/restore-lib.sh"

head -c 2M /dev/urandom > image
yes G | head -c 2M > disk.img
serve_source image
uri="nbd+unix:///?socket=$PWD/sock"
mkfifo restore-fill-start.{reached,release}
DIRTYBITMAP_TEST_PAUSE=restore-fill-start DIRTYBITMAP_TEST_PAUSE_DIR="$PWD" \
    nbdkit -f -U "$PWD/sock" --filter="$FILTER" file disk.img \
           restore-from="$src" control="$PWD/ctl" 2> nbdkit.err &
nbdkit_pid=$!
cleanup_fn kill_nbdkit $nbdkit_pid
reached restore-fill-start

# Granule 0 restored (a whole write), then the source goes.
nbdsh -u "$uri" -c 'h.pwrite(b"w" * 65536, 0)'
stop_source
nbdsh -u "$uri" -c '
assert h.pread(65536, 0) == b"w" * 65536
try:
    h.pread(4096, 65536)
    assert False, "a read of a granule not restored, the source gone"
except nbd.Error as e:
    assert e.errno == "EIO", e
'
grep -F "dirtybitmap: restore-from=$src: cannot connect to the source: " \
     nbdkit.err

# The fill fails too, and says it tries again.
release restore-fill-start
wait_for_log nbdkit.err \
    "dirtybitmap: restore-from=$src: the fill failed (Input/output error): it is tried again"

# The source is back: the restore goes on to its end.
serve_source image
nbdsh -u "$uri" -c '
with open("image", "rb") as f:
    assert h.pread(4096, 65536) == f.read(65536 + 4096)[65536:]
'
python3 "$restore_py" wait ctl
kill_nbdkit $nbdkit_pid
python3 - <<'PY'
img = bytearray(open("image", "rb").read())
img[0:65536] = b"w" * 65536
assert open("disk.img", "rb").read() == bytes(img), "disk.img is wrong"
PY
