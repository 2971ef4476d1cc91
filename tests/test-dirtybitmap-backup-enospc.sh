#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A scratch store that fills up (a 300K tmpfs): every guest write still
# succeeds, the view breaks (query says failed; what could not be kept
# reads as an error), a copy of it fails and says so, and the bitmaps
# stay exact.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires unshare -m sh -c 'mkdir -p probe && mount -t tmpfs tmpfs probe'

# The rest runs in a private mount namespace, with a small tmpfs.
if [ -z "$DIRTYBITMAP_TEST_NS" ]; then
    cd "$abs_top_builddir/tests"
    DIRTYBITMAP_TEST_NS=1 exec unshare -m "$0"
fi
mkdir small
mount -t tmpfs -o size=300k tmpfs small
cleanup_fn umount "$PWD/small"

ctl () {
    python3 -c '
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
f = s.makefile("rw"); f.write(json.dumps(json.loads(sys.argv[2])) + "\n")
f.flush()
r = json.loads(f.readline())
if "return" not in r: sys.exit("%s" % r["error"]["desc"])
print(json.dumps(r["return"]))
' ctl "$1"
}

head -c 4M /dev/urandom > disk.img
start_nbdkit_child -P "$PWD/pid" -U "$PWD/sock" --filter="$FILTER" \
                   file disk.img bitmap=b0 action=add granularity=64K \
                   control="$PWD/ctl" 2> nbdkit.err
uri="nbd+unix:///?socket=$PWD/sock"
nbdinfo --size "$uri"
ctl "{\"execute\": \"backup-begin\", \"arguments\": {\"name\": \"v\",
      \"checkpoint\": \"b1\", \"scratch\": \"$PWD/small\"}}"

# 32 granules (2M) overwritten: the store holds at most 300K of them.
nbdsh -u "$uri" -c '
for i in range(32):
    h.pwrite(bytes([i]) * 4096, i * 131072)
'
ctl '{"execute": "query"}' > query.json
python3 -c '
import json
b = json.load(open("query.json"))["backup"]
assert b["failed"], b
assert b["lost-bytes"] > 0 and b["preserved-bytes"] < 2 * 1048576, b
assert b["preserved-bytes"] + b["lost-bytes"] == 32 * 65536, b
'
grep -F "dirtybitmap: backup view v: the data of granule" nbdkit.err
grep -F "the view is broken and the backup has failed (the disk itself is not affected)" nbdkit.err

# The copy of the broken view fails, and says so.
if dirtybitmap copy --full "nbd+unix:///v?socket=$PWD/sock" copy.img \
       2> copy.err; then
    echo "$0: a copy of a broken view succeeded"; exit 1
fi
cat copy.err
grep -F "copy incomplete" copy.err
test ! -e copy.img
ctl '{"execute": "backup-end", "arguments": {"name": "v"}}'

# Every write is on the disk and in both bitmaps.
nbdsh -u "$uri" -c '
for i in range(32):
    assert h.pread(4096, i * 131072) == bytes([i]) * 4096
'
kill_nbdkit $nbdkit_pid
for b in b0 b1; do
    dirtybitmap map --output=json disk.img.bitmaps $b > $b.json
    python3 - $b.json <<'EOF2'
import json, sys
dirty = set()
for e in json.load(open(sys.argv[1])):
    if e["type"] == 0:
        dirty.update(range(e["offset"] // 65536,
                           (e["offset"] + e["length"]) // 65536))
want = {i * 2 for i in range(32)}
assert dirty == want, (sorted(dirty - want), sorted(want - dirty))
EOF2
done
