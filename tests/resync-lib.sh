# SPDX-License-Identifier: BSD-3-Clause
# resync-lib.sh: what test-dirtybitmap-resync*.sh share (sourced after
# functions.sh and sums-lib.sh): disks that each lose the base bitmap
# of their next incremental in one of the ways tracking is lost, the
# disk named after the way:
#
#   outside   two chunks written by another program while the server
#             was stopped (the start finds them);
#   power     a power loss in durability=flush: kill -9, then a start
#             on another boot (a boot id of its own);
#   deleted   the bitmap file deleted while the server was stopped;
#   syncfail  a run in which a sync of the bitmap file failed (an
#             LD_PRELOAD shim), a chunk written after that.
#
# Before that, each had a full backup (checkpoint c1, to D-base.img,
# with its checksums D.c1.sums), and chunks changed through the
# filter: data in chunk 3, zeroes over chunk 5.  changed[D] is the
# number of chunks changed since c1, all told.

requires_boot_id_mount
shim="$abs_top_builddir/tests/.libs/libfailsync.so"
requires test -f "$shim"

size=$((2 * 1024 * 1024))
declare -A changed=([outside]=4 [power]=3 [deleted]=2 [syncfail]=4)


# serve_child D [ARGS...]: serve, but as a child of this shell (for
# kill -9), its standard error in D.err.
serve_child ()
{
    local d=$1
    shift
    rm -f "$d.sock" "$d.ctl"            # (what a stopped server left)
    start_nbdkit_child -P "$PWD/$d.pid" -U "$PWD/$d.sock" \
                       --filter="$FILTER" file "$d.img" \
                       control="$PWD/$d.ctl" "$@" 2> "$d.err"
}

# start_disks D...: the disks served, backed up (all at one cut: one
# command), and changed.
start_disks ()
{
    local d disks=()
    for d in "$@"; do
        head -c $size /dev/urandom > $d.img
        # (The default, durability=coarse, survives a power loss.)
        if [ $d = power ]; then serve_child $d durability=flush
        else serve $d; fi
        disks+=(--disk "control=$PWD/$d.ctl,source=$(uri $d),target=$PWD/$d-base.img,name=$d")
    done
    dirtybitmap backup --checkpoint c1 "${disks[@]}"
    for d in "$@"; do
        cmp $d.img $d-base.img
        test -f $d.c1.sums
    done
    change $(for d in "$@"; do echo $d:3 $d:z5; done)
}

# lose_tracking: each of the four disks loses c1, its way; each is
# served again.
lose_tracking ()
{
    local pid

    stop outside deleted syncfail
    outside outside 7
    outside outside 8
    serve outside 2> outside.err
    cat outside.err
    grep -F "dirtybitmap: $PWD/outside.img was written without the filter since its bitmaps last recorded it" \
         outside.err

    rm deleted.img.bitmaps
    serve deleted

    # The fourth sync is the flush's (two at the start, one at the
    # first write).
    LD_PRELOAD="$shim" FAIL_SYNC_AT=4 serve_child syncfail
    nbdsh -u "$(uri syncfail)" -c "
h.pwrite(b'w' * 4096, 9 * $chunk + 512)
try:
    h.flush()
    raise SystemExit('a sync that failed was not reported')
except nbd.Error as e:
    assert e.errno == 'EIO', e
h.pwrite(b'w' * 4096, 12 * $chunk + 512)"
    stop syncfail
    cat syncfail.err
    grep -F "dirtybitmap: $PWD/syncfail.img.bitmaps: a sync of the bitmaps failed (fdatasync: Input/output error): every enabled bitmap is now inconsistent" \
         syncfail.err
    serve syncfail

    change power:10
    pid=$(cat power.pid)
    kill9 $pid
    rebooted dirtybitmap info power.img.bitmaps > power.info
    cat power.info
    grep -F "state: not closed cleanly (pid $pid, durability=flush, machine restarted since)" \
         power.info
    # (start_nbdkit's nbdkit, on the other boot.)
    nbdkit () { rebooted nbdkit "$@"; }
    serve power durability=flush
    unset -f nbdkit
}
