#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A prune killed with SIGKILL (by gdb) at each step of its removals
# (repo-fold.c): before its intent, with its intent written, before
# its point's record is removed, in each fold (before it, a rebase
# running, its image not yet synced, the next disk), before the
# successor's record, the removed point's files, the intent's
# removal; in the fold of a chain's first point (a commit running,
# before and after the rename, the next disk).  Each time,
# every point that list shows restores exactly; then a second prune
# says that it finished the removal the first began, and the result
# is the one an uninterrupted prune gives: the points kept, each
# restoring exactly, their chains sound, nothing left over.  Once the
# second run is a backup: it finishes the removal too, and says so.
source ./functions.sh
set -e
set -x
requires gdb --version
source "$abs_top_srcdir/tests/repo-lib.sh"
source "$abs_top_srcdir/tests/prune-lib.sh"

tool=$(command -v dirtybitmap)
start_disk a 8M
start_disk b 8M
for n in 1 2 3 4 5 6; do
    write_some $n a b
    rbackup c$n a b
    snapshot a c$n
    snapshot b c$n
done
# Two a day: --keep-daily 3 removes c5 and c3 (folded into c6 and c4),
# then c1 (the first of the chain: c2 takes its file).
retime c1=2026-03-01T08:00:00Z c2=2026-03-01T20:00:00Z \
       c3=2026-03-02T08:00:00Z c4=2026-03-02T20:00:00Z \
       c5=2026-03-03T08:00:00Z c6=2026-03-03T20:00:00Z
cp -a R R.orig

# killed CASE GDB-COMMANDS...: prune --keep-daily 3 of a fresh copy of
# the repository, killed by gdb once the commands have run (the last
# must leave it stopped at a breakpoint).
killed ()
{
    local name=$1 args=() c
    shift
    for c in "$@"; do args+=(-ex "$c"); done
    rm -rf R
    cp -a R.orig R
    gdb -q -batch "${args[@]}" -ex kill \
        --args "$tool" prune --keep-daily 3 "$repo" > "gdb-$name.log" 2>&1 || :
    cat "gdb-$name.log"
    if ! grep -Eq "^(Thread [^ ]* hit )?Breakpoint [0-9]+(\.[0-9]+)?, " "gdb-$name.log"; then
        echo "$0: $name: the prune did not stop where it was to be killed"
        exit 1
    fi
    if grep -q "exited normally" "gdb-$name.log"; then
        echo "$0: $name: the prune ended before it was killed"
        exit 1
    fi
}


# listed: every point list shows restores exactly.
listed ()
{
    intact $(point_names)
}

# again POINT: the second prune finishes the removal of POINT (none:
# "-": there was nothing to finish), and the result is sound.
again ()
{
    dirtybitmap prune --keep-daily 3 "$repo" > again.out 2> again.err
    cat again.out again.err
    if [ "$1" = - ]; then
        test ! -s again.err
    else
        grep -Fx "dirtybitmap: prune: $repo: finished the removal of point $1, begun by a prune that did not complete" again.err
    fi
    points_are "c2 c4 c6"
    sound a b
    intact c2 c4 c6
}

kill_case ()
{
    local name=$1 finished=$2
    shift 2
    killed "$name" "$@"
    ls -lR R
    listed
    again "$finished"
}

# at STEP POINT [DISK]: a gdb breakpoint where the removal of POINT
# reaches STEP (for DISK), named by repo_fold_step (repo-fold.c).
at ()
{
    local cond="\$_streq((char *) \$rdi, \"$1\") && \$_streq((char *) \$rsi, \"$2\")"
    [ -z "$3" ] || cond="$cond && \$_streq((char *) \$rdx, \"$3\")"
    echo "break *repo_fold_step if $cond"
}

# The removal of c5, in the middle of the chain.
kill_case intent - "$(at intent c5)" run
kill_case record c5 "$(at record c5)" run
kill_case fold-a c5 "$(at fold c5 a)" run
# qemu-img rebase running: killed with the prune (qemu.h).
kill_case rebase c5 "$(at rebase c5 a)" run "break qemu_finish" continue
kill_case rebased c5 "$(at rebased c5 a)" run
kill_case fold-b c5 "$(at fold c5 b)" run
kill_case rebased-b c5 "$(at rebased c5 b)" run
kill_case successor c5 "$(at successor c5)" run
kill_case discard c5 "$(at discard c5)" run
kill_case done c5 "$(at done c5)" run
# The next removal not begun: c5 is gone, nothing to finish.
kill_case intent2 - "$(at intent c3)" run
# The removal of c1, the first of its chain.
kill_case oldest c1 "$(at fold c1 a)" run
kill_case commit c1 "$(at commit c1 a)" run "break qemu_finish" continue
kill_case rename c1 "$(at rename c1 a)" run
kill_case renamed c1 "$(at renamed c1 a)" run
kill_case oldest-b c1 "$(at commit c1 b)" run
kill_case renamed-b c1 "$(at renamed c1 b)" run
kill_case successor1 c1 "$(at successor c1)" run

# A backup finishes the removal that a prune began.
killed backup "$(at successor c5)" run
rbackup c7 a b 2> backup.err
cat backup.err
grep -Fx "dirtybitmap: backup: $repo: finished the removal of point c5, begun by a prune that did not complete" backup.err
snapshot a c7
snapshot b c7
points_are "c1 c2 c3 c4 c6 c7"
sound a b
intact c1 c2 c3 c4 c6 c7
