#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A write made without the filter after a crash of nbdkit (past the
# liveness lease, a second) and before its next start is found; the
# crash alone costs nothing.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
source "$abs_top_srcdir/tests/identity-lib.sh"

crash ()
{
    start_nbdkit_child -P pid -U "$PWD/sock" --filter="$FILTER" \
                       file disk.img "$@"
    nbdsh -u "nbd+unix:///?socket=$PWD/sock" \
          -c 'h.pwrite(b"w" * 512, 65536)'
    kill -9 $nbdkit_pid
    wait $nbdkit_pid || :
    rm -f sock
}

through 0 bitmap=b0 action=add
crash bitmap=b0
trusted b0
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 \
       --run 'nbdinfo --map "$uri"' > map
expect map <<'EOF2'
         0        4096    0  data
      4096       61440    2  zero
     65536        4096    0  data
     69632       61440    2  zero
    131072     8257536    1  hole
EOF2

crash bitmap=b0
sleep 1.2                       # past the lease: the server is dead
outside 100
found b0
