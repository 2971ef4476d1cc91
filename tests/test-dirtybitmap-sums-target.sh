#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A set of checksums describes one image: a resync trusts it only
# where the target provably holds that image, and a run that writes a
# target first makes every set describing it unusable.  Each case
# below once left a backup that exited 0 and was not the disk:
#   1. a resync into a target that is not the previous backup (a new
#      file, or another file);
#   2. a resync after a run of the same command killed once it had
#      written part of the target (a chunk that was zero at the base,
#      copied by the killed run, then trimmed back to zero);
#   3. a set left by a run killed before backup-end (the server drops
#      its checkpoint), and an older set of a checkpoint name reused;
#   4. an incremental whose base is inconsistent finds the set at its
#      base under another name, as one whose base is missing does.
# Each backup that exits 0 is compared with the disk, byte for byte,
# and verified against the set it wrote.
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/sums-lib.sh"
requires gdb --version

size=$((16 * chunk))
tool=$(command -v dirtybitmap)

# plain D TARGET ARGS...: dirtybitmap backup of D without name=, so its
# checksums are named after TARGET (TARGET.C.sums).
plain ()
{
    local d=$1 target=$2
    shift 2
    dirtybitmap backup --control "$PWD/$d.ctl" "$@" "$(uri "$d")" "$target"
}

# killed_at FUNCTION D TARGET ARGS...: plain, killed (SIGKILL) by gdb
# when the tool reaches FUNCTION.
killed_at ()
{
    local fn=$1 d=$2 target=$3
    shift 3
    gdb -q -batch -ex "break $fn" -ex run -ex kill \
        --args "$tool" backup --control "$PWD/$d.ctl" "$@" "$(uri "$d")" \
        "$target" > "gdb-$fn.log" 2>&1 || :
    cat "gdb-$fn.log"
    grep -q "Breakpoint 1, $fn" "gdb-$fn.log"
}

# remove D BITMAP: remove a bitmap live (its checkpoint is lost).
remove ()
{
    dirtybitmap bitmap --remove --control "$PWD/$1.ctl" "$2"
}

# exact D TARGET SET: TARGET is D's disk now, and verifies against SET.
exact ()
{
    cmp "$1.img" "$2"
    dirtybitmap verify "$2" "$3"
}

# --- 1. a resync into a target that is not the previous backup -------
head -c $size /dev/urandom > one.img
serve one bitmap=b0 action=add
plain one full.img --checkpoint c1
remove one c1
change one:3 one:7
plain one new.img --incremental c1 --checkpoint c2 2> one.err
cat one.err
grep -F "dirtybitmap: backup: disk disk0: bitmap c1 is missing, and the target cannot be read to compare with ./full.img.c1.sums (new.img: No such file or directory): a full copy" one.err
exact one new.img new.img.c2.sums
# Another file of the right size, not a copy of full.img.
remove one c2
change one:9
head -c $size /dev/zero > other.img
plain one other.img --incremental c1 --checkpoint c3 2> one.err || {
    cat one.err; exit 1; }
cat one.err
grep -F "only what differs from what other.img holds written" one.err
exact one other.img other.img.c3.sums

# --- 2. a resync after a killed run of the same command ---------------
head -c $size /dev/urandom > two.img
dd if=/dev/zero of=two.img bs=$chunk seek=5 count=1 conv=notrunc status=none
serve two bitmap=b0 action=add
plain two base.img --checkpoint c1
remove two c1
change two:5                            # zero at c1, written since
cp base.img inc.img
killed_at checksums_write two inc.img --incremental c1 --checkpoint c2
test ! -e inc.img.c2.sums
change two:z5                           # zero again, as at c1
plain two inc.img --incremental c1 --checkpoint c2
exact two inc.img inc.img.c2.sums

# --- 3. sets of a killed run, and of a reused name --------------------
head -c $size /dev/urandom > three.img
serve three bitmap=b0 action=add
plain three old.img --checkpoint c2     # an older c2 of this disk
remove three c2
plain three t.img --checkpoint c1
change three:4:a
killed_at cut_end three t.img --incremental c1 --checkpoint c2
change three:4:b
plain three t.img --incremental c1 --checkpoint c2
cmp three.img t.img
# Neither the killed run's c2 nor the older one is there to lie.
test ! -e t.img.c2.sums
test ! -e old.img.c2.sums
test ! -e t.img.c2.sums.tmp
remove three c2
change three:4:a                        # back to what the killed run saw
if plain three t.img --incremental c2 --checkpoint c3 2> three.err; then
    cat three.err
    echo "a resync from a lost c2 without a set of c2 succeeded"
    exit 1
fi
cat three.err
grep -F "bitmap c2 is on no disk, and no disk has the checksums of a backup at c2" three.err
plain three t.img --checkpoint c3
exact three t.img t.img.c3.sums

# --- 4. an inconsistent base finds the set under another name ---------
head -c $size /dev/urandom > four.img
serve four
plain four full4.img --checkpoint c1
stop four
outside four 6
serve four
overlay inc4.qcow2 full4.img raw
plain four "$target" --incremental c1 --checkpoint c2 2> four.err
cat four.err
grep -F "dirtybitmap: backup: disk disk0: bitmap c1 is inconsistent: a resync" four.err
overlay_done inc4.qcow2
test "$(top_bytes inc4.qcow2)" = $chunk
restored inc4.qcow2 inc4.raw
cmp four.img inc4.raw
dirtybitmap verify inc4.raw inc4.qcow2.sock.c2.sums
