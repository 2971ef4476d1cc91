#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Each way the base bitmap of an incremental is lost (resync-lib.sh: a
# write made without the filter, a power loss in durability=flush, a
# deleted bitmap file, a sync that failed), and the checksums of the
# previous backup gone too: nothing tells what changed, so the next
# incremental makes a full copy and says so, and the backup equals the
# disk.  With the bitmap file deleted as well there is nothing of c1
# left at all: the incremental is refused (as for a mistyped name),
# saying how to start a new chain, and the target is left as it was.
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/sums-lib.sh"
source "$abs_top_srcdir/tests/resync-lib.sh"

disks="outside power deleted syncfail"
start_disks $disks
lose_tracking
for d in $disks; do rm $d.c1.sums; done

for d in outside power syncfail; do
    if [ $d = power ]; then
        # (As a user sees it: the summary says it too.)
        dirtybitmap backup --incremental c1 --checkpoint c2 \
            --disk "control=$PWD/$d.ctl,source=$(uri $d),target=$PWD/$d-base.img,name=$d" \
            > $d-inc.out 2> $d-inc.err
        cat $d-inc.out $d-inc.err
        grep -F "full copy: copied $((size - chunk)) bytes, zeroed $chunk bytes, " \
             $d-inc.out
    else
        backup $d $d-inc.json "$PWD/$d-base.img" --incremental c1 \
               --checkpoint c2
        report $d-inc.json mode=full written=$size \
               checksums="$PWD/$d.c2.sums"
        mv $d-inc.json.err $d-inc.err
    fi
    grep -F "dirtybitmap: backup: disk $d: bitmap c1 is inconsistent and there are no usable checksums of the previous backup ($PWD/$d.c1.sums: No such file or directory): a full copy" \
         $d-inc.err
    cmp $d.img $d-base.img
done
python3 "$sums_py" check \
        $(for d in outside power syncfail; do
              echo $d.c2.sums $d-base.img c2 "$(uri $d)"; done)

fails -k deleted-base.img "dirtybitmap: backup: bitmap c1 is on no disk, and no disk has the checksums of a backup at c1: an incremental backup needs one or the other (a full backup, without --incremental, starts a new chain)" \
      dirtybitmap backup --incremental c1 --checkpoint c2 \
      --disk "control=$PWD/deleted.ctl,source=$(uri deleted),target=$PWD/deleted-base.img,name=deleted"
test ! -e deleted.c2.sums
dirtybitmap info --control deleted.ctl > info
cat info
if grep -F "name: c2" info; then
    echo "$0: the refused backup left its checkpoint"; exit 1
fi

# (All at once: a clean stop takes a while.)
stop $disks
