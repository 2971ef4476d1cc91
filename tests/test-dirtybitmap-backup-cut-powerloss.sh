#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A power loss at each step of a machine's cut after the resume: the
# begin, inside a pause that synced nothing, replied at its cut, and
# its checkpoint b1 is committed after the resume (the filter's pause
# points hold the control thread before and after that commit).
#   before the commit: the file as the disk holds it is sound and has
#     no b1 (its header never reached the disk), and b0 holds every
#     write, those before the cut and the one after it;
#   after the commit: b1 is there, and holds the write made after the
#     cut and not the one before (durability=strict: exact after a
#     power loss), b0 both.
# The bitmap file lives on ext4 on a loop device; the power loss is a
# copy of the loop device's backing file, taken while the thread is
# held; the reboot is another boot id.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires python3 -c 'import nbd'
requires_boot_id_mount
requires_loop_ext4 lo.img

mount_loop_ext4 lo.img mnt
truncate -s 16M disk.img
mkfifo cut-commit.reached cut-commit.release \
       cut-committed.reached cut-committed.release
export DIRTYBITMAP_TEST_PAUSE="cut-commit cut-committed"
export DIRTYBITMAP_TEST_PAUSE_DIR="$PWD"
start_nbdkit -P "$PWD/pid" -U "$PWD/nbd.sock" --filter="$FILTER" \
             file disk.img bitmap-file="$PWD/mnt/disk.bitmaps" bitmap=b0 \
             action=add durability=strict control="$PWD/ctl.sock"
unset DIRTYBITMAP_TEST_PAUSE DIRTYBITMAP_TEST_PAUSE_DIR

cat > steps.py <<'EOF'
import nbd, shutil, sys
sys.path.insert(0, sys.argv[1])
from controllib import Control, fail
from pause import Points

M = 1 << 20
points = Points(".", ["cut-commit", "cut-committed"])
h = nbd.NBD()
h.connect_unix(sys.argv[2])
c = Control(sys.argv[3])



h.pwrite(b"a" * 4096, 0)
view = {"name": "view", "bitmap": "b0", "checkpoint": "b1"}
c.ok("backup-prepare", view)
c.ok("pause", {"sync": False})
c.ok("backup-begin", view)
c.ok("resume")
# The control thread is on its way to the commit: held before it.
points.wait(["cut-commit"])
h.pwrite(b"b" * 4096, 4 * M)
shutil.copyfile("lo.img", "before.img")
points.release("cut-commit")
points.wait(["cut-committed"])
shutil.copyfile("lo.img", "after.img")
points.release("cut-committed")
names = [b["name"] for b in c.ok("query")["bitmaps"]]
if names != ["b0", "b1"]:
    fail("bitmaps after the commit: %s" % names)
c.ok("backup-end", {"name": "view"})
h.shutdown()
EOF
python3 steps.py "$abs_top_srcdir/tests" "$PWD/nbd.sock" "$PWD/ctl.sock"

# covers MAP OFFSET: the map (dirtybitmap map) says OFFSET is dirty.
covers ()
{
    awk -v o="$2" '$3 == 0 && $1 <= o && o < $1 + $2 { f = 1 }
                   END { exit !f }' "$1"
}

# Each copy of the disk, as the next boot finds it.
for snap in before after; do
    mkdir $snap
    l=$(losetup -f --show $snap.img)
    mount "$l" $snap
    cp $snap/disk.bitmaps $snap.bitmaps
    umount $snap
    losetup -d "$l"
    rebooted dirtybitmap check $snap.bitmaps
    rebooted dirtybitmap info $snap.bitmaps > $snap.info
    cat $snap.info
    grep -E '^ +name: ' $snap.info | awk '{ print $2 }' | xargs > $snap.names
    rebooted dirtybitmap map $snap.bitmaps b0 > $snap.b0
    covers $snap.b0 0
    covers $snap.b0 $((4 << 20))
done
test "$(cat before.names)" = "b0"
test "$(cat after.names)" = "b0 b1"
rebooted dirtybitmap map after.bitmaps b1 > after.b1
covers after.b1 $((4 << 20))
if covers after.b1 0; then
    echo "$0: b1 holds a write made before the cut"
    exit 1
fi
