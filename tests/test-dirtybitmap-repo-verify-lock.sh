#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Two verifies of one point at once: each rewrites the point's record
# under flock on DIR/points, so while the first holds it (stopped by
# gdb as it writes the record) the second waits in flock(2) for it,
# and a list reads the repository meanwhile (verify holds DIR's lock
# shared, as readers do).  Both end well, the record is whole and
# holds the second's result.
source ./functions.sh
set -e
set -x
requires gdb --version
requires test "$(uname -m)" = x86_64    # flock is system call 73
source "$abs_top_srcdir/tests/repo-lib.sh"

tool=$(command -v dirtybitmap)
start_disk a 8M
write_some 1 a
rbackup c1 a

# Run by gdb while the first verify is stopped in repo_point_write:
# the second verify started, and seen waiting in flock; a list.
cat > meanwhile.sh <<EOF2
#!/usr/bin/env bash
"$tool" verify "$repo@c1" > second.out 2>&1 &
echo \$! > second.pid
for (( i = 0; i < 200; ++i )); do
    if [ "\$(cut -d' ' -f1 /proc/\$!/syscall 2>/dev/null)" = 73 ]; then
        echo waiting > second.state
        break
    fi
    sleep 0.05
done
"$tool" list "$repo" > meanwhile.list 2>&1 && echo ok > meanwhile.status
EOF2
chmod +x meanwhile.sh

gdb -q -batch -ex "break repo_point_write" -ex run \
    -ex "shell ./meanwhile.sh" -ex delete -ex continue \
    --args "$tool" verify "$repo@c1" > gdb.log 2>&1 || :
cat gdb.log meanwhile.list
grep -E "Breakpoint 1(\.[0-9]+)?, repo_point_write " gdb.log
grep -F "exited normally" gdb.log
test "$(cat second.state)" = waiting
test "$(cat meanwhile.status)" = ok
grep -E '^c1 .* -$' meanwhile.list           # nothing recorded yet

# The second ends once the first has written the record.
pid=$(cat second.pid)
wait_until 30 gone $pid || :
cat second.out
t=$(sed -n 's/^point c1: verified ok at //p' second.out)
test -n "$t"
dirtybitmap list --output=json "$repo" > l.json
python3 - "$t" <<'EOF2'
import json, sys
p, = json.load(open("l.json"))["points"]
assert p["verified"] == {"time": sys.argv[1], "ok": True}, p
EOF2
ls R/points
test "$(ls R/points)" = c1.json
