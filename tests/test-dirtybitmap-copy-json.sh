#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap copy --output=json prints the summary as one JSON object
# on stdout: after a success (the same counts as the text summary),
# and after a failure, with what is known (how far the copy got, the
# error), while the messages still go to stderr and the exit status
# is 1.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires python3 --version

size=$((4 * 1024 * 1024))
yes | head -c $size > disk.img
cp disk.img backup.img
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=add \
       --run 'nbdsh -u "$uri" -c "
h.pwrite(b\"a\" * 300000, 100000)
h.zero(65536, 1 << 20)
"'
src=(nbdkit -U - -r --filter="$FILTER" file disk.img bitmap=b0 --run)

# Success.
"${src[@]}" 'dirtybitmap copy --output=json "$uri" backup.img' > out
cat out
cmp disk.img backup.img
python3 - out <<'EOF2'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["result"] == "complete", j
assert j["stage"] == "done", j
assert j["source"].startswith("nbd+unix://"), j
assert j["target"] == "backup.img", j
assert j["full"] is False, j
assert j["bytes-total"] == 393216 + 65536, j
assert j["bytes-copied"] == 393216, j
assert j["bytes-zeroed"] == 65536, j
assert j["ranges"] == 2, j
assert isinstance(j["seconds"], float) and j["seconds"] >= 0, j
assert j["error"] is None, j
EOF2

# --output=human is the line of text.
"${src[@]}" 'dirtybitmap copy --output=human "$uri" backup.img' > out
grep -Ex "copied 393216 bytes, zeroed 65536 bytes, 2 ranges, [0-9.]+ seconds" out

# A failure before copying: the error, nothing counted.
truncate -s 2M small.img
r=0
"${src[@]}" 'dirtybitmap copy --output=json "$uri" small.img' \
    > out 2> err || r=$?
cat out err
test $r -eq 1
grep -F "dirtybitmap: copy: target small.img is 2097152 bytes" err
python3 - out <<'EOF2'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["result"] == "failed", j
assert j["stage"] == "setup", j
assert j["bytes-total"] is None and j["ranges"] is None, j
assert j["bytes-copied"] == 0 and j["bytes-zeroed"] == 0, j
assert j["error"].startswith("target small.img is 2097152 bytes but source"), j
EOF2
