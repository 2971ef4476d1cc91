#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Under valgrind, a server that does everything live (coarse
# durability, writes, rotations, a backup view copied, released and ended,
# pause and resume, bad input, merge, remove and clear) and then stops
# makes no memory error and loses no memory: what the filter keeps is
# freed by .close and .unload, so once nbdkit has unloaded it nothing
# of it is left (valgrind reports such blocks as definitely lost).
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires valgrind --version

truncate -s 64M disk.img
truncate -s 64M out.img
sock="$PWD/nbd.sock" ctl="$PWD/ctl.sock"
uri="nbd+unix:///v0?socket=$sock"
call () { python3 "$abs_top_srcdir/tests/control.py" ok "$ctl" "$1"; }

valgrind --error-exitcode=9 --leak-check=full \
         --errors-for-leak-kinds=definite --log-file="$PWD/vg.log" \
    nbdkit -f -P "$PWD/pid" -U "$sock" --filter="$FILTER" \
    file disk.img export=v0 bitmap=b0 action=add control="$ctl" \
    durability=coarse &
vg=$!
cleanup_fn kill_nbdkit $vg
listening () { [ -S "$sock" ] && [ -S "$ctl" ]; }
wait_until 30 listening

nbdsh -u "$uri" -c 'for i in range(64): h.pwrite(b"x" * 4096, i * 1048576)'
for n in 1 2 3; do
    call "{\"execute\": \"transaction\", \"arguments\": {\"actions\": [{\"action\": \"add\", \"bitmap\": \"c$n\"}, {\"action\": \"disable\", \"bitmap\": \"b0\"}]}}"
    nbdsh -u "$uri" -c "h.pwrite(b\"$n\" * 4096, $n * 1048576)"
done
call '{"execute": "backup-begin", "arguments": {"name": "v", "bitmap": "c1", "checkpoint": "c9"}}'
nbdsh -u "$uri" -c 'h.pwrite(b"y" * 65536, 0)' \
      -c 'h.pwrite(b"z" * 4096, 2 * 1048576)'
dirtybitmap copy --trim-source "nbd+unix:///v?socket=$sock" out.img
cmp -n 4096 <(printf 2%.0s $(seq 4096)) <(tail -c +$((2 * 1048576 + 1)) out.img)
call '{"execute": "backup-end", "arguments": {"name": "v"}}'
call '{"execute": "pause"}'
python3 "$abs_top_srcdir/tests/control.py" send "$ctl" \
    '{"execute": "resume"}' 'not json' > out
grep -F '"class":"GenericError"' out
call '{"execute": "transaction", "arguments": {"actions": [{"action": "merge", "bitmap": "c9", "source": "c1"}, {"action": "remove", "bitmap": "c2"}, {"action": "clear", "bitmap": "c3"}]}}'

kill -INT $vg
r=0
wait $vg || r=$?
cat vg.log
grep -F 'ERROR SUMMARY: 0 errors' vg.log
test $r = 0
