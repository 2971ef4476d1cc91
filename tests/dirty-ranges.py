#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# dirty-ranges.py: the oracle of the tracking tests.
#
#   dirty-ranges.py expect SIZE GRANULARITY < requests
#       requests: lines "OFFSET COUNT" (any pwrite, zero or trim);
#       prints the dirty byte ranges "START END" they must produce.
#   dirty-ranges.py map < nbdinfo --map output (or dirtybitmap map)
#       prints the dirty byte ranges "START END" of a map: types 0
#       (data) and 2 (zero) are dirty, 1 (hole) is clean; any other
#       type is an error.
#   dirty-ranges.py qemu < nbdinfo --map=qemu:dirty-bitmap:NAME
#       the same for qemu's dirty bitmap context (1 dirty, 0 clean).
import sys

def runs(pairs):
    out = []
    for s, e in sorted(pairs):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out

def expect(size, g):
    pairs = []
    for line in sys.stdin:
        if not line.strip():
            continue
        off, count = map(int, line.split())
        if count == 0 or off >= size:
            continue
        first = off // g
        last = (min(off + count, size) - 1) // g
        pairs.append((first * g, min((last + 1) * g, size)))
    return runs(pairs)

def from_map(dirty_types, clean_types):
    pairs = []
    pos = 0
    for line in sys.stdin:
        f = line.split()
        if not f:
            continue
        off, length, typ = int(f[0]), int(f[1]), int(f[2])
        if off != pos:
            sys.exit("map is not contiguous at %d (expected %d)" % (off, pos))
        pos = off + length
        if typ in dirty_types:
            pairs.append((off, off + length))
        elif typ not in clean_types:
            sys.exit("unexpected extent type %d at %d" % (typ, off))
    return runs(pairs)

mode = sys.argv[1]
if mode == "expect":
    r = expect(int(sys.argv[2]), int(sys.argv[3]))
elif mode == "map":
    r = from_map((0, 2), (1,))
elif mode == "qemu":
    r = from_map((1,), (0,))
else:
    sys.exit("usage: dirty-ranges.py expect SIZE G | map | qemu")
for s, e in r:
    print(s, e)
