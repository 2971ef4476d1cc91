#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# nbdkit-dirtybitmap@.service, started as systemd would start it where
# no systemd can run: its ExecStart= line, read from the unit and its
# generated drop-in with the environment of its NAME.conf, run in a
# mount namespace set up as its ProtectSystem=, ReadWritePaths=,
# PrivateTmp=, ... ask (systemd-sandbox.sh), waited for through its
# PIDFile= as Type=forking does.  It serves the disk, its control
# socket answers, a backup can be taken, and a restart (after SIGTERM,
# and after kill -9, as Restart=on-failure does) keeps what the
# bitmaps recorded.  The settings made of seccomp, capabilities and
# other namespaces are not emulated: make check-deb starts the
# installed unit under a real systemd, where one can run.
source ./functions.sh
set -e
set -x

requires_dirtybitmap_filter
requires test "$(id -u)" -eq 0
requires unshare -m --propagation private true
requires setpriv --no-new-privs true
requires nsenter --version
requires python3 --version
# The unit's PrivateTmp= gives it an empty /tmp and /var/tmp: a build
# tree (the filter, the disk, the bitmaps) in one of them is out of
# its sight, as it would be for the real unit.
case "$(realpath "$abs_top_builddir")" in
    /tmp/*|/var/tmp/*)
        echo "$0: SKIP: the build tree $abs_top_builddir is under /tmp or" \
             "/var/tmp, which the unit's PrivateTmp= hides from it"
        exit 77 ;;
esac

unit_in="$abs_top_builddir/systemd/nbdkit-dirtybitmap@.service"
generator="$abs_top_builddir/systemd/nbdkit-dirtybitmap-generator"
name="dbmtest-$$"
rundir="/run/nbdkit-dirtybitmap/$name"

# The disk and its bitmap file in two directories, both of which only
# the generated drop-in makes writable.
mkdir units conf disks bitmaps
truncate -s 4M disks/disk.img
cat > conf/$name.conf <<EOF
# A test's disk.
DISK=$PWD/disks/disk.img
FILTER_ARGS="durability=strict bitmap-file=$PWD/bitmaps/disk.bitmaps"
EOF
cp "$unit_in" units/
DIRTYBITMAP_CONFIG_DIR="$PWD/conf" "$generator" "$PWD/units"

unit ()
{
    python3 "$abs_top_srcdir/tests/systemd-unit.py" \
        --env-file "conf/$name.conf" "units/nbdkit-dirtybitmap@.service" \
        "$name" "$@"
}

# Every setting of [Service] is run here, emulated, or said not to be.
sandbox=(--rw "-$rundir")
unit keys > keys
while read -r key; do
    case "$key" in
        Type) [ "$(unit get Type)" = forking ] ;;
        PIDFile|RuntimeDirectory|Environment|EnvironmentFile|ExecStart) ;;
        Restart|RestartSec) ;;  # the restarts below
        ProtectSystem) sandbox+=(--protect-system "$(unit get $key)") ;;
        ProtectHome) sandbox+=(--protect-home "$(unit get $key | tail -n 1)") ;;
        PrivateTmp) [ "$(unit get $key)" = yes ]; sandbox+=(--private-tmp) ;;
        ProtectKernelTunables)
            [ "$(unit get $key)" = yes ]; sandbox+=(--protect-kernel-tunables) ;;
        ProtectControlGroups)
            [ "$(unit get $key)" = yes ]; sandbox+=(--protect-control-groups) ;;
        NoNewPrivileges) [ "$(unit get $key)" = yes ]; sandbox+=(--no-new-privs) ;;
        ReadWritePaths)
            while read -r p; do sandbox+=(--rw "$p"); done < <(unit get $key) ;;
        ProtectKernelModules|ProtectKernelLogs|ProtectHostname|\
        RestrictAddressFamilies|RestrictNamespaces|RestrictRealtime|\
        RestrictSUIDSGID|LockPersonality|SystemCallArchitectures)
            echo "not emulated: $key" ;;
        *) echo "$0: the unit sets $key, which this test does not know"
           exit 1 ;;
    esac
done < keys
# The drop-in made both directories writable.
printf '%s\n' "${sandbox[@]}" | grep -Fx -- "-$PWD/disks"
printf '%s\n' "${sandbox[@]}" | grep -Fx -- "-$PWD/bitmaps"

pidfile="$(unit get PIDFile)"
[ "$pidfile" = "$rundir/nbdkit.pid" ]
[ "$(unit get RuntimeDirectory)" = "nbdkit-dirtybitmap/$name" ]

# The command line: nbdkit's pidfile, no action=, and the filter as
# built rather than as installed.
unit exec ExecStart > argv
cat argv
grep -Fx -- "$pidfile" argv
if grep -E '^action=' argv; then
    echo "$0: the unit's command line has action="
    exit 1
fi
grep -Fx -- "$PWD/disks/disk.img" argv
grep -Fx -- durability=strict argv
grep -Fx -- "bitmap-file=$PWD/bitmaps/disk.bitmaps" argv
[ "$(grep -cFx -- --filter=dirtybitmap argv)" = 1 ]
mapfile -t argv < <(sed "s|^--filter=dirtybitmap\$|--filter=$FILTER|" argv)

sock="$rundir/nbd.sock" ctl="$rundir/control.sock"
grep -Fx -- "$sock" argv
grep -Fx -- "control=$ctl" argv
uri="nbd+unix:///?socket=$sock"

# start: what systemctl start does for a Type=forking unit: make the
# RuntimeDirectory, run ExecStart, which must exit 0, and take the
# main process from the PIDFile, waiting for it (nbdkit's parent may
# exit before its child has written it: systemd waits too).  stop:
# SIGTERM, and the directory goes.
start ()
{
    mkdir -p "$rundir"
    unshare -m --propagation private -- \
        bash "$abs_top_srcdir/tests/systemd-sandbox.sh" "${sandbox[@]}" \
        -- "${argv[@]}"
    wait_until 10 [ -s "$pidfile" ] || :
    pid="$(cat "$pidfile")"
    kill -s 0 "$pid"
}
stop ()
{
    kill_nbdkit "$pid"
    rm -rf "$rundir"
}
cleanup_fn rm -rf "$rundir"
cleanup_fn rmdir --ignore-fail-on-non-empty /run/nbdkit-dirtybitmap
start
cleanup_fn kill_nbdkit "$pid"

# The sandbox is real: nbdkit runs with no_new_privs, cannot write
# /etc, and can write where the drop-in says.
grep -E '^NoNewPrivs:[[:space:]]+1$' /proc/$pid/status
if nsenter -t "$pid" -m touch /etc/dirtybitmap-test-$$ 2>err; then
    rm -f /etc/dirtybitmap-test-$$
    echo "$0: nbdkit's namespace lets it write /etc"
    exit 1
fi
grep -F 'Read-only file system' err
nsenter -t "$pid" -m touch "$PWD/bitmaps/writable"

# It serves the disk, and a full backup through its control socket
# begins the bitmaps with its checkpoint c1.
nbdsh -u "$uri" -c 'h.pwrite(b"1" * 65536, 0)'
dirtybitmap backup --control "$ctl" --checkpoint c1 "$uri" backup.img
cmp backup.img disks/disk.img
nbdsh -u "$uri" -c 'h.pwrite(b"2" * 65536, 1048576)'

# dirty BITMAP: the dirty bytes of BITMAP that the server reports.
dirty ()
{
    dirtybitmap info --output=json --control "$ctl" |
        python3 -c 'import json, sys
for b in json.load(sys.stdin)["bitmaps"]:
    if b["name"] == sys.argv[1]:
        print(b["dirty-bytes"], b["consistent"])' "$1"
}
[ "$(dirty c1)" = "65536 True" ]

# systemctl restart: the bitmap and what it recorded are still there,
# and the incremental backup copies just that.
stop
start
[ "$(dirty c1)" = "65536 True" ]
dirtybitmap backup --control "$ctl" --incremental c1 --checkpoint c2 \
    --remove-incremental "$uri" backup.img
cmp backup.img disks/disk.img

# A crash, and Restart=on-failure: nothing lost either.
nbdsh -u "$uri" -c 'h.pwrite(b"3" * 65536, 2097152)'
kill -9 "$pid"
wait_gone "$pid"
rm -rf "$rundir"
start
[ "$(dirty c2)" = "65536 True" ]
dirtybitmap backup --control "$ctl" --incremental c2 --checkpoint c3 \
    --remove-incremental "$uri" backup.img
cmp backup.img disks/disk.img
stop
