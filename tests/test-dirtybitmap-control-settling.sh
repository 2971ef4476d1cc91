#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A bitmap that stops recording in a live transaction settles.  The
# header that stops it says that it settles, because writes may still
# be setting its bits.  Once none can, its bits are synced and a
# header is written that no longer says so, and only then does the
# reply come.  Here nbdkit is killed between the two (at the first
# system call of the settling commit), so the file holds the
# transaction with b0 settling:
#   - on the same boot, b0 is sound and has every bit (the page cache
#     has them), and the next start settles it;
#   - after a power loss (another boot id), b0 counts as recording
#     did: inconsistent in durability=flush, recovered from its shadow
#     in durability=coarse, exact in durability=strict.  (What the
#     power loss keeps of the file is not simulated: the page cache
#     has every bit.  These are the rules applied to a settling bitmap;
#     test-dirtybitmap-control-powerloss.sh and the crash-strict tests
#     check what reaches the disk.)
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires strace -V
requires python3 -c 'import nbd'
requires test "$(id -u)" -eq 0
requires_boot_id_mount

truncate -s 64M disk.img
bm="$PWD/disk.img.bitmaps"
edit="$abs_top_srcdir/tests/bmfile-edit.py"
echo 00000000-1111-2222-3333-444444444444 > boot_id
# info_on_other_boot OUT: dirtybitmap info of the file, as after a reboot.
info_on_other_boot ()
{
    unshare -m sh -c "mount --bind '$PWD/boot_id' /proc/sys/kernel/random/boot_id &&
                      dirtybitmap info '$bm' > '$1'"
}
# field OUT NAME KEY: the value of KEY (its first word) for bitmap NAME
# in info's output.
field ()
{
    awk -v n="$2" -v k="$3: " '
        { line = $0; sub(/^ +/, "", line) }
        $1 == "name:" { on = ($2 == n) }
        on && index(line, k) == 1 {
            split(substr(line, length(k) + 1), w, " "); print w[1]; exit
        }' "$1"
}

# traced PID: every thread of PID has a tracer.
traced ()
{
    test -z "$(grep -l '^TracerPid:[[:space:]]*0$' /proc/$1/task/*/status)"
}

# kill_in_settle MODE: b0 records two granules; then a checkpoint (add
# b1, disable b0) whose settling commit is cut by SIGKILL when it syncs
# b0's bits: the third msync once strace is attached after the writes
# (the first two are the last of the regions before the cut and the
# header: test-dirtybitmap-control-durable.sh).
kill_in_settle ()
{
    local pid st
    rm -f "$bm" nbd.sock ctl.sock pid
    start_nbdkit -P "$PWD/pid" -U nbd.sock --filter="$FILTER" file disk.img \
                 bitmap=b0 action=add granularity=64K durability=$1 \
                 control="$PWD/ctl.sock"
    pid=$(cat pid)
    nbdsh -u "nbd+unix:///?socket=$PWD/nbd.sock" \
          -c 'h.pwrite(b"a" * 4096, 0)' -c 'h.pwrite(b"b" * 4096, 1 << 20)'
    strace -f -qq -o /dev/null -p $pid -e trace=msync \
           -e inject=msync:signal=KILL:when=3 &
    st=$!
    cleanup_fn sh -c "kill $st 2>/dev/null; :"
    # Until every thread is traced.
    wait_until 10 traced $pid
    # No reply: the server dies before it can send one.
    python3 - "$PWD/ctl.sock" > reply <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(20)
s.connect(sys.argv[1])
s.sendall(b'{"execute": "transaction", "arguments": {"actions": ['
          b'{"action": "add", "bitmap": "b1"}, '
          b'{"action": "disable", "bitmap": "b0"}]}}\n')
while True:
    data = s.recv(4096)
    if not data:
        break
    sys.stdout.buffer.write(data)
EOF
    test ! -s reply
    wait_gone $pid
    wait $st
    # The file holds the transaction, b0 settling (flags 4: not
    # enabled, settling), b1 added.
    test "$(python3 "$edit" "$bm" entry-get 0 flags)" -eq 4
    dirtybitmap info "$bm" > info
    test "$(field info b1 recording)" = true
    test "$(field info b0 recording)" = false
}

for mode in flush coarse strict; do
    kill_in_settle $mode

    # Same boot: b0 is sound, with both writes.
    test "$(field info b0 consistent)" = true
    test "$(field info b0 'dirty bytes')" = 131072
    dirtybitmap check "$bm"

    # After a power loss.
    info_on_other_boot info2
    grep -F 'machine restarted since' info2
    case $mode in
        flush)
            test "$(field info2 b0 consistent)" = false ;;
        coarse)
            # The two writes are in the first coarse granule (16M): all
            # of it is dirty, from the shadow.
            test "$(field info2 b0 consistent)" = true
            test "$(field info2 b0 'dirty bytes')" -eq 16777216
            test "$(field info2 b0 'dirty because the machine stopped')" \
                 -eq $((16777216 - 131072)) ;;
        strict)
            test "$(field info2 b0 consistent)" = true
            test "$(field info2 b0 'dirty bytes')" = 131072 ;;
    esac
done

# The next start on the same boot settles b0: its flags are 0, and it
# keeps both writes.
kill_in_settle flush
rm -f nbd.sock
start_nbdkit -P "$PWD/pid" -U nbd.sock --filter="$FILTER" file disk.img
kill_nbdkit "$(cat pid)"
test "$(python3 "$edit" "$bm" entry-get 0 flags)" -eq 0
dirtybitmap map "$bm" b0 | awk '$3 == 0' > map
expect map <<'EOF'
         0       65536    0  data
   1048576       65536    0  data
EOF
