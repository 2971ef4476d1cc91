# SPDX-License-Identifier: BSD-3-Clause
# guest-lib.sh: the guest of the test-dirtybitmap-vm*.sh tests (make
# check-vm), sourced after functions.sh: what it needs, its kernel and
# initramfs made once into the build tree (build-initramfs.sh, exit
# 77 if a package is missing), and its boots, each on two disks
# served at Unix sockets.  qemu goes first at exit, before the
# servers of its disks (register them after sourcing this).
requires_dirtybitmap_filter
requires qemu-system-x86_64 --version
requires qemu-img --version
requires qemu-nbd --version
requires mkfs.ext4 -V
requires e2fsck -V
requires dumpe2fs -V
requires debugfs -V
vm="$abs_top_srcdir/tests/vm"

cache="$abs_top_builddir/tests/vm-cache"
r=0
"$vm/build-initramfs.sh" "$cache" || r=$?
[ $r -ne 77 ] || exit 77
[ $r -eq 0 ]

now () { date +%s.%N; }

qemu=
reader=
console=
stop_qemu ()
{
    [ -n "$qemu" ] && kill -s 0 $qemu 2>/dev/null || return 0
    echo "$0: stopping qemu"
    cat "$console"
    kill_nbdkit $qemu
}
cleanup_fn stop_qemu

# boot NAME SOCK0 SOCK1 [WORD...]: start the guest on the disks served
# at the Unix sockets SOCK0 (vda) and SOCK1 (vdb), with the words WORD
# on its kernel command line (vmtest.dir=DIR: see vm/init).  Its
# console is the FIFOs NAME.in (what it reads) and NAME.out (what it
# says, copied to NAME.log, which is $console); its agent's channel
# is NAME-qga.sock; $qemu is its pid.
boot ()
{
    local name=$1 sock0=$2 sock1=$3
    shift 3
    console="$PWD/$name.log"
    mkfifo "$name.in" "$name.out"
    cat "$name.out" > "$console" &
    reader=$!
    cleanup_fn kill_nbdkit $reader
    qemu-system-x86_64 -machine accel=tcg -m 256 -nographic -no-reboot \
        -monitor none -nic none \
        -kernel "$cache/vmlinuz" -initrd "$cache/initramfs.cpio" \
        -append "console=ttyS0 quiet loglevel=4 panic=-1 $*" \
        -chardev pipe,id=console,path="$name" \
        -serial chardev:console \
        -blockdev driver=nbd,server.type=unix,server.path="$sock0",node-name=disk0 \
        -device virtio-blk-pci,drive=disk0 \
        -blockdev driver=nbd,server.type=unix,server.path="$sock1",node-name=disk1 \
        -device virtio-blk-pci,drive=disk1 \
        -chardev socket,path="$PWD/$name-qga.sock",server=on,wait=off,id=qga0 \
        -device virtio-serial \
        -device virtserialport,chardev=qga0,name=org.qemu.guest_agent.0 \
        > "$name.qemu.out" 2>&1 &
    qemu=$!
}

# wait_console TEXT SECONDS: until the guest said TEXT; a guest that
# failed or died fails the test, showing its console.  (Once qemu is
# gone, its last words are in $console when the reader has ended.)
wait_console ()
{
    if wait_until "$2" _console_said "$1" &&
       grep -qF -- "$1" "$console"; then
        return 0
    fi
    echo "$0: the guest never said: $1"
    cat "$console" "${console%.log}.qemu.out"
    exit 1
}
# _console_said TEXT: the guest said TEXT, or it will say nothing more
# (it failed, or qemu is gone: once the reader has ended, its last
# words are in $console).
_console_said ()
{
    grep -qF -- "$1" "$console" && return 0
    grep -qF "vm: FAILED" "$console" && return 0
    if gone $qemu; then
        wait $reader || :
        return 0
    fi
    return 1
}

# no_errors WHEN: nothing the guest did failed (an I/O error, a write
# or fsync of its writers), by WHEN.
no_errors ()
{
    if grep -E "I/O error|failed|FAILED" "$console"; then
        echo "$0: the guest saw errors by $1"
        exit 1
    fi
}

# power_off: the guest stops its writers, unmounts and powers off, and
# qemu exits 0; both writers stopped, and nothing failed.
power_off ()
{
    local r=0
    echo stop > "${console%.log}.in"
    wait_console "vm: power off" 120
    wait $qemu || r=$?
    [ $r -eq 0 ]
    wait $reader || :       # (wait_console may have waited for it already)
    cat "$console"
    grep -F "writer disk0: stopped" "$console"
    grep -F "writer disk1: stopped" "$console"
    no_errors "its power off"
}

# console_size: the console log's size now (what check-set.py reads up
# to: the files whose fsync the guest had seen return by now).
console_size ()
{
    stat -c %s "$console"
}
