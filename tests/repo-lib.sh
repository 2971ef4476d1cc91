# SPDX-License-Identifier: BSD-3-Clause
# repo-lib.sh: what the tests of the backup repository (dirtybitmap
# backup --repo, list, restore, rollback, serve, verify, prune) share,
# sourced after functions.sh: machine-lib.sh (its disks) and what they
# all need.  The repository is $PWD/R.
source "$abs_top_srcdir/tests/machine-lib.sh"
requires qemu-img --version
requires qemu-nbd --version
repo="$PWD/R"

# rbackup NEW DISK... [-- ARGS...]: a backup of the disks DISK (served
# by start_disk) into the repository as point NEW, ARGS added; bounded
# (see machine-lib.sh's backup).
rbackup ()
{
    local new=$1 args=() n
    shift
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        args+=(--disk "control=$PWD/$1.ctl,source=$(uri "$1"),name=$1")
        shift
    done
    [ "$1" != -- ] || shift
    backup --repo "$repo" --checkpoint "$new" "${args[@]}" "$@"
}

# point_names: list's points, in order, on one line.
point_names ()
{
    dirtybitmap list --output=json "$repo" |
        python3 -c 'import json, sys; print(" ".join(p["name"] for p in json.load(sys.stdin)["points"]))'
}

# points_are NAMES: list's points, in order.
points_are ()
{
    local got
    got=$(point_names)
    if [ "$got" != "$1" ]; then
        echo "$0: points '$got', expected '$1'"
        exit 1
    fi
}

# stored IMAGE: the bytes qemu-img map says IMAGE itself holds (its
# extents at depth 0 that are present: data, or zeroes recorded).
stored ()
{
    qemu-img map -f qcow2 --output=json "$1" | python3 -c '
import json, sys
print(sum(e["length"] for e in json.load(sys.stdin)
          if e["depth"] == 0 and e["present"]))'
}

# snapshot NAME POINT: copy the disk NAME.img as it is now to
# NAME.POINT (with nothing writing it: what a restore of POINT must
# give back).
snapshot ()
{
    cp "$1.img" "$1.$2"
}

# restored POINT DISK TARGET [FILE]: restore the disk DISK of point
# POINT to TARGET (a new file), which must then equal FILE.POINT
# (FILE: DISK by default) byte for byte.
restored ()
{
    rm -f "$3"
    dirtybitmap restore "$repo@$1" --disk "$2=$3" > restore.out
    cat restore.out
    grep -F "verified: all " restore.out
    cmp "${4:-$2}.$1" "$3"
}

# zero_write URI OFFSET LENGTH: a write-zeroes through the filter.
zero_write ()
{
    nbdsh -u "$1" -c "h.zero($3, $2)"
}

# restore_from POINT NAME SIZE: a new disk NAME (NAME.img, SIZE bytes,
# served by start_disk) restored from point POINT of the repository
# while served (restore-from= the point as serve exports it,
# restore-checkpoint=POINT); returns once the restore is complete and
# the point is no longer served.  Needs restore-lib.sh.
restore_from ()
{
    local point=$1 name=$2 size=$3 spid
    dirtybitmap serve "$repo@$point" --socket "$PWD/$point.sock" \
                > "serve-$point.out" &
    spid=$!
    cleanup_fn kill_nbdkit $spid
    wait_until 10 [ -S "$point.sock" ]
    truncate -s "$size" "$name.img"
    start_disk "$name" "$size" \
               restore-from="nbd+unix:///?socket=$PWD/$point.sock" \
               restore-checkpoint="$point"
    python3 "$restore_py" wait "$name.ctl"
    kill -TERM $spid
    wait $spid
}

# points_of DISK POINT...: for each POINT in turn, writes on the disk
# DISK (write_some), its backup into the repository as point POINT,
# and the disk as it was then kept as DISK.POINT.
points_of ()
{
    local d=$1 p
    shift
    for p in "$@"; do
        write_some "$p" "$d"
        rbackup "$p" "$d"
        snapshot "$d" "$p"
    done
}
