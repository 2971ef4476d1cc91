#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A verify of every point interrupted (SIGINT, sent by gdb as the
# second point begins to be read) records the first point's result
# only, keeps its session and says how to go on; verify --resume then
# skips the first point (its recorded result stands, its time
# unchanged), verifies the others and ends the session.  --resume
# without a session verifies every point, and says so.  A point found
# bad before the interruption is skipped too, and still makes the
# resumed run fail.
source ./functions.sh
set -e
set -x
requires gdb --version
source "$abs_top_srcdir/tests/repo-lib.sh"

tool=$(command -v dirtybitmap)
start_disk a 8M
# Where each point writes, so that c2 reads the first cluster of c1
# through c1's image and c3 holds it itself (whatever the test's path).
for p in "c1 0 2" "c2 5" "c3 0"; do
    set -- $p
    python3 - "$(uri a)" "$@" <<'PY'
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
for c in sys.argv[3:]:
    h.pwrite(sys.argv[2].encode() * 32768, int(c) * 65536)
h.shutdown()
PY
    rbackup $1 a
done

# verified NAME: list's "verified" of point NAME, as JSON.
verified ()
{
    dirtybitmap list --output=json "$repo" |
        python3 -c 'import json, sys
p, = [p for p in json.load(sys.stdin)["points"] if p["name"] == sys.argv[1]]
print(json.dumps(p["verified"]))' "$1"
}

# Interrupted as the second point (c2) begins.
gdb -q -batch -ex "break image_hash" -ex run -ex continue \
    -ex delete -ex "signal SIGINT" \
    --args "$tool" verify "$repo" > gdb.log 2>&1 || :
cat gdb.log
grep -E "Breakpoint 1(\.[0-9]+)?, image_hash \(image=0x[0-9a-f]+ \"[^\"]*/c2\.qcow2\"" gdb.log
grep -F "exited with code 01" gdb.log
grep -Fx "point c1: verified ok at $(verified c1 | python3 -c 'import json, sys; print(json.load(sys.stdin)["time"])')" gdb.log
grep -F "dirtybitmap: verify: interrupted: run it again with --resume to verify the points left" gdb.log
test "$(verified c2)" = null
test "$(verified c3)" = null
test -e R/verify.json
c1=$(verified c1)
python3 -c 'import json, sys; assert json.loads(sys.argv[1])["ok"] is True' "$c1"

# Resumed: c1 skipped, c2 and c3 verified, the session ended.
dirtybitmap verify --resume "$repo" > resume.out
cat resume.out
grep -E "^point c1: skipped: verified ok at .*, since this verify began \(at 20[0-9-]{8}T[0-9:.]{15}Z\)$" resume.out
grep -E "^point c2: verified ok at " resume.out
grep -E "^point c3: verified ok at " resume.out
test "$(verified c1)" = "$c1"
test ! -e R/verify.json

# --resume with no session: every point, said.
dirtybitmap verify --resume "$repo" > all.out 2> all.err
cat all.out all.err
grep -F "dirtybitmap: verify: --resume: $repo has no verify of every point to resume: verifying every point" all.err
grep -E "^point c1: verified ok at " all.out
test "$(verified c1)" != "$c1"

# A point found bad before the interruption: skipped, and it still
# makes the resumed run fail.
read -r h < <(qemu-img map -f qcow2 --output=json R/disks/a/c1.qcow2 |
    python3 -c '
import json, sys
print([e for e in json.load(sys.stdin) if e["depth"] == 0 and e["data"]][0]["offset"])')
printf 'bad' | dd of=R/disks/a/c1.qcow2 bs=1 seek=$((h + 3)) conv=notrunc status=none
gdb -q -batch -ex "break image_hash" -ex run -ex continue \
    -ex delete -ex "signal SIGINT" \
    --args "$tool" verify "$repo" > gdb2.log 2>&1 || :
cat gdb2.log
grep -F "exited with code 01" gdb2.log
grep -E "^dirtybitmap: verify: point c1: BAD, recorded at " gdb2.log
r=0
dirtybitmap verify --resume "$repo" > bad.out 2> bad.err || r=$?
cat bad.out bad.err
test $r = 1
grep -E "^dirtybitmap: verify: point c1: skipped: found BAD at .*, since this verify began" bad.err
grep -E "^dirtybitmap: verify: point c2: BAD, recorded at " bad.err
grep -E "^point c3: verified ok at " bad.out
test ! -e R/verify.json
