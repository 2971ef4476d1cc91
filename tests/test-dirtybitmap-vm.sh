#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A real guest (make check-vm, booted by tests/vm/guest-lib.sh):
# Debian's kernel on qemu-system-x86_64 (TCG), a busybox initramfs
# (tests/vm/build-initramfs.sh) running Debian's qemu-guest-agent, and
# two virtio disks, each served by its own nbdkit with the filter,
# ext4 on both.  The guest writes files on both disks nonstop and says
# on its console when each one's fsync returned (tests/vm/writer.sh).
# While it runs: a full backup of both
# disks and two incrementals into qcow2 overlays, each one run of
# dirtybitmap backup with a --disk for each (one cut for both), the
# first incremental with the file systems frozen through the guest
# agent (--guest-agent); then, after the guest shut down, a last
# incremental.  Each set, restored, must pass
# e2fsck -f after its journal is replayed (the frozen one must need no
# replay) and hold, on both disks, every file whose fsync had returned
# before the backup began, with exactly its bytes
# (tests/vm/check-set.py); the last one must equal the disks byte for
# byte.
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/vm/guest-lib.sh"

t_start=$(now)

# The disks and their servers.
for d in 0 1; do
    truncate -s 64M disk$d.img
    mkfs.ext4 -q -F -b 4096 -i 4096 -L disk$d disk$d.img
    start_nbdkit -P "$PWD/pid$d" -U "$PWD/sock$d" --filter="$FILTER" \
                 file disk$d.img control="$PWD/ctl$d"
done

# The guest: its console log is console.log.
boot console "$PWD/sock0" "$PWD/sock1"
wait_console "vm: running" 180
t_running=$(now)
# The agent answers, and nothing is frozen.
python3 "$vm/qga.py" console-qga.sock guest-fsfreeze-status > status
grep -Fx '"thawed"' status

# backup K [OPTIONS...]: backup set K of both disks, one run of
# dirtybitmap backup, from checkpoint cK (none for K=0) to c(K+1):
# set 0 into raw files, the others into qcow2 overlays of the set
# before, each served by qemu-nbd.  The console log's size when the
# run starts is upto.K; its JSON output is setK.json, its manifest
# setK.manifest.
backup ()
{
    local k=$1 d disks=() opts prev target
    shift
    for d in 0 1; do
        if [ $k -eq 0 ]; then
            target=set0-disk$d.img
        else
            if [ $k -eq 1 ]; then prev=(-b set0-disk$d.img -F raw)
            else prev=(-b set$((k - 1))-disk$d.qcow2 -F qcow2); fi
            qemu-img create -q -f qcow2 "${prev[@]}" set$k-disk$d.qcow2
            qemu-nbd -f qcow2 -k "$PWD/q$k-$d.sock" --fork \
                     --pid-file="$PWD/q$k-$d.pid" set$k-disk$d.qcow2
            cleanup_fn kill_nbdkit "$(cat q$k-$d.pid)"
            target="nbd+unix:///?socket=$PWD/q$k-$d.sock"
        fi
        disks+=(--disk "control=$PWD/ctl$d,source=nbd+unix:///?socket=$PWD/sock$d,target=$target,name=disk$d")
    done
    opts=(--checkpoint c$((k + 1)))
    [ $k -eq 0 ] || opts+=(--incremental c$k --remove-incremental)
    console_size > upto.$k
    dirtybitmap backup "${disks[@]}" "${opts[@]}" "$@" \
                --manifest set$k.manifest --output=json > set$k.json
    cat set$k.json set$k.manifest
    python3 - $k "$*" <<'PY'
import json, sys
k, opts = int(sys.argv[1]), sys.argv[2].split()
frozen = "--guest-agent" in opts or "--freeze-command" in opts
out = json.load(open("set%d.json" % k))
man = json.load(open("set%d.manifest" % k))
assert out["result"] == "complete" and man["result"] == "complete", out
assert (out["frozen-ms"] is not None) == frozen, out
assert man["cut"]["frozen"] == frozen, man
assert isinstance(out["cut-ms"], (int, float)), out
assert man["checkpoint"] == "c%d" % (k + 1), man
assert man["base"] == (None if k == 0 else "c%d" % k), man
assert [d["name"] for d in out["disks"]] == ["disk0", "disk1"], out
for d in out["disks"]:
    assert d["result"] == "complete", d
    # Each incremental has something to copy: the guest wrote meanwhile.
    assert k == 0 or d["bytes-copied"] > 0, d
PY
    if [ $k -gt 0 ]; then
        for d in 0 1; do wait_gone "$(cat q$k-$d.pid)"; done
    fi
    # Nothing the guest did failed (its disks stay usable throughout).
    no_errors "the end of backup $k"
}

sleep 2
backup 0
sleep 2
# (The guest is slow under TCG, more so on a busy host: its freeze may
# take longer than the default 10 s.)
backup 1 --guest-agent "$PWD/console-qga.sock" --freeze-timeout 60
# The agent thawed them.
python3 "$vm/qga.py" console-qga.sock guest-fsfreeze-status > status
grep -Fx '"thawed"' status
sleep 2
backup 2
sleep 1

# The guest stops its writers, unmounts and powers off.
power_off
t_off=$(now)
# The agent froze the file systems once, for backup 1 (it logs the
# freeze only).
[ "$(grep -c "agent: info: guest-fsfreeze called" console.log)" -eq 1 ]

# With the guest gone, the last incremental: the chain is the disks.
backup 3
console_size > upto.3

# Each set restored, and checked.
for d in 0 1; do
    cp --sparse=always set0-disk$d.img restore0-disk$d.img
    for k in 1 2 3; do
        qemu-img convert -f qcow2 -O raw set$k-disk$d.qcow2 \
                 restore$k-disk$d.img
    done
    cmp disk$d.img restore3-disk$d.img
    for k in 0 1 2 3; do
        case $k in 1) state=frozen ;; 3) state=clean ;; *) state=live ;; esac
        python3 "$vm/check-set.py" restore$k-disk$d.img disk$d console.log \
                "$(cat upto.$k)" $state
    done
done
t_end=$(now)
since () { awk "BEGIN { printf \"%.1f s\", $1 - $t_start }"; }
echo "$0: guest running after $(since $t_running), off after" \
     "$(since $t_off), all checked after $(since $t_end)"
