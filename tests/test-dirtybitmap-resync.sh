#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Each way the base bitmap of an incremental is lost (resync-lib.sh: a
# write made without the filter, a power loss in durability=flush, a
# deleted bitmap file, a sync that failed), with the checksums of the
# previous backup at hand: the next incremental says it resyncs, reads
# the whole disk, writes only the chunks that changed (as its report
# says and, into a qcow2 overlay, as the clusters that the overlay
# holds say), the backup equals the disk, and its checkpoint is exact:
# the incremental after it copies only the chunk written since.
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/sums-lib.sh"
source "$abs_top_srcdir/tests/resync-lib.sh"

disks="outside power deleted syncfail"
start_disks $disks
lose_tracking

# The resyncs: into a qcow2 overlay, but syncfail into its raw file, in
# place, whose old checksums are then gone.  (The overlays are checked
# after all the backups: qemu-nbd takes a second to exit once its
# client has gone, so they are left to exit together.)
overlays="outside power deleted"
checks=()
for d in $disks; do
    n=${changed[$d]}
    if [ $d = syncfail ]; then
        target="$PWD/$d-base.img"
    else
        overlay $d-inc.qcow2 $d-base.img raw
    fi
    state=inconsistent
    if [ $d = deleted ]; then
        # (As a user sees it: the summary says it too.  The chunk of
        # zeroes is written as data: an NBD target is zeroed only in
        # whole blocks of 2M.)
        dirtybitmap backup --incremental c1 --checkpoint c2 \
            --disk "control=$PWD/$d.ctl,source=$(uri $d),target=$target,name=$d" \
            > $d-inc.out 2> $d-inc.err
        cat $d-inc.out $d-inc.err
        grep -F "resync: read $size bytes, $((size - n * chunk)) of them unchanged; copied $((n * chunk)) bytes, zeroed 0 bytes, " \
             $d-inc.out
        state=missing
    else
        backup $d $d-inc.json "$target" --incremental c1 --checkpoint c2
        report $d-inc.json mode=resync written=$((n * chunk)) \
               bytes-read=$size bytes-unchanged=$((size - n * chunk)) \
               checksums="$PWD/$d.c2.sums"
        mv $d-inc.json.err $d-inc.err
    fi
    # A file that the set records is trusted; an overlay behind NBD
    # holds what it holds: the copy reads it to compare.
    case $target in
    nbd*) from="what $target holds written, as nothing shows that it holds the image of $PWD/$d.c1.sums" ;;
    *) from="$PWD/$d.c1.sums written" ;;
    esac
    grep -F "dirtybitmap: backup: disk $d: bitmap c1 is $state: a resync (the whole disk read, only what differs from $from)" \
         $d-inc.err
done
test ! -e syncfail.c1.sums
cmp syncfail.img syncfail-base.img
# (Checked now: the next backup in place removes them.)
python3 "$sums_py" check syncfail.c2.sums syncfail-base.img c2 "$(uri syncfail)"
for d in $overlays; do overlay_done $d-inc.qcow2; done
for d in $overlays; do
    test "$(top_bytes $d-inc.qcow2)" = $((${changed[$d]} * chunk))
    restored $d-inc.qcow2 $d-restored.img
    cmp $d.img $d-restored.img
    checks+=($d.c2.sums $d-restored.img c2 "$(uri $d)")
done

# The checkpoint of a resync is exact: the next incremental copies the
# one chunk written since (into an overlay on the last, and in place).
change power:20:n syncfail:20:n
overlay power-inc2.qcow2 power-inc.qcow2 qcow2
for d in power syncfail; do
    [ $d = power ] || target="$PWD/$d-base.img"
    backup $d $d-inc2.json "$target" --incremental c2 --checkpoint c3
    report $d-inc2.json mode=incremental written=$chunk \
           checksums="$PWD/$d.c3.sums"
done
cmp syncfail.img syncfail-base.img
overlay_done power-inc2.qcow2
test "$(top_bytes power-inc2.qcow2)" = $chunk
restored power-inc2.qcow2 power-restored2.img
cmp power.img power-restored2.img
checks+=(syncfail.c3.sums syncfail-base.img c3 "$(uri syncfail)"
         power.c3.sums power-restored2.img c3 "$(uri power)")
# Every set of checksums written is that of the image it went with.
python3 "$sums_py" check "${checks[@]}"

# (All at once: a clean stop takes a while.)
stop $disks
