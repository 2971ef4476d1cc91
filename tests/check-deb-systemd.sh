#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# check-deb-systemd.sh: part of check-deb.sh, run in its directory with
# the package installed.  Boots a real systemd in a container made of
# this machine's /usr (systemd-nspawn --volatile=yes: a fresh /etc and
# /var, nothing of the machine changed) with an /etc/dirtybitmap/t.conf
# for a disk in ./srv, and has it start nbdkit-dirtybitmap@t.service:
# the unit starts and serves the disk with all its hardening, its
# control socket takes a backup, systemctl restart keeps what the
# bitmaps recorded, Restart=on-failure brings it back after kill -9
# with nothing lost, and stop removes its runtime directory.
#
# Without systemd-nspawn (package systemd-container), or where no
# container can boot, it says so and does not fail: check-deb.sh and
# make check test the rest.
set -e
set -x

if ! command -v systemd-nspawn; then
    echo "check-deb-systemd.sh: SKIPPED: systemd-nspawn is not installed" \
         "(systemd-container): the unit was not started by a real systemd"
    exit 0
fi

rm -rf srv etc && mkdir srv etc
truncate -s 4M srv/disk.img
cat > etc/t.conf <<'EOF'
# The container's disk.
DISK=/srv/dbm/disk.img
FILTER_ARGS=durability=strict
EOF
systemd-id128 new > machine-id

# What runs in the container, as a service; each step that passes is
# a line of srv/result, the first one that fails says so, then the
# container powers off.
cat > srv/check.sh <<'EOF'
#!/bin/bash
exec >> /srv/dbm/result 2>&1
echo booted
set -e
unit=nbdkit-dirtybitmap@t.service
run=/run/nbdkit-dirtybitmap/t
uri="nbd+unix:///?socket=$run/nbd.sock"
ctl=$run/control.sock
step () { echo "ok $*"; }
trap 'echo "FAILED at line $LINENO"; systemctl status --no-pager $unit;
      journalctl --no-pager -u $unit; systemctl poweroff --no-block' ERR
dirty () {
    dirtybitmap info --output=json --control $ctl |
        python3 -c 'import json, sys
for b in json.load(sys.stdin)["bitmaps"]:
    if b["name"] == sys.argv[1]:
        print(b["dirty-bytes"], b["consistent"])' "$1"
}

test -f /run/systemd/generator/$unit.d/50-read-write-paths.conf
grep -Fx 'ReadWritePaths=-"/srv/dbm"' \
    /run/systemd/generator/$unit.d/50-read-write-paths.conf
step generator ran at boot
systemctl start $unit
systemctl is-active $unit
pid=$(systemctl show -P MainPID $unit)
[ "$pid" = "$(cat $run/nbdkit.pid)" ]
grep -E '^NoNewPrivs:[[:space:]]+1$' /proc/$pid/status
step started, main pid $pid from the pidfile
nbdsh -u "$uri" -c 'h.pwrite(b"1" * 65536, 0)'
dirtybitmap backup --control $ctl --checkpoint c1 "$uri" /srv/dbm/backup.img
cmp /srv/dbm/backup.img /srv/dbm/disk.img
nbdsh -u "$uri" -c 'h.pwrite(b"2" * 65536, 1048576)'
[ "$(dirty c1)" = "65536 True" ]
step serves the disk, backup through the control socket
systemctl restart $unit
systemctl is-active $unit
[ "$(dirty c1)" = "65536 True" ]
step restart keeps the bitmaps
pid=$(systemctl show -P MainPID $unit)
kill -9 $pid
for i in $(seq 100); do
    [ "$(systemctl show -P NRestarts $unit)" = 1 ] &&
        systemctl -q is-active $unit && break
    sleep 0.2
done
[ "$(systemctl show -P NRestarts $unit)" = 1 ]
systemctl is-active $unit
[ "$(dirty c1)" = "65536 True" ]
dirtybitmap backup --control $ctl --incremental c1 --checkpoint c2 \
    --remove-incremental "$uri" /srv/dbm/backup.img
cmp /srv/dbm/backup.img /srv/dbm/disk.img
step restarted after kill -9, nothing lost
systemctl stop $unit
[ ! -e $run ]
step stopped, its runtime directory gone
echo done
systemctl poweroff --no-block
EOF
cat > etc/dbm-check.service <<'EOF'
[Unit]
Description=check-deb: nbdkit-dirtybitmap@t.service under systemd
[Service]
Type=oneshot
ExecStart=/bin/bash /srv/dbm/check.sh
EOF

status=0
timeout 300 systemd-nspawn -q -D / --volatile=yes --private-network \
    --register=no --keep-unit -M "dbmcheck$$" \
    --bind-ro="$PWD/machine-id:/etc/machine-id" \
    --bind-ro="$PWD/etc/t.conf:/etc/dirtybitmap/t.conf" \
    --bind-ro="$PWD/etc/dbm-check.service:/etc/systemd/system/dbm-check.service" \
    --bind="$PWD/srv:/srv/dbm" \
    -b -- --unit=dbm-check.service > nspawn.log 2>&1 || status=$?
cat srv/result || :
if ! grep -Fx booted srv/result 2>/dev/null; then
    tail -n 30 nspawn.log
    echo "check-deb-systemd.sh: SKIPPED: systemd-nspawn could not boot a" \
         "container here (status $status): the unit was not started by" \
         "a real systemd"
    exit 0
fi
grep -Fx done srv/result
