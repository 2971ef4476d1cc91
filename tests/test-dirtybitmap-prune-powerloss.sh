#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A prune and a power loss at each step of its removals (repo-fold.c),
# one in the middle of a chain and one of a chain's first point: the
# repository lives on an ext4 file system on a loop device, and the
# power loss is a copy of the loop device's backing file (what the
# file system had written to its device by then) taken while gdb
# holds the prune at the step.  On that copy, every point that list
# shows restores exactly; the next prune finishes the removal begun
# (or begins it again), and the result is sound: the points kept,
# each restoring exactly, their chains and qemu-img check clean,
# nothing left over.  (Inside a qemu-img run the order of its writes
# is qemu's: a step is the moment between two of ours.)
source ./functions.sh
set -e
set -x
requires gdb --version
requires_loop_ext4 lo.img
source "$abs_top_srcdir/tests/repo-lib.sh"
source "$abs_top_srcdir/tests/prune-lib.sh"

tool=$(command -v dirtybitmap)
repo="$PWD/mnt/R"

format_loop_ext4 lo.img
loop=
power_on lo.img

start_disk a 8M
start_disk b 8M
for n in 1 2 3 4; do
    write_some $n a b
    rbackup c$n a b
    snapshot a c$n
    snapshot b c$n
done
# --keep-daily 2 removes c3 (folded into c4) and c1 (c2 takes its
# file).
retime c1=2026-03-01T08:00:00Z c2=2026-03-01T20:00:00Z \
       c3=2026-03-02T08:00:00Z c4=2026-03-02T20:00:00Z
sync
power_off
cp --sparse=always lo.img before.img


# cut NAME FINISHED STEP POINT [DISK]: a prune --keep-daily 2 of the
# repository as it was before, its power lost when the removal of
# POINT reaches STEP (for DISK); then the checks, and the next prune,
# which says it finished the removal of FINISHED ("-": none).
cut ()
{
    local name=$1 finished=$2 cond
    cond="\$_streq((char *) \$rdi, \"$3\") && \$_streq((char *) \$rsi, \"$4\")"
    [ -z "$5" ] || cond="$cond && \$_streq((char *) \$rdx, \"$5\")"
    cp --sparse=always before.img on.img
    power_on on.img
    gdb -q -batch -ex "break *repo_fold_step if $cond" -ex run \
        -ex "shell cp --sparse=always on.img snap.img" -ex kill \
        --args "$tool" prune --keep-daily 2 "$repo" > "gdb-$name.log" 2>&1 || :
    cat "gdb-$name.log"
    grep -Eq "Breakpoint 1, .*repo_fold_step" "gdb-$name.log"
    power_off
    power_on snap.img
    ls -lR mnt
    intact $(point_names)
    dirtybitmap prune --keep-daily 2 "$repo" > again.out 2> again.err
    cat again.out again.err
    if [ "$finished" = - ]; then
        test ! -s again.err
    else
        grep -Fx "dirtybitmap: prune: $repo: finished the removal of point $finished, begun by a prune that did not complete" again.err
    fi
    points_are "c2 c4"
    sound a b
    intact c2 c4
    power_off
}

cut intent - intent c3
cut record c3 record c3
cut fold c3 fold c3 a
cut rebased c3 rebased c3 a
cut fold-b c3 fold c3 b
cut successor c3 successor c3
cut discard c3 discard c3
cut done c3 done c3
cut intent1 - intent c1
cut commit c1 commit c1 a
cut rename c1 rename c1 a
cut renamed c1 renamed c1 a
cut oldest-b c1 commit c1 b
cut successor1 c1 successor c1
cut done1 c1 done c1
