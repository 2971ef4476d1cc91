#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Block status answered from the bitmap is right for requests of any
# offset and length, with and without REQ_ONE: extents start at the
# request, are contiguous, clean granules are holes (type 1, never
# zero), dirty ones data (0) or zero (2) where they read as zeroes,
# and boundaries fall on granule boundaries or the end of the disk;
# what is reported as zero reads as zeroes.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

g=4096
size=$((1024 * 1024 + 512))
yes | head -c $size > disk.img
export g size

nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=add \
       granularity=$g --run 'nbdsh -u "$uri" -c "
import random, os
random.seed(1)
g, size = int(os.environ[\"g\"]), int(os.environ[\"size\"])
for i in range(60):
    off = random.randrange(size)
    n = min(random.randrange(1, 3 * g), size - off)
    if i % 3 == 0:
        h.zero(n, off)
    else:
        h.pwrite(b\"w\" * n, off)
h.pwrite(b\"e\", size - 1)
"'

nbdkit -U - -r --filter="$FILTER" file disk.img bitmap=b0 --run '
dirtybitmap map -U disk.img.bitmaps b0 > tool.map || exit 1
nbdsh --base-allocation -u "$uri" -c "
import random, os, nbd
g, size = int(os.environ[\"g\"]), int(os.environ[\"size\"])
dirty = set()
for line in open(\"tool.map\"):
    off, length, typ = [int(x) for x in line.split()[:3]]
    if typ == 0:
        dirty.update(range(off // g, (off + length + g - 1) // g))
assert len(dirty) > 20 and len(dirty) < size // g - 20, len(dirty)

def check(off, count, flags):
    got = []
    def cb(meta, o, entries, err):
        assert meta == \"base:allocation\"
        got.extend(entries)
    h.block_status(count, off, cb, flags)
    assert len(got) >= 2
    if flags & nbd.CMD_FLAG_REQ_ONE:
        assert len(got) == 2, (off, count, got)
    pos = off
    for i in range(0, len(got), 2):
        length, typ = got[i], got[i + 1]
        assert length > 0
        end = min(pos + length, size)
        granules = range(pos // g, (end - 1) // g + 1)
        if typ == 1:
            assert not any(x in dirty for x in granules), (off, count, pos, length)
            # (REQ_ONE replies are cut at the end of the request.)
            assert end in (size, off + count) or end % g == 0, (pos, length)
        else:
            assert typ in (0, 2), typ
            assert all(x in dirty for x in granules), (off, count, pos, length, typ)
            if typ == 2:
                assert h.pread(end - pos, pos) == bytes(end - pos), (pos, length)
        pos += length
    assert pos >= off + count or flags & nbd.CMD_FLAG_REQ_ONE, (off, count, got)

random.seed(2)
checks = 0
for i in range(400):
    off = random.randrange(size)
    count = random.randrange(1, size - off + 1)
    for flags in (0, nbd.CMD_FLAG_REQ_ONE):
        check(off, count, flags)
        checks += 1
for off in (0, size - 1, size - 512, size - g):
    check(off, size - off, 0)
print(\"checked\", checks, \"requests\")
"'
