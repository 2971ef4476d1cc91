#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Write errors from the layers below (the error filter under this
# one): the client gets the error, the bits stay set, and nbdkit goes
# on serving; in both durability modes.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires nbdkit --filter=error null --version

yes | head -c 1M > disk.img

for mode in flush strict; do
    rm -f disk.img.bitmaps
    # Every pwrite, zero and trim fails below the filter.
    nbdkit -U - --filter="$FILTER" --filter=error file disk.img \
           error-pwrite-rate=1 error-zero-rate=1 error-trim-rate=1 \
           bitmap=b0 action=add granularity=4K durability=$mode \
           --run 'nbdsh -u "$uri" -c "
for call, args in ((h.pwrite, (b\"x\" * 10, 8190)),
                   (h.zero, (4096, 65536)),
                   (h.trim, (1, 131072 + 5))):
    try:
        call(*args)
        raise SystemExit(\"%s did not fail\" % call.__name__)
    except nbd.Error as e:
        assert e.errno == \"EIO\", e
# Still serving: reads, a flush and the extents answer.
assert h.pread(4, 0) == b\"y\ny\n\"
h.flush()
print(h.get_size())
"' > out
    expect out <<'EOF2'
1048576
EOF2
    dirtybitmap info disk.img.bitmaps > info
    grep -F "consistent: true" info
    dirtybitmap map disk.img.bitmaps b0 > map
    expect map <<'EOF2'
         0        4096    1  hole
      4096        8192    0  data
     12288       53248    1  hole
     65536        4096    0  data
     69632       61440    1  hole
    131072        4096    0  data
    135168      913408    1  hole
EOF2
    # The disk did not change.
    test "$(yes | head -c 1M | md5sum)" = "$(md5sum < disk.img)"
done

# A FUA write failing below: its bits were synced before it went
# down, and stay.
rm -f disk.img.bitmaps
nbdkit -U - --filter="$FILTER" --filter=error file disk.img \
       error-pwrite-rate=1 error-pwrite=ENOSPC \
       bitmap=b0 action=add granularity=4K \
       --run 'nbdsh -u "$uri" -c "
try:
    h.pwrite(b\"x\", 524288, nbd.CMD_FLAG_FUA)
    raise SystemExit(\"the write did not fail\")
except nbd.Error as e:
    assert e.errno == \"ENOSPC\", e
"'
dirtybitmap map disk.img.bitmaps b0 > map
expect map <<'EOF2'
         0      524288    1  hole
    524288        4096    0  data
    528384      520192    1  hole
EOF2
