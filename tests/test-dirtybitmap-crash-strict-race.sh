#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A write that must have its bit on stable storage before it completes
# (with durability=strict, a write to a new granule; in any mode, a
# FUA write) has it there, even when another request runs the group
# commit while a writer is between taking its ticket and setting its
# bits, or between setting them and leaving the bits lock.
#
# gdb (non-stop: only the writer stops) holds a writer there while
# another request goes on.  The bitmap file lives on ext4 on a loop
# device; once the requests have completed, a copy of the loop
# device's backing file is what a power loss would leave, and b0 there
# must have the granule.
#
#   strict: the writer is held as it starts setting its bits (its
#           ticket taken), and a flush comes: that flush's sync must not
#           count the writer's ticket as synced without its bits, or the
#           writer would not wait for them.
#   fua:    (durability=flush, one bitmap: its own view) the writer is
#           held once its bits are set, and a FUA write to the same
#           granule comes: it finds the bit set, and must not complete
#           before a sync that covers it.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires gdb --version
requires python3 -c 'import nbd'
requires_loop_ext4 lo.img

mount_loop_ext4 lo.img mnt
truncate -s 64M disk.img
uri="nbd+unix:///?socket=$PWD/nbd.sock"

# The other request, from a connection made before gdb attaches (a new
# connection needs a new thread, which waits for gdb while it runs
# shell commands): it starts when the file go appears, and writes done
# when it has completed.
cat > other.py <<'EOF'
import nbd, os, sys, time
h = nbd.NBD()
h.connect_uri(sys.argv[1])
open("connected", "w").close()
while not os.path.exists("go"):
    time.sleep(0.05)
if sys.argv[2] == "flush":
    h.flush()
else:
    h.pwrite(b"c" * 512, (1 << 20) + 512, nbd.CMD_FLAG_FUA)
open("done", "w").close()
EOF

# run CASE DURABILITY AFTER-BREAK OTHER-REQUEST
run ()
{
    local case=$1 pid gdb_pid other_pid loop2
    rm -f mnt/disk.bitmaps nbd.sock connected go done
    start_nbdkit -P "$PWD/pid" -U nbd.sock --filter="$FILTER" file disk.img \
                 bitmap-file="$PWD/mnt/disk.bitmaps" bitmap=b0 action=add \
                 granularity=4K durability=$2
    pid=$(cat pid)
    # The first write of the run records the open state: not this one.
    # After the flush, every ticket taken is synced.
    nbdsh -u "$uri" -c 'h.pwrite(b"a" * 4096, 0)' -c 'h.flush()'
    python3 other.py "$uri" $4 &
    other_pid=$!
    wait_until 10 [ -e connected ]

    cat > $case.gdb <<EOF
set pagination off
set confirm off
break bits_set_range
echo ready\\n
python
# Until the writer is at the breakpoint (other threads may report
# stops of their own first), and select it.
def at_breakpoint():
    for t in gdb.selected_inferior().threads():
        if t.is_stopped():
            t.switch()
            if gdb.selected_frame().name() == "bits_set_range":
                return True
    return False
gdb.execute("continue -a")
while not at_breakpoint():
    gdb.execute("continue -a")
end
$3
delete
shell touch go
shell sleep 2
shell test -e done && echo "other request: done while held" || echo "other request: waiting"
continue -a &
shell sleep 1
detach
quit
EOF
    gdb -q -batch -iex 'set non-stop on' -p "$pid" -x $case.gdb \
        > $case.log 2>&1 &
    gdb_pid=$!
    cleanup_fn sh -c "kill $gdb_pid $other_pid 2>/dev/null; :"
    wait_until 30 grep -q '^ready' $case.log
    nbdsh -u "$uri" -c 'h.pwrite(b"b" * 4096, 1 << 20)'
    wait $gdb_pid
    wait $other_pid
    cat $case.log
    grep -F 'hit Breakpoint 1, bits_set_range' $case.log

    # What the device holds now: the write's granule is dirty in b0.
    cp --sparse=always lo.img $case.img
    kill_nbdkit "$pid"
    loop2=$(losetup -f --show $case.img)
    cleanup_fn losetup -d "$loop2"
    mkdir $case
    mount "$loop2" $case
    cleanup_fn umount -l "$PWD/$case"
    dirtybitmap map -U $case/disk.bitmaps b0 | awk '$3 == 0' > $case.map
    cat $case.map
    expect $case.map <<'EOF'
         0        4096    0  data
   1048576        4096    0  data
EOF
}

run strict strict '' flush
run fua flush finish fua
