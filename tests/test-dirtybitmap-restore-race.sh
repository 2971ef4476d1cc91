#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# restore-from=: a client's write and read of a granule that the fill
# holds (it has read the source's data and not yet written it into the
# disk) wait for the fill, so that the fill never lands over the
# write: held at the exact point, the write is kept and the read gets
# the source's data.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
source "$abs_top_srcdir/tests/restore-lib.sh"

head -c 1M /dev/urandom > image
yes G | head -c 1M > disk.img
serve_source image
uri="nbd+unix:///?socket=$PWD/sock"
start_nbdkit_paused "restore-fill-read restore-claim-waits" \
                    -P "$PWD/pid" -U "$PWD/sock" --filter="$FILTER" \
                    file disk.img restore-from="$src" control="$PWD/ctl"

# The fill holds granules 0 to 15, the source's data read.
reached restore-fill-read
nbdsh -u "$uri" -c 'h.pwrite(b"w" * 100, 1000)' &
write=$!
nbdsh -u "$uri" -c '
with open("image", "rb") as f:
    assert h.pread(4096, 65536) == f.read(65536 + 4096)[65536:]
' &
read=$!
# One of them waits for the fill's claim; let it go on waiting.
reached restore-claim-waits
release restore-claim-waits
release restore-fill-read
wait $write
wait $read

python3 "$restore_py" wait ctl
kill_nbdkit "$(cat pid)"
python3 - <<'PY'
img = bytearray(open("image", "rb").read())
img[1000:1100] = b"w" * 100
assert open("disk.img", "rb").read() == bytes(img), "the write was lost"
PY
