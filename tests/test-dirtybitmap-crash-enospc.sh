#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A full disk under the bitmap file (a 300K tmpfs): a bitmap that does
# not fit, or a disk that grew beyond what fits, is refused with a
# clear error and the bitmaps are as they were; bits set while the
# file system is full cost no space (the data is allocated ahead), so
# writes go on.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires unshare -m sh -c 'mkdir -p probe && mount -t tmpfs tmpfs probe'

# The rest runs in a private mount namespace, with a small tmpfs.
if [ -z "$DIRTYBITMAP_TEST_NS" ]; then
    cd "$abs_top_builddir/tests"
    DIRTYBITMAP_TEST_NS=1 exec unshare -m "$0"
fi
mkdir small
mount -t tmpfs -o size=300k tmpfs small
cleanup_fn umount "$PWD/small"
f="$PWD/small/disk.bitmaps"

# state: what the tool shows of the file (b0 at least).
state ()
{
    local b

    dirtybitmap info "$f" > state.info
    grep -v '^file:' state.info
    grep -F "name: b0" state.info > /dev/null
    for b in $(sed -n 's/ *name: //p' state.info); do
        dirtybitmap map "$f" $b
    done
}

# A 1T disk, b0 at 1M granularity: 128K of bits fit; b1 at 64K (2M)
# does not.
dirtybitmap bitmap --add -g 1M --size 1T "$f" b0
nbdkit -U - --filter="$FILTER" null 1T bitmap-file="$f" \
       --run 'nbdsh -u "$uri" -c "h.pwrite(b\"x\" * 512, 5 << 30)"'
state > before
fails "nbdkit: error: dirtybitmap: action add on bitmap b1 failed: $f: cannot allocate 2097152 bytes: No space left on device" \
      nbdkit -U - --filter="$FILTER" null 1T bitmap-file="$f" \
             bitmap=b1 action=add granularity=64K --run true
state > after
diff -u before after
tool_fails "dirtybitmap: action add on bitmap b1 failed: $f: cannot allocate 2097152 bytes: No space left on device" \
           bitmap --add -g 64K "$f" b1
state > after
diff -u before after

# The disk grows to 64T: b0 would need 8M.  The connection is refused
# with the reason in the log, and nbdkit goes on serving.
if nbdkit -U - --filter="$FILTER" null 64T bitmap-file="$f" \
          --run 'nbdsh -u "$uri" -c "pass"; nbdsh -u "$uri" -c "pass"' \
          2> err; then
    echo "$0: a connection that needs a resize that does not fit was served"
    exit 1
fi
cat err
test "$(grep -cF "error: dirtybitmap: cannot resize the bitmaps to 70368744177664 bytes: $f: cannot allocate 8388608 bytes: No space left on device" err)" -eq 2
state > after
diff -u before after
df small
test "$(stat -c %s "$f")" -lt 204800

# Fill the file system, then dirty many granules: the bitmap's data
# was allocated when it was made, so setting bits needs no space.
start_nbdkit -P "$PWD/pid" -U "$PWD/sock" --filter="$FILTER" null 1T \
             bitmap-file="$f"
nbdsh -u "nbd+unix:///?socket=$PWD/sock" -c 'h.pwrite(b"y", 0)'
if dd if=/dev/zero of=small/filler bs=4k 2> err; then
    echo "$0: the file system did not fill up"
    exit 1
fi
grep -F "No space left on device" err
nbdsh -u "nbd+unix:///?socket=$PWD/sock" -c '
for i in range(1, 1024):
    h.pwrite(b"z", i << 30)
h.flush()
'
kill_nbdkit "$(cat pid)"
dirtybitmap info "$f" > info
grep -F "dirty bytes: 1073741824" info
grep -F "state: closed cleanly" info
