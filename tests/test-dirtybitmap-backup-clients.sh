#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A backup view is an export that unmodified NBD clients read: nbdinfo
# lists it and maps it (changed = data, unchanged = hole), nbdcopy and
# qemu-img convert copy the frozen disk of a full view, trims release
# what they cover (the scratch store shrinks), writes are refused, and
# backup-end takes it away.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires nbdcopy --version
requires qemu-img --version

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
backup () { ctl '{"execute": "query"}' | python3 -c "
import json, sys
print(json.load(sys.stdin)['backup']$1)"; }

head -c 8M /dev/urandom > disk.img
cp disk.img before.img
start_nbdkit -P "$PWD/pid" -U "$PWD/sock" --filter="$FILTER" \
             file disk.img bitmap=b0 action=add granularity=64K \
             control="$PWD/ctl"
uri="nbd+unix:///?socket=$PWD/sock"
view="nbd+unix:///snap?socket=$PWD/sock"
nbdsh -u "$uri" -c 'h.pwrite(b"1" * 65536, 1048576)'
before=$(md5sum < disk.img)

# A full view, overwritten in three places after the cut.
ctl '{"execute": "backup-begin", "arguments": {"name": "snap"}}'
nbdsh -u "$uri" -c 'h.pwrite(b"2" * 131072, 0)' \
      -c 'h.zero(65536, 4194304)' -c 'h.trim(65536, 7340032)'
test "$(backup "['preserved-bytes']")" = $((4 * 65536))
nbdinfo --list --json "$uri" > list.json
python3 -c '
import json
names = [e["export-name"] for e in json.load(open("list.json"))["exports"]]
assert names == ["", "snap"], names'
nbdinfo --map "$view" > map
expect map <<'EOF2'
         0     8388608    0  data
EOF2
nbdcopy "$view" nbdcopy.img
test "$(md5sum < nbdcopy.img)" = "$before"
qemu-img convert -f raw -O raw "$view" qemu.img
test "$(md5sum < qemu.img)" = "$before"
if nbdsh -u "$view" -c 'h.pwrite(b"x", 0)' 2> err; then
    echo "$0: a write to the view was accepted"; exit 1
fi
grep -F "Operation not permitted" err
test "$(md5sum < disk.img)" != "$before"
scratch=$(backup "['scratch-bytes']")
test "$scratch" -ge $((4 * 65536))
# Trims release: the store gives its space back.
nbdsh -u "$view" -c 'h.trim(8388608, 0)'
test "$(backup "['scratch-bytes']")" = 0
if nbdsh -u "$view" -c 'h.pread(4096, 0)' 2> err; then
    echo "$0: a released range was read"; exit 1
fi
grep -F "Input/output error" err
ctl '{"execute": "backup-end", "arguments": {"name": "snap"}}'
test "$(backup "")" = None
if nbdinfo --size "$view"; then
    echo "$0: the view outlived backup-end"; exit 1
fi

# An incremental view: its map is the frozen bitmap, and it holds only
# what changed.
ctl '{"execute": "backup-begin",
      "arguments": {"name": "snap", "bitmap": "b0", "checkpoint": "b1"}}'
nbdsh -u "$uri" -c 'h.pwrite(b"3" * 4096, 8192)'
# Writes to what did not change keep nothing: only granule 0 (changed,
# then overwritten) is in the store.
nbdsh -u "$uri" -c 'h.pwrite(b"4" * 131072, 2097152 - 4096)' \
      -c 'h.pwrite(b"5" * 4096, 8388608 - 4096)'
test "$(backup "['preserved-bytes']")" = 65536
nbdinfo --map "$view" > map
expect map <<'EOF2'
         0      131072    0  data
    131072      917504    1  hole
   1048576       65536    0  data
   1114112     3080192    1  hole
   4194304       65536    0  data
   4259840     3080192    1  hole
   7340032       65536    0  data
   7405568      983040    1  hole
EOF2
nbdsh -u "$view" -c '
assert h.pread(4096, 8192) == b"2" * 4096
assert h.pread(65536, 1048576) == b"1" * 65536
try:
    h.pread(4096, 2097152)
    assert False, "an unchanged range was read"
except nbd.Error:
    pass
'
ctl '{"execute": "backup-end", "arguments": {"name": "snap"}}'
