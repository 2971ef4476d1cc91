#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What dirtybitmap prune refuses, each with a message naming the
# thing and the problem, changing nothing: a DIR that is missing or
# not a repository (it is not made one), counts that are not counts,
# a repository in use (a prune or a backup while a prune runs, held
# by gdb inside a removal; a prune while a reader holds it), and a
# damaged intent record (prune and backup both refuse to go on).
source ./functions.sh
set -e
set -x
requires gdb --version
requires flock --version
source "$abs_top_srcdir/tests/repo-lib.sh"
source "$abs_top_srcdir/tests/prune-lib.sh"

tool=$(command -v dirtybitmap)
start_disk a 8M
for n in 1 2 3; do
    write_some $n a
    rbackup c$n a
    snapshot a c$n
done

# --- DIR and options ---------------------------------------------------
tool_fails "prune: $PWD/none: No such file or directory" \
    prune --keep-last 1 "$PWD/none"
mkdir empty
tool_fails "prune: $PWD/empty is not a dirtybitmap repository (it has no repository.json: backup --repo makes one)" \
    prune --keep-last 1 "$PWD/empty"
test -z "$(ls -A empty)"
tool_fails "prune: --keep-daily x: not a count (0 to 1000000)" \
    prune --keep-daily x "$repo"
tool_fails "prune: --keep-last -1: not a count (0 to 1000000)" \
    prune --keep-last -1 "$repo"
tool_fails "prune: --keep-weekly 1000001: not a count (0 to 1000000)" \
    prune --keep-weekly 1000001 "$repo"
tool_fails "dirtybitmap: expecting one DIR" prune --keep-last 1
tool_fails "dirtybitmap: expecting one DIR" prune --keep-last 1 "$repo" "$repo"
tool_fails "dirtybitmap: --output=xml: must be human or json" prune --output=xml "$repo"
points_are "c1 c2 c3"

# --- In use ------------------------------------------------------------
# A prune held by gdb inside the removal of c2 (its first): a second
# prune, a backup and a list are refused; then it goes on and ends.
busy="$repo is in use by another dirtybitmap"
gdb -q -batch \
    -ex 'break *repo_fold_step if $_streq((char *) $rdi, "fold")' -ex run \
    -ex "shell $tool prune --keep-last 1 $repo > p2.out 2> p2.err; echo \$? > p2.rc" \
    -ex "shell $tool backup --repo $repo --control $PWD/a.ctl --checkpoint c4 $(uri a) > b.out 2> b.err; echo \$? > b.rc" \
    -ex "shell $tool list $repo > l.out 2> l.err; echo \$? > l.rc" \
    -ex continue \
    --args "$tool" prune --keep-last 2 "$repo" > gdb.log 2>&1
cat gdb.log p2.err b.err l.err
grep -Eq "Breakpoint 1, .*repo_fold_step" gdb.log
grep -q "exited normally" gdb.log
test "$(cat p2.rc)" = 1
grep -Fx "dirtybitmap: prune: $busy (a backup or a prune): try again once it has ended" p2.err
test "$(cat b.rc)" = 1
grep -F "dirtybitmap: backup: $busy (a backup or a prune): try again once it has ended" b.err
test "$(cat l.rc)" = 1
grep -Fx "dirtybitmap: list: $busy (a prune): try again once it has ended" l.err
points_are "c2 c3"
sound a
restored c2 a x.img
restored c3 a x.img

# A reader holds the repository: a prune is refused, a dry run is not.
flock -F -s R/lock sh -c 'touch held; exec sleep 60' &
holder=$!
for (( i = 0; i < 100; ++i )); do [ -e held ] && break; sleep 0.1; done
tool_fails "prune: $busy (a list, restore, rollback, serve or verify reading it): try again once it has ended" \
    prune --keep-last 1 "$repo"
dirtybitmap prune --dry-run --keep-last 1 "$repo"
kill $holder
wait $holder || :
points_are "c2 c3"

# --- A damaged intent --------------------------------------------------
echo '{"format": 1, "remove": "../x"}' > R/prune.json
tool_fails "prune: $repo/prune.json: damaged: not {\"format\": 1, \"remove\", \"base\", \"into\", \"disks\"}" \
    prune --keep-last 1 "$repo"
tool_fails -k a.img.bitmaps "backup: $repo/prune.json: damaged: not {\"format\": 1, \"remove\", \"base\", \"into\", \"disks\"}" \
    backup --repo "$repo" --control "$PWD/a.ctl" --checkpoint c4 "$(uri a)"
rm R/prune.json
points_are "c2 c3"
restored c2 a x.img
restored c3 a x.img

# --- A repository that is not a chain ----------------------------------
# A record of a point c4 that builds on c2 too (made by hand: backup
# never makes one): removing c2 would fold it into one successor only.
python3 - "$repo" <<'EOF2'
import json, sys
j = json.load(open(sys.argv[1] + "/points/c3.json"))
j["name"], j["base"] = "c4", "c2"
j["time"] = j["time"].replace(j["time"][:4], "2099")
for d in j["disks"]:
    d["image"] = d["image"].replace("c3", "c4")
    d["sums"] = d["sums"].replace("c3", "c4")
json.dump(j, open(sys.argv[1] + "/points/c4.json", "w"))
EOF2
points_are "c2 c3 c4"
tool_fails "prune: removing point c2: point c2 of $repo: points c3 and c4 both build on it: the repository is damaged (each point builds on the one before it); it was left as it was" \
    prune --keep-last 2 "$repo"
rm R/points/c4.json
points_are "c2 c3"
restored c2 a x.img
restored c3 a x.img
