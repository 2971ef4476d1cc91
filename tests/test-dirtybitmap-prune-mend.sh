#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A fold cut short inside its qemu-img rebase may leave the successor's
# image holding a cluster whose data is not what it read through the
# removed point (qemu orders no cluster's data before its table entry;
# a power loss then).  The next prune checks the chunks both images
# hold against the successor's checksums before it folds again, writes
# such a chunk again from the removed point, and says so; the points
# kept then restore exactly.  A chunk that matches neither (the
# successor's own data damaged) stops it, named, nothing written.
# The torn cluster is made with qemu-io while gdb holds the prune just
# before its rebase.
source ./functions.sh
set -e
set -x
requires qemu-io --version
requires gdb --version
source "$abs_top_srcdir/tests/repo-lib.sh"
source "$abs_top_srcdir/tests/prune-lib.sh"

tool=$(command -v dirtybitmap)
start_disk a 8M
start_disk b 8M
for n in 1 2 3 4; do
    write_some $n a b
    # Chunk 0 changes at every point: every image holds it.
    nbdsh -u "$(uri a)" -c "h.pwrite(bytes([$n]) * 4096, 0)"
    rbackup c$n a b
    snapshot a c$n
    snapshot b c$n
done
retime c1=2026-03-01T08:00:00Z c2=2026-03-01T20:00:00Z \
       c3=2026-03-02T08:00:00Z c4=2026-03-02T20:00:00Z
cp -a R R.orig

# stopped STEP BASE: a fresh copy of the repository, its prune
# --keep-daily 2 killed when it reaches STEP of the rebase of c4's
# image of a from c3 onto c2 (the image then builds on BASE).
stopped ()
{
    rm -rf R
    cp -a R.orig R
    gdb -q -batch \
        -ex "break *repo_fold_step if \$_streq((char *) \$rdi, \"$1\") && \$_streq((char *) \$rdx, \"a\")" \
        -ex run -ex kill \
        --args "$tool" prune --keep-daily 2 "$repo" > gdb.log 2>&1 || :
    cat gdb.log
    grep -Eq "Breakpoint 1, .*repo_fold_step" gdb.log
    qemu-img info -f qcow2 R/disks/a/c4.qcow2 | grep -E "^backing file: $2.qcow2( |$)"
}

# garble OFFSET: c4's image of a holds a cluster of other data there.
garble ()
{
    qemu-io -f qcow2 -c "write -P 0xee $1 65536" R/disks/a/c4.qcow2
    rm -f out-a.img
    r=0
    dirtybitmap restore "$repo@c4" --disk a=out-a.img > garbled.out 2>&1 || r=$?
    cat garbled.out
    test $r = 1
    grep -F "differs: offset $1, 65536 bytes" garbled.out
}

# A chunk that c3's image of a holds and c4's does not: the rebase
# copies it into c4's.
offset=$(python3 - <<'EOF2'
import json, subprocess
def held(img):
    m = json.loads(subprocess.check_output(
        ["qemu-img", "map", "-f", "qcow2", "--output=json", img]))
    return {s for e in m if e["depth"] == 0 and e["present"]
            for s in range(e["start"] >> 16, (e["start"] + e["length"]) >> 16)}
only = sorted(held("R.orig/disks/a/c3.qcow2") -
              held("R.orig/disks/a/c4.qcow2") - {0})
print(only[0] << 16)
EOF2
)

# Torn before the rebase renamed the backing file (c4's image still on
# c3's), and after (on c2's already: qemu-img writes the new name
# without a flush before it).
for at in rebase:c3 rebased:c2; do
    stopped ${at%:*} ${at#*:}
    garble $offset
    dirtybitmap prune --keep-daily 2 "$repo" > again.out 2> again.err
    cat again.out again.err
    grep -Fx "dirtybitmap: prune: $repo: finished the removal of point c3, begun by a prune that did not complete (1 chunk that a power loss had left torn written again)" again.err
    points_are "c2 c4"
    sound a b
    intact c2 c4
done

# Chunk 0, which c4's image holds itself: its data damaged is not what
# a fold can leave, and is not written over.
stopped rebase c3
garble 0
cp R/disks/a/c4.qcow2 c4-damaged.qcow2
tool_fails "prune: $repo: the removal of point c3, begun by a prune that did not complete, could not be finished: $repo/disks/a/c4.qcow2: the chunk at offset 0 matches neither its checksum nor what the point before held: the repository is damaged" \
    prune --keep-daily 2 "$repo"
cmp c4-damaged.qcow2 R/disks/a/c4.qcow2
