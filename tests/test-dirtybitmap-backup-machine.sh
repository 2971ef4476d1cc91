#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A backup of several disks is the machine at one instant.  Three
# disks, each served by its own nbdkit through the filter, are written
# nonstop by one process with one clock (machine-oracle.py write):
# chains of writes, each write starting only after the one before it
# in its chain completed on the previous disk.  Meanwhile dirtybitmap
# backup takes the three disks at once, a full backup and then an
# incremental into the same targets.  For each backup, every disk's
# image must be explained by an interval of instants (the writes that
# completed before, none that started after), and the three intervals
# must intersect, within the run of the command and within the cut the
# manifest reports.  (The bound used is the command's run, from just
# before it started to just after it ended, on the writers' clock; the
# manifest's cut, wall clock time and length, is converted to that
# clock and checked as well, with 1 ms of slack.)
#
# The check's self-test: a naive cut, backup-begin on each disk in
# turn without pause, with a chained pair of writes (disk i-1, then
# disk i) completed between two begins, must fail it: each disk on its
# own is a point in time, but not the same one.
#
# Once the writers stop, one more incremental makes every target equal
# its disk.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires python3 -c 'import nbd'
source "$abs_top_srcdir/tests/machine-lib.sh"
disk_verbose=

blocks=4096                                     # 16 MiB
disks="a b c"
# The writer stops before the servers do (hooks run in order).
writer=
stop_writer ()
{
    touch "$PWD/stop"
    [ -z "$writer" ] || wait $writer || :
}
cleanup_fn stop_writer
for n in $disks; do
    start_disk $n $((blocks * 4096))
done
python3 "$moracle" write w.log stop 6 $blocks $(uri a) $(uri b) $(uri c) &
writer=$!
# Every disk written to (the writer running, not merely started)
# before the first backup.
all_written () { [ "$(cut -d' ' -f1 w.log | sort -u | tr -d '\n')" = 012 ]; }
wait_until 30 all_written

# set_args: the three --disk options, into targets NAME.bak.
set_args ()
{
    args=()
    for n in $disks; do args+=(--disk "$(disk $n $n.bak)"); done
}
set_args

# json_is FILE CHECKPOINT BASE: the JSON summary of a complete backup.
json_is ()
{
    python3 - "$@" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
base = None if sys.argv[3] == "-" else sys.argv[3]
assert d["result"] == "complete", d
assert d["checkpoint"] == sys.argv[2], d
assert d["incremental"] == base, d
assert d["frozen-ms"] is None, d
assert isinstance(d["cut-ms"], (int, float)) and 0 <= d["cut-ms"] < 5000, d
assert [x["name"] for x in d["disks"]] == ["a", "b", "c"], d
for x in d["disks"]:
    assert x["result"] == "complete", x
    assert x["full"] is (base is None), x
    assert x["bytes-total"] == 16 * 1024 * 1024, x
    assert x["error"] is None, x
assert d["bytes-total"] == 3 * 16 * 1024 * 1024, d
assert d["bytes-copied"] == sum(x["bytes-copied"] for x in d["disks"]), d
print("cut: %s ms" % d["cut-ms"])
EOF
}

# manifest_is FILE CHECKPOINT BASE
manifest_is ()
{
    python3 - "$@" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
base = None if sys.argv[3] == "-" else sys.argv[3]
assert m["version"] == 1, m
assert m["result"] == "complete", m
assert m["checkpoint"] == sys.argv[2], m
assert m["base"] == base, m
assert m["cut"]["frozen"] is False, m
assert m["cut"]["time"].endswith("Z"), m
assert [x["name"] for x in m["disks"]] == ["a", "b", "c"], m
for x in m["disks"]:
    assert x["size"] == 16 * 1024 * 1024, x
    assert x["target"].endswith(x["name"] + ".bak"), x
EOF
}

# 1. A full backup of the three disks, while they are written.
python3 "$moracle" run t1 timeout --foreground -k 5 60 dirtybitmap backup "${args[@]}" --checkpoint c1 \
        --output=json --manifest m1.json > out1.json
cat out1.json m1.json
json_is out1.json c1 -
manifest_is m1.json c1 -
for n in $disks; do cp $n.bak $n.1; done

# 2. An incremental into the same targets.
python3 "$moracle" run t2 timeout --foreground -k 5 60 dirtybitmap backup "${args[@]}" --incremental c1 \
        --checkpoint c2 --remove-incremental --output=json \
        --manifest m2.json > out2.json
cat out2.json m2.json
json_is out2.json c2 c1
manifest_is m2.json c2 c1
for n in $disks; do cp $n.bak $n.2; done
no_leftovers $disks
bitmaps_are c2 $disks

# 3. The naive cut, still under the writers: begins one after the
# other, no pause; then each view copied in full and ended.
python3 "$moracle" naive tn w.log a.ctl b.ctl c.ctl
for n in $disks; do
    dirtybitmap copy --full "nbd+unix:///naive?socket=$PWD/$n.sock" $n.naive
    python3 "$abs_top_srcdir/tests/control.py" ok $n.ctl \
            '{"execute": "backup-end", "arguments": {"name": "naive"}}'
done

touch stop
wait $writer

python3 "$moracle" check --manifest m1.json t1 w.log a.1 b.1 c.1
python3 "$moracle" check --manifest m2.json t2 w.log a.2 b.2 c.2

# The check rejects the naive cut, and for the right reason: each disk
# alone is a point in time (its interval printed), the set is not.
r=0
python3 "$moracle" check tn w.log a.naive b.naive c.naive > naive.out 2>&1 ||
    r=$?
cat naive.out
if [ $r -eq 0 ]; then
    echo "$0: the check passed a naive, torn cut: it proves nothing"
    exit 1
fi
grep -F "the disks' instants do not intersect" naive.out
test "$(grep -c '^disk [01] (.*): the instants in' naive.out)" -eq 2

# 4. The writers stopped: one more incremental (human summary), and
# every target equals its disk.
backup "${args[@]}" --incremental c2 --checkpoint c3 \
            --remove-incremental > out3
cat out3
for n in $disks; do
    grep -E "^$n: copied [0-9]+ bytes, zeroed [0-9]+ bytes" out3
done
grep -E '^cut: [0-9.]+ ms \(first pause to last resume\)$' out3
for n in $disks; do
    cmp $n.img $n.bak
done
no_leftovers $disks
bitmaps_are c3 $disks
