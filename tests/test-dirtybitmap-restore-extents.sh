#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# restore-from=: block status while the disk is restored.  What the
# layer below says of a granule not restored describes the disk's old
# data: such a granule is data, whatever the (sparse) disk file holds;
# a restored granule is as the layer below says.  With bitmap=, a
# clean granule is a hole (unchanged since the point) restored or
# not, and a dirty one is zero only once restored.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
source "$abs_top_srcdir/tests/restore-lib.sh"

head -c 1M /dev/urandom > image
truncate -s 1M disk.img
# A bitmap that records before the restore: dirty all over once it
# begins.
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=add --run true
serve_source image
uri="nbd+unix:///?socket=$PWD/sock"
start_nbdkit_paused restore-fill-start -P "$PWD/pid" -U "$PWD/sock" \
                    --filter="$FILTER" file disk.img restore-from="$src" \
                    restore-checkpoint=pt control="$PWD/ctl"
reached restore-fill-start

# Nothing restored: all data, though the disk file is a hole.
nbdinfo --map "$uri" > map
expect map <<'EOF2'
         0     1048576    0  data
EOF2

# Granule 0 written with zeroes (whole: restored), granule 3 in part.
nbdsh -u "$uri" -c 'h.zero(65536, 0)' -c 'h.pwrite(b"x" * 100, 200000)'
nbdinfo --map "$uri" > map
expect map <<'EOF2'
         0       65536    3  hole,zero
     65536      983040    0  data
EOF2

# The checkpoint, for a client that selects it.
python3 "$abs_top_srcdir/tests/control.py" ok ctl \
        '{"execute": "select", "arguments": {"bitmap": "pt"}}'
nbdinfo --map "$uri" > map
expect map <<'EOF2'
         0       65536    2  zero
     65536      131072    1  hole
    196608       65536    0  data
    262144      786432    1  hole
EOF2

# The bitmap from before: dirty all over, zero only where restored.
python3 "$abs_top_srcdir/tests/control.py" ok ctl \
        '{"execute": "select", "arguments": {"bitmap": "b0"}}'
nbdinfo --map "$uri" > map
expect map <<'EOF2'
         0       65536    2  zero
     65536      983040    0  data
EOF2

release restore-fill-start
python3 "$restore_py" wait ctl
