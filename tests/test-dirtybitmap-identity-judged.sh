#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What a start, or the tool, records of the disk is what it judged: a
# write made without the filter after the judging stat, before the
# commit that records the disk, is found by the next start, never
# taken into the record.  gdb holds the process as bmf_check_disk
# returns (the disk judged, nothing recorded yet) while another
# program writes the disk.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires gdb --version
source "$abs_top_srcdir/tests/identity-lib.sh"

# held G CMD...: CMD under gdb, held once it has judged the disk while
# granule G is written without the filter.
held ()
{
    local g=$1; shift
    cat > held.gdb <<EOF
set pagination off
set confirm off
set breakpoint pending on
break bmf_check_disk
run
finish
shell printf x | dd of=disk.img bs=1 seek=$(( g * 65536 )) conv=notrunc status=none
delete
continue
EOF
    gdb -q -batch -x held.gdb --args "$@" > held.log 2>&1
    cat held.log
    grep -F "Value returned is" held.log
    grep -F "exited normally" held.log
}

# A start (which serves, and stops cleanly without a write).
through 0 bitmap=b0 action=add
held 5 nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 --run true
found b0

# The tool, adding a bitmap beside one that records.
rm disk.img.bitmaps
through 0 bitmap=b0 action=add
held 6 dirtybitmap bitmap --add disk.img.bitmaps b1
found b1

# Until the process changes the disk: a disk that grows while served
# is followed (its new area dirty), and the clean stop records it as it
# is then, not as the start judged it.
rm disk.img.bitmaps
through 0 bitmap=b0 action=add
start_nbdkit_child -P "$PWD/pid" -U "$PWD/sock" --filter="$FILTER" \
                   file disk.img bitmap=b0
nbdinfo --size "nbd+unix:///?socket=$PWD/sock"
truncate -s 9M disk.img
nbdinfo --size "nbd+unix:///?socket=$PWD/sock"
kill_nbdkit $nbdkit_pid
trusted b0
map_of --filter="$FILTER" file disk.img bitmap=b0 > map
expect map <<'EOF2'
         0        4096    0  data
      4096       61440    2  zero
     65536     8323072    1  hole
   8388608     1048576    2  zero
EOF2
